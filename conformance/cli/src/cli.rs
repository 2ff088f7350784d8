//! Command-line parsing; each subcommand hands off to its module.
//!
//! Every subcommand's help has one layout: a one-line purpose, the usage, its options grouped
//! under named headings (`Target`, `Run`, `Reports` for the commands that judge a target), then
//! the same closing blocks: what else it reads (`Environment:`, where it has one), `Exit
//! codes:` and `Example:`.

use std::process::ExitCode;

use clap::builder::StyledStr;
use clap::builder::styling::Styles;
use clap::{Parser, Subcommand};

use plimsoll_load::ProfileName;
use plimsoll_report::terminal::wrap;

use crate::args::{CheckArgs, ContractArgs, DiscoverArgs, DocsArgs, InitArgs, LoadArgs};

/// The command line: one subcommand per job.
#[derive(Debug, Parser)]
#[command(
    name = "plimsoll",
    version,
    about = "A machine-readable concurrency contract, its reference server and its conformance suite",
    after_help = top_help()
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands; each hands off to the library (or, for `serve`, the server) that does the
/// work.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check an implementation against the contract, clause by clause (default: the embedded reference server).
    #[command(after_help = check_help())]
    Check(CheckArgs),
    /// Run a goose load profile against an implementation, judged by the contract and a queueing prediction.
    #[command(after_help = load_help())]
    Load(LoadArgs),
    /// Regenerate docs/concurrency.md, docs/changelog.md, spec/openapi.json and spec/schemas/*.json from spec/contract.toml and spec/changelog.toml.
    #[command(after_help = docs_help())]
    Docs(DocsArgs),
    /// Run the reference server; its settings come from the environment.
    #[command(after_help = serve_help())]
    Serve(crate::serve::ServeArgs),
    /// Write a starting contract for your service, from its routes or its OpenAPI document, each value it cannot know a placeholder.
    #[command(after_help = init_help())]
    Init(InitArgs),
    /// Work on a contract document: `upgrade` rewrites a language-1 contract in language 2, `lint` lists what a draft leaves to fill in.
    #[command(
        mut_subcommand("upgrade", |upgrade: clap::Command| upgrade.after_help(upgrade_help())),
        mut_subcommand("lint", |lint: clap::Command| lint.after_help(lint_help()))
    )]
    Contract(ContractArgs),
    /// Measure one route of a running service from outside and write a contract draft of what it showed.
    #[command(after_help = discover_help())]
    Discover(DiscoverArgs),
}

/// Parses the command line and runs the command; its exit code is the process's.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Docs(args) => match &args.contract {
            Some(contract) => plimsoll_conformance::docs::render_contract(
                contract,
                args.out.as_deref(),
                args.check,
            ),
            None => plimsoll_conformance::docs::run(args.root, args.check),
        },
        Command::Serve(args) => crate::serve::run(args),
        Command::Check(args) => crate::embedded::run_check(args),
        Command::Load(args) => crate::embedded::run_load(args),
        Command::Init(args) => crate::init::run(args),
        Command::Contract(args) => crate::contract::run(args),
        Command::Discover(args) => crate::discover::run(args),
    };
    ExitCode::from(code)
}

/// The width clap lays its own help out in (without the `wrap_help` feature).
const HELP_WIDTH: usize = 100;

/// A closing block of a help page, headed like clap's own headings (`Options:`): each entry a
/// term (`0`, a command line) and what it means, beside a short term and on the next line
/// after a long one, wrapped with a hanging indent.
fn block(out: &mut String, heading: &str, entries: &[(&str, &str)]) {
    let style = Styles::default().get_header().to_owned();
    out.push_str(&format!("\n{style}{heading}:{style:#}\n"));
    let short = |term: &str| term.chars().count() <= 8;
    let term_width = entries
        .iter()
        .map(|(term, _)| term.chars().count())
        .filter(|w| *w <= 8)
        .max()
        .unwrap_or(0);
    for (term, meaning) in entries {
        if short(term) {
            let lead = format!("  {term:<term_width$}  ");
            let indent = lead.chars().count();
            let lines = wrap(meaning, indent, indent, HELP_WIDTH);
            out.push_str(&format!("{lead}{}\n", lines.join("\n")));
        } else {
            out.push_str(&format!("  {}\n", wrap(term, 2, 4, HELP_WIDTH).join("\n")));
            out.push_str(&format!(
                "      {}\n",
                wrap(meaning, 6, 6, HELP_WIDTH).join("\n")
            ));
        }
    }
}

