//! `plimsoll discover`: the command line turned into a [`Plan`], the route measured with its
//! progress on stderr ([`progress`]), the draft written and read back by the loader, so what it
//! writes is a contract this build accepts or the reason it is not.

mod progress;
mod rate;

use std::collections::BTreeMap;
use std::time::Duration;

use plimsoll_conformance::discover::{Holding, Limit, Plan, Step, discover, draft};
use plimsoll_spec::Contract;

use crate::args::DiscoverArgs;

/// What the command prints its lines after.
const WHO: &str = "plimsoll discover";

/// The request `args` describe: its method and path, its headers and its body.
type Request = (String, String, BTreeMap<String, String>, Option<String>);

/// The plan `args` describe, or why they describe none.
fn plan(args: &DiscoverArgs) -> Result<Plan, String> {
    let (method, path, headers, body) = request(args)?;
    // Checked here, not by clap's `requires` alone: clap excuses the missing `--rate-limit`
    // when `--slow-ms` or `--hook`, which conflict with it, is present.
    if args.key_header.is_some() || args.quiet_ms.is_some() {
        return Err(
            "--key-header and --quiet-ms are options of a rate limit's probe: give --rate-limit"
                .into(),
        );
    }
    if args.hook.is_none() && args.hook_stage.is_some() {
        return Err("--hook-stage names the stage of --hook's hold: give --hook".into());
    }
    if args.hook.is_none() && args.deadline_within.is_some() {
        return Err("--deadline-within holds a request by --hook's header: give --hook".into());
    }
    let holding = match (&args.hook, args.slow_ms) {
        (Some(header), _) => Holding::Hook {
            header: header.clone(),
            stage: args
                .hook_stage
                .clone()
                .unwrap_or_else(|| plimsoll_spec::Stage::Queue.into()),
        },
        (None, Some(ms)) => Holding::Slow(Duration::from_millis(ms)),
        (None, None) => return Err("give --slow-ms or --hook".into()),
    };
    Ok(Plan {
        target: args.target.trim_end_matches('/').to_owned(),
        method,
        path,
        body,
        headers,
        holding,
        ceiling: args.ceiling,
        deadline_within: args.deadline_within.map(Duration::from_millis),
    })
}

/// The route's request as `args` give it (`--route`, `--header`, `--body`), or why not.
fn request(args: &DiscoverArgs) -> Result<Request, String> {
    let (method, path) = args
        .route
        .trim()
        .split_once(' ')
        .map(|(m, p)| (m.trim().to_ascii_uppercase(), p.trim().to_owned()))
        .filter(|(m, p)| !m.is_empty() && p.starts_with('/'))
        .ok_or_else(|| format!("--route `{}` is not `METHOD /PATH`", args.route))?;
    let mut headers = BTreeMap::new();
    for header in &args.headers {
        let (name, value) = header
            .split_once(':')
            .ok_or_else(|| format!("--header `{header}` is not `NAME: VALUE`"))?;
        headers.insert(name.trim().to_owned(), value.trim().to_owned());
    }
    let body = match &args.body {
        Some(file) => {
            let bytes = std::fs::read(file)
                .map_err(|e| format!("cannot read --body {}: {e}", file.display()))?;
            Some(String::from_utf8(bytes).map_err(|_| {
                format!(
                    "--body {} is not UTF-8 text: a contract's request body is text, so an image or other binary body cannot be its held request's",
                    file.display()
                )
            })?)
        }
        None => None,
    };
    Ok((method, path, headers, body))
}

/// Measures with `measure` on a runtime of its own, its progress on stderr, renders the draft
/// with `render` and writes it to `output` (stdout when none): the findings and the draft's
/// text, or exit code 2 with what went wrong said on stderr. Both modes, a pool's and a rate
/// limit's, write their drafts through it.
fn measure_and_write<T, E: std::fmt::Display, R: std::fmt::Display>(
    output: Option<&std::path::Path>,
    measure: impl AsyncFnOnce(&mut dyn FnMut(Step)) -> Result<T, E>,
    render: impl FnOnce(&T) -> Result<String, R>,
) -> Result<(T, String), u8> {
    let runtime = tokio::runtime::Runtime::new().map_err(|e| {
        eprintln!("{WHO}: cannot start the async runtime: {e}");
        2u8
    })?;
    let mut progress = progress::Progress::new(WHO);
    let found = runtime.block_on(measure(&mut |step| progress.step(step)));
    progress.finish();
    let findings = found.map_err(|e| {
        eprintln!("{WHO}: {e}");
        2u8
    })?;
    let text = render(&findings).map_err(|e| {
        eprintln!("{WHO}: cannot write the draft: {e}");
        2u8
    })?;
    let written = match output {
        Some(path) => std::fs::write(path, &text).map_err(|e| format!("{}: {e}", path.display())),
        None => {
            print!("{text}");
            Ok(())
        }
    };
    if let Err(e) = written {
        eprintln!("{WHO}: cannot write the draft: {e}");
        return Err(2);
    }
    Ok((findings, text))
}

/// Runs `plimsoll discover`; returns the exit code: 0 the draft written and a valid contract,
/// 1 written but the limit is above the ceiling or the draft breaks a rule (each named), 2 the
/// route could not be measured or the draft not written.
pub(crate) fn run(args: DiscoverArgs) -> u8 {
    if args.rate_limit {
        return rate::run(args);
    }
    let plan = match plan(&args) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("{WHO}: {e}");
            return 2;
        }
    };
    eprintln!(
        "{WHO}: {} {} of {}: at most {} request(s) at once (--ceiling), never more",
        plan.method, plan.path, plan.target, plan.ceiling
    );
    let (findings, text) = match measure_and_write(
        args.output.as_deref(),
        async |say| discover(&plan, say).await,
        |findings| draft::render(&plan, findings),
    ) {
        Ok(done) => done,
        Err(code) => return code,
    };
    if findings.limit == Limit::AboveCeiling {
        eprintln!(
            "{WHO}: no refusal up to the ceiling of {}: the limit is above it, and the draft's workers and queue are lower bounds",
            plan.ceiling
        );
        return 1;
    }
    match Contract::from_toml(&text, "the draft") {
        Ok(_) => {
            eprintln!(
                "{WHO}: {} at once, {} waiting; the draft is a contract: `plimsoll check --contract DRAFT --target {}`",
                findings.workers, findings.queue, plan.target
            );
            0
        }
        Err(e) => {
            eprintln!("{WHO}: {e}");
            1
        }
    }
}
