//! The options of `plimsoll discover`: the route of a running service to measure, how a request
//! of it holds a worker, the most requests at once, and where the draft goes.

use std::path::PathBuf;

/// `plimsoll discover`'s command line.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Target")]
pub struct DiscoverArgs {
    /// The running service's base URL.
    #[arg(long, value_name = "URL")]
    pub target: String,
    /// The route to measure, as `METHOD PATH` (`'POST /reports'`); the path may carry a query.
    #[arg(long, value_name = "'METHOD PATH'")]
    pub route: String,
    /// The request's body, read from this file.
    #[arg(long, value_name = "FILE")]
    pub body: Option<PathBuf>,
    /// A header sent with every request, as `NAME: VALUE` (repeatable).
    #[arg(long = "header", value_name = "'NAME: VALUE'")]
    pub headers: Vec<String>,
    /// The route is slow on its own: the service answers it no sooner than this, holding a
    /// worker throughout (your word: discover cannot tell).
    #[arg(
        long,
        value_name = "MS",
        conflicts_with = "hook",
        required_unless_present_any = ["hook", "rate_limit"]
    )]
    pub slow_ms: Option<u64>,
    /// The service holds a request carrying `HEADER: hold=STAGE:MS` for MS (the
    /// `plimsoll-tower` layer, the `plimsoll_asgi` middleware, the reference server with its
    /// hooks on); discover picks MS.
    #[arg(long, value_name = "HEADER")]
    pub hook: Option<String>,
    /// The stage `--hook`'s `hold` names, `queue` unless given: a service with no stages of its
    /// own holds whatever the name (its own, `search`, reads best in the contract); the
    /// reference server holds only a stage its job runs (`parse` for export, the first). Only
    /// with `--hook`.
    // Checked where the plan is made, not by clap's `requires`: clap excuses a missing
    // requirement when an option that conflicts with it (`--slow-ms`) is present.
    #[arg(long, value_name = "STAGE")]
    pub hook_stage: Option<plimsoll_spec::StageName>,
    /// With --hook: hold one request MS and write the deadline that answers it first, if one
    /// does (the pool's `deadline_ms`); none within MS is said as such.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub deadline_within: Option<u64>,
    /// Measure the route's rate limit (a token bucket: its rate, its burst, delayed or not,
    /// its refusal) instead of a pool: after a quiet period, a burst of `--ceiling` requests at
    /// once, then probes paced above the rate. Writes a `[rate_limits.NAME]` draft.
    #[arg(long, conflicts_with_all = ["slow_ms", "hook"])]
    pub rate_limit: bool,
    /// With `--rate-limit`: a header whose value may key the limit (`X-Api-Key`); discover
    /// sends one value, then another while the first's bucket is spent.
    #[arg(long, value_name = "NAME", requires = "rate_limit")]
    pub key_header: Option<String>,
    /// With `--rate-limit`: how long to send nothing before the burst, so the bucket is full
    /// (2000 unless given: a bucket refilling slower is marked in the draft).
    #[arg(long, value_name = "MS", requires = "rate_limit")]
    pub quiet_ms: Option<u64>,
    /// The most requests discover has in flight at once; the ramp stops there (with
    /// `--rate-limit`, the burst's size).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256), help_heading = "Run")]
    pub ceiling: u32,
    /// Write the draft here instead of stdout.
    #[arg(long, short, value_name = "FILE", help_heading = "Run")]
    pub output: Option<PathBuf>,
}