/// The closing blocks: what else the command reads (if anything), exit codes, examples.
fn closing(
    extra: &[(&str, &[(&str, &str)])],
    exit_codes: &[(&str, &str)],
    examples: &[(&str, &str)],
) -> StyledStr {
    let mut out = String::new();
    for (heading, entries) in extra {
        block(&mut out, heading, entries);
    }
    block(&mut out, "Exit codes", exit_codes);
    block(&mut out, "Example", examples);
    StyledStr::from(out.trim_start_matches('\n').to_owned())
}

/// The exit codes of the commands that judge a target (`check`, `load`), one per
/// [`plimsoll_conformance::session::EXIT_PASS`] and its siblings.
fn judged_exit_codes(
    passed: &'static str,
    failed: &'static str,
) -> [(&'static str, &'static str); 3] {
    [
        ("0", passed),
        ("1", failed),
        (
            "2",
            "the run could not proceed (target unreachable, contract invalid, hooks off, a bad \
             option or path), said in one line on stderr",
        ),
    ]
}

fn top_help() -> StyledStr {
    let mut out = String::new();
    block(
        &mut out,
        "Example",
        &[
            (
                "plimsoll check",
                "check the embedded reference server: the first run to try",
            ),
            (
                "plimsoll check --help",
                "every option of a command, its exit codes and examples",
            ),
        ],
    );
    StyledStr::from(out.trim_start_matches('\n').to_owned())
}

fn check_help() -> StyledStr {
    closing(
        &[],
        &judged_exit_codes(
            "every check passed (skips allowed, unless --strict)",
            "a check failed; the summary after the checks says which and why",
        ),
        &[
            (
                "plimsoll check --html report.html",
                "the embedded reference server (scaled timeouts), with a timeline per check",
            ),
            (
                "plimsoll check --target http://127.0.0.1:8080 --strict --junit junit.xml",
                "your own service, started with PLIMSOLL_TEST_HOOKS=1, as a CI gate",
            ),
            (
                "plimsoll check --bridge-command 'exec ./node --relay-url {relay_url} --upstream {upstream_url}'",
                "a relay bridge: the checker plays its relay and its local handler (R1–R6)",
            ),
        ],
    )
}

fn load_help() -> StyledStr {
    let profiles: Vec<(&str, &str)> = ProfileName::ALL
        .iter()
        .map(|p| (p.as_str(), p.about()))
        .collect();
    closing(
        &[
            ("Profiles", &profiles),
            (
                "Environment",
                &[(
                    "PLIMSOLL_LOG",
                    "log filter of the checker and goose (default: warn,goose=error)",
                )],
            ),
        ],
        &judged_exit_codes(
            "every verdict of the profile passed",
            "a verdict failed; the summary after the verdicts says which and why",
        ),
        &[
            (
                "plimsoll load --profile burst",
                "waves of simultaneous requests against the embedded reference server",
            ),
            (
                "plimsoll load --profile soak --target http://127.0.0.1:8080 --pid 4242",
                "your own service below capacity for long, its memory and open files read from /proc",
            ),
            (
                "plimsoll load --profile overload --target LB --replica R1 --replica R2 --balancer random",
                "a fleet through its balancer, each replica judged on its own (docs/scaling.md)",
            ),
        ],
    )
}

fn docs_help() -> StyledStr {
    closing(
        &[],
        &[
            (
                "0",
                "every generated file written (or, with --check, fresh)",
            ),
            (
                "1",
                "--check: a generated file (or --out) is stale; each is named",
            ),
            (
                "2",
                "no contract found, the contract is invalid, or a file could not be written",
            ),
        ],
        &[
            (
                "plimsoll docs",
                "regenerate after editing spec/contract.toml, then commit",
            ),
            (
                "plimsoll docs --check",
                "in CI: fail while a generated file is stale",
            ),
            (
                "plimsoll docs --contract contract.toml --out CONTRACT.md",
                "your service's contract as a document, with what check judges of it",
            ),
        ],
    )
}

/// `plimsoll discover --help`'s closing blocks.
fn discover_help() -> StyledStr {
    closing(
        &[],
        &[
            ("0", "the draft written, and a valid contract"),
            (
                "1",
                "the draft written, but no refusal came up to the ceiling (its values are lower bounds) or it breaks a rule (each is named)",
            ),
            (
                "2",
                "the route could not be measured (unreachable, not served, answered otherwise) or the draft not written",
            ),
        ],
        &[(
            "plimsoll discover --target http://127.0.0.1:8080 --route 'POST /reports' --body report.json --hook X-Plimsoll-Hook --ceiling 8 -o draft.toml",
            "ramp up to 8 held reports at once, then write what the service showed",
        )],
    )
}

/// `plimsoll contract upgrade --help`'s closing blocks.
fn upgrade_help() -> StyledStr {
    closing(
        &[],
        &[
            (
                "0",
                "the upgraded document written, and valid in language 2",
            ),
            (
                "1",
                "the upgraded document written, but it breaks a rule of language 2 (each is named)",
            ),
            (
                "2",
                "the file could not be read or written, or it is not a language-1 contract",
            ),
        ],
        &[(
            "plimsoll contract upgrade old.toml > contract.toml",
            "rewrite a contract 1.x in language 2, then bump its version",
        )],
    )
}

/// `plimsoll init --help`'s closing blocks: what a placeholder is, exit codes, examples.
fn init_help() -> StyledStr {
    let placeholder = format!(
        "a value the routes cannot tell (workers, the queue, the refusal's status, how long the \
         slow request takes) is written as a string starting with \"{}\" that says what to \
         measure or decide; `check --contract` refuses the draft until each is replaced, and \
         `plimsoll contract lint` lists those left with their lines",
        plimsoll_spec::draft::PLACEHOLDER
    );
    closing(
        &[("Placeholders", &[("TODO", placeholder.as_str())])],
        &[
            ("0", "the draft written"),
            (
                "2",
                "a route, --body or --openapi could not be read or used, or --output exists \
                 (without --force); one line on stderr",
            ),
        ],
        &[
            (
                "plimsoll init --route 'GET /slow' -o contract.toml",
                "a pool for one route; then fill in its placeholders",
            ),
            (
                "plimsoll init --openapi openapi.json --group api -o contract.toml",
                "every operation of an OpenAPI 3.x document (JSON) in one pool",
            ),
        ],
    )
}

/// `plimsoll contract lint --help`'s closing blocks.
fn lint_help() -> StyledStr {
    let placeholder = format!(
        "a string value starting with \"{}\", written by `plimsoll init` where it could not know \
         the value; the contract's other rules are judged once none is left",
        plimsoll_spec::draft::PLACEHOLDER
    );
    closing(
        &[("Placeholders", &[("TODO", placeholder.as_str())])],
        &[
            (
                "0",
                "a contract `check --contract` accepts, no placeholder left",
            ),
            (
                "1",
                "placeholders left or rules broken: each on a line of stdout, FILE:LINE first",
            ),
            ("2", "the file could not be read, or it is not TOML"),
        ],
        &[(
            "plimsoll contract lint contract.toml",
            "after `plimsoll init`, and after each edit",
        )],
    )
}

fn serve_help() -> StyledStr {
    let overrides = plimsoll_spec::Contract::embedded()
        .override_envs()
        .join(", ");
    closing(
        &[(
            "Environment",
            &[
                (
                    overrides.as_str(),
                    "the contract's overrides; unset, the contract's own values apply",
                ),
                (
                    "PLIMSOLL_TEST_HOOKS=1",
                    "honour the test hooks the conformance checks drive the server with",
                ),
                (
                    "PLIMSOLL_TEMP_DIR, PLIMSOLL_LOG_FILE",
                    "as --temp-dir, --log-file",
                ),
                (
                    "PLIMSOLL_DRAIN_TIMEOUT_MS",
                    "how long SIGTERM waits for requests in flight",
                ),
            ],
        )],
        &[
            (
                "0",
                "stopped by SIGTERM or Ctrl-C, requests in flight drained",
            ),
            (
                "2",
                "could not start (a bad setting, the address in use); one line on stderr",
            ),
        ],
        &[(
            "PLIMSOLL_TEST_HOOKS=1 QUEUE_CAPACITY=2 plimsoll serve --port 8080",
            "a server to point `plimsoll check --target http://127.0.0.1:8080` at",
        )],
    )
}
