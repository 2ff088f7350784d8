//! `docs/concurrency.md`: the contract for people.

use std::fmt::Write;

use super::example_problem;
use crate::model::{Category, Contract, Hint, Topic};
use crate::{ClauseRef, Pool};

/// Renders the whole document.
pub fn concurrency_md(contract: &Contract) -> String {
    let mut md = String::new();
    let clauses = contract.clause_list();
    heading(
        &mut md,
        contract,
        "spec/contract.toml",
        "../spec/contract.toml",
    );
    let _ = writeln!(
        md,
        "> The same values drive the reference server, the OpenAPI document ([`spec/openapi.json`](../spec/openapi.json)) \
         and the conformance suite (`plimsoll check`).\n"
    );
    let _ = writeln!(md, "{}\n", contract.contract.summary);
    summary_section(&mut md, contract, &clauses);
    service_section(&mut md, contract);
    for category in [
        Category::Throughput,
        Category::Bounds,
        Category::Failure,
        Category::Relay,
    ] {
        let _ = writeln!(md, "## {}\n", category.title());
        for c in clauses.iter().filter(|c| c.category == category) {
            clause_section(&mut md, contract, c);
        }
    }
    errors_section(&mut md, contract);
    endpoints_section(&mut md, contract);
    observability_section(&mut md, contract);
    hooks_section(&mut md, contract);
    rules_section(&mut md, contract);
    tolerances_section(&mut md, contract);
    load_section(&mut md, contract);
    sources_section(&mut md, contract);
    md
}

/// `docs/changelog.md`: each release of the contract, newest first, with what an
/// implementation of the previous version must change.
pub fn changelog_md(changelog: &crate::Changelog) -> String {
    let mut md = String::from("# Contract changelog\n\n");
    let _ = writeln!(
        md,
        "<!-- Generated from spec/changelog.toml by `plimsoll docs`. Do not edit: change the changelog and regenerate. -->\n"
    );
    let _ = writeln!(
        md,
        "What each version of [`spec/contract.toml`](../spec/contract.toml) changed, newest first. \
         Moving an implementation from one version to the next is the steps under **What you \
         must change** of each version in between; the clauses themselves are in \
         [concurrency.md](concurrency.md).\n"
    );
    for r in &changelog.release {
        let _ = writeln!(md, "## {} ({})\n", r.version, r.date);
        let _ = writeln!(md, "{}\n", r.summary);
        if !r.clauses.is_empty() {
            let ids: Vec<_> = r.clauses.iter().map(|c| format!("`{c}`")).collect();
            let _ = writeln!(md, "Clauses: {}.\n", ids.join(", "));
        }
        let _ = writeln!(md, "**What you must change**\n");
        for step in &r.must_change {
            let _ = writeln!(md, "- {step}");
        }
        md.push('\n');
    }
    md.pop();
    md
}

/// A table's header row and the delimiter row under it.
fn table_head(md: &mut String, columns: &[&str]) {
    let _ = writeln!(md, "| {} |", columns.join(" | "));
    let _ = writeln!(md, "|{}", "---|".repeat(columns.len()));
}

/// The title and the do-not-edit notes, naming the contract file `source` (linked as `link`).
fn heading(md: &mut String, contract: &Contract, source: &str, link: &str) {
    let meta = &contract.contract;
    let _ = writeln!(md, "# {} ({} {})\n", meta.title, meta.name, meta.version);
    let _ = writeln!(
        md,
        "<!-- Generated from {source} by `plimsoll docs`. Do not edit: change the contract and regenerate. -->\n"
    );
    let _ = writeln!(
        md,
        "> Generated from [`{source}`]({link}) by `plimsoll docs`; do not edit."
    );
}

/// The document of any service's contract (one without the reference surface): its pools,
/// rate limits and refusals, and the checker's tolerances. `source` is the contract file as
/// the reader knows it. What `plimsoll check` judges of it is the checker's to add.
pub fn service_md(contract: &Contract, source: &str) -> String {
    let mut md = String::new();
    heading(&mut md, contract, source, source);
    let _ = writeln!(
        md,
        "> `plimsoll check --contract {source} --target URL` judges the service by these values.\n"
    );
    let _ = writeln!(md, "{}\n", contract.contract.summary);
    service_section(&mut md, contract);
    reports_section(&mut md, contract);
    tolerances_section(&mut md, contract);
    md
}

/// `## What the service reports`: its request id (F4), Server-Timing (T1), claim (`contract`)
/// and error log (F3), if it declares them.
fn reports_section(md: &mut String, contract: &Contract) {
    let mut lines = Vec::new();
    if let Some(ids) = &contract.request_id {
        let extra = match ids.client_id_extra_chars.as_str() {
            "" => String::new(),
            chars => format!(" and `{chars}`"),
        };
        let body = ids.error_pointer.as_ref().map_or(String::new(), |p| {
            format!(", and every error body repeats it at `{p}`")
        });
        lines.push(format!(
            "- Every answer carries `{}`: a client's own id when it is 1 to {} letters, digits{extra}, \
             else one of the service's{body} (F4; sent on `{} {}`).",
            ids.header, ids.client_id_max_len, ids.request.method, ids.request.path
        ));
    }
    if let Some(timing) = &contract.server_timing {
        lines.push(format!(
            "- Every served answer of a pool carries `{}` with `{}` (the time waited for a worker) \
             and `{}` (the time run), in milliseconds (T1 cross-checks them).",
            timing.header, timing.queue, timing.run
        ));
    }
    if let Some(claim) = &contract.claim {
        lines.push(format!(
            "- `GET {}` answers the service's effective values, this contract's JSON with a \
             deployment's overrides (the `contract` check compares them first).",
            claim.path
        ));
    }
    if let Some(logs) = &contract.error_logs {
        let fields: Vec<String> = logs.fields.iter().map(|f| format!("`{f}`")).collect();
        lines.push(format!(
            "- Every error answer has exactly one JSON line in the service's error log, carrying {} \
             (F3; the checker reads the log with `--server-log FILE`).",
            fields.join(", ")
        ));
    }
    if !lines.is_empty() {
        let _ = writeln!(md, "## What the service reports\n\n{}\n", lines.join("\n"));
    }
}

/// `## Summary`: one row per clause, linking to its section.
fn summary_section(md: &mut String, contract: &Contract, clauses: &[ClauseRef<'_>]) {
    let _ = writeln!(md, "## Summary\n");
    table_head(md, &["id", "clause", "value", "override"]);
    for c in clauses {
        let mut envs: Vec<String> = Vec::new();
        for site in contract
            .override_sites()
            .iter()
            .filter(|s| s.clause == c.id)
        {
            let env = format!("`{}`", site.spec.env);
            if !envs.contains(&env) {
                envs.push(env);
            }
        }
        let _ = writeln!(
            md,
            "| [{id}](#{anchor}) | {} | {} | {} |",
            c.title,
            contract.text(c, c.statement).replace('|', "\\|"),
            if envs.is_empty() {
                "—".to_owned()
            } else {
                envs.join(", ")
            },
            id = c.id,
            anchor = anchor(c),
        );
    }
    md.push('\n');
}

/// `## The service`: the pools the clauses judge, one row each, and what a full pool answers.
fn service_section(md: &mut String, contract: &Contract) {
    let _ = writeln!(
        md,
        "## The service\n\nThe service's pools (`[pools.NAME]`, contract language {}): each clause below \
         judges their values. A pool without routes is fed otherwise (the relay's runs envelopes).\n",
        contract.language
    );
    table_head(
        md,
        &[
            "pool",
            "routes",
            "workers",
            "queue",
            "deadline",
            "memory cap",
            "cancellation",
            "refusal",
        ],
    );
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "—".to_owned());
    for (name, p) in &contract.pools {
        let routes: Vec<String> = p
            .routes
            .iter()
            .map(|r| format!("`{} {}`", r.method, r.path))
            .collect();
        let mut queue = match p.queue.capacity.places() {
            Some(n) => format!("{n}, {}", p.queue.order.as_str()),
            None => format!("unbounded, {}", p.queue.order.as_str()),
        };
        if let (Some(ms), Some(answer)) = (p.queue.timeout_ms, &p.queue.timeout_answer) {
            let _ = write!(queue, ", `{answer}` after {ms} ms");
        }
        let workers = match &p.key {
            crate::model::LimitKey::All => p.workers.to_string(),
            crate::model::LimitKey::ClientAddress => format!("{} per client address", p.workers),
            crate::model::LimitKey::Header(h) => format!("{} per `{h}`", p.workers),
        };
        let _ = writeln!(
            md,
            "| `{name}` | {} | {workers} | {queue} | {} | {} | {} | {} |",
            or_dash((!routes.is_empty()).then(|| routes.join(", "))),
            or_dash(p.deadline_ms.map(|ms| format!("{ms} ms"))),
            or_dash(p.memory_cap_mb.map(|mb| format!("{mb} MB"))),
            or_dash(
                p.cancellation
                    .as_ref()
                    .map(|c| format!("stop within {} ms", c.stop_within_ms))
            ),
            or_dash(p.refusal.as_ref().map(|r| format!("`{r}`"))),
        );
    }
    md.push('\n');
    for (name, p) in &contract.pools {
        if let Some(f) = &p.failure {
            let body = (f.body.as_ref()).map_or("any body".to_owned(), |b| b.words());
            let _ = writeln!(
                md,
                "Pool `{name}`, when its dependency fails: {}, {body}.\n",
                f.status
            );
        }
    }
    rate_limits(md, contract);
    refusals_and_bounds(md, contract);
}

/// The rate limits (`[rate_limits.NAME]`), if any: each a token bucket of `burst + 1`.
fn rate_limits(md: &mut String, contract: &Contract) {
    if contract.rate_limits.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "The service's rate limits (`[rate_limits.NAME]`): each a token bucket of `burst + 1` \
         tokens refilled at its rate, an admitted request taking one.\n"
    );
    table_head(
        md,
        &[
            "limit",
            "routes",
            "rate",
            "burst",
            "burst mode",
            "key",
            "refusal",
        ],
    );
    for (name, l) in &contract.rate_limits {
        let routes: Vec<String> = l
            .routes
            .iter()
            .map(|r| format!("`{} {}`", r.method, r.path))
            .collect();
        let key = match &l.key {
            crate::model::LimitKey::All => "one for all".to_owned(),
            crate::model::LimitKey::ClientAddress => "per client address".to_owned(),
            crate::model::LimitKey::Header(h) => format!("per `{h}`"),
        };
        let _ = writeln!(
            md,
            "| `{name}` | {} | {}/s | {} | `{}` | {key} | `{}` |",
            routes.join(", "),
            l.rate_per_second,
            l.burst,
            l.burst_mode.as_str(),
            l.refusal
        );
    }
    md.push('\n');
}

/// Each refusal with its status, body and hint, then the connection and upload bounds.
fn refusals_and_bounds(md: &mut String, contract: &Contract) {
    for (name, r) in &contract.refusals {
        let status = contract.refusal_status(r).unwrap_or(0);
        let answer = match (r.error, &r.body) {
            (Some(code), _) => format!("`{code}`"),
            (None, Some(body)) => format!("with {}", body.words()),
            (None, None) => "with any body".to_owned(),
        };
        let hint = match &r.hint {
            None => "no hint".to_owned(),
            Some(Hint::Constant(h)) => format!("`{}: {}` on every refusal", h.header, h.seconds),
            Some(Hint::Range(h)) => format!(
                "`{}: N` on every refusal, N from {} to {} s",
                h.header, h.min_seconds, h.max_seconds
            ),
            Some(Hint::Estimated(h)) => format!(
                "`{}` ({}): the {} of the last {} queue waits, at least {} s",
                h.header,
                h.format.as_str(),
                h.estimator.as_str(),
                h.window_samples,
                h.min_seconds
            ),
        };
        let connection = r.connection.map_or(String::new(), |c| {
            format!(", its connection {}", c.as_str())
        });
        let _ = writeln!(
            md,
            "Refusal `{name}`: {status} {answer}, {hint}{connection}.\n"
        );
    }
    let mut bounds = Vec::new();
    if let Some(c) = &contract.connections {
        let cap = c.max_connections.map_or("no cap promised".to_owned(), |n| {
            format!("at most {n} at once")
        });
        bounds.push(format!(
            "Connections: a request head within {} ms, {cap}.",
            c.head_timeout_ms
        ));
    }
    if let Some(u) = &contract.upload {
        bounds.push(upload_bounds(contract, u));
    }
    if !bounds.is_empty() {
        let _ = writeln!(md, "{}\n", bounds.join(" "));
    }
}

/// The `[upload]` section in a sentence: what a stalled body gets, the largest body and what one
/// larger gets, the budget.
fn upload_bounds(contract: &Contract, u: &crate::model::Upload) -> String {
    let answer = |key: &Option<String>| match key.as_deref() {
        Some(key) => format!("answered as refusal `{key}`"),
        None => "its connection closed unanswered".to_owned(),
    };
    let mut words = if contract.is_reference() {
        format!(
            "Uploads: a body not read within {} ms of its head is answered `upload_timeout`.",
            u.read_timeout_ms
        )
    } else {
        format!(
            "Uploads: a body that sends nothing for {} ms is ended, {}.",
            u.read_timeout_ms,
            answer(&u.read_timeout_answer)
        )
    };
    if let (Some(max), Some(request)) = (u.max_body_bytes, &u.request) {
        let _ = write!(
            words,
            " `{} {}` takes bodies of at most {max} bytes, a larger one {}.",
            request.method,
            request.path,
            answer(&u.too_large)
        );
    }
    if let Some(budget) = u.budget_mb {
        let _ = write!(words, " {budget} MB of bodies held at once.");
    }
    words
}

/// `## Error codes`: the error body's shape and every code with its status.
fn errors_section(md: &mut String, contract: &Contract) {
    let _ = writeln!(md, "## Error codes\n");
    let _ = writeln!(
        md,
        "Every error body is `{}` (RFC 9457 `type`, `title`, `status`, `detail`) with the members \
         `error`, `code` and `request_id`, and `failed_stage` and `completed_stages` when the \
         request reached a stage or the queue (F1, B1); an answer that names no stage (rule \
         `input-order`, steps 1 to 5) may leave both out or send them null, and the reference \
         leaves them out ([schema](../spec/schemas/problem.schema.json); unknown members are \
         allowed).\n",
        crate::PROBLEM_CONTENT_TYPE
    );
    table_head(
        md,
        &[
            "code",
            "status",
            "clause",
            "endpoints",
            "Retry-After",
            "meaning",
        ],
    );
    for e in &contract.errors {
        let _ = writeln!(
            md,
            "| `{}` | {} | {} | {} | {} | {} |",
            e.code,
            e.status,
            e.clause,
            if e.applies_to.is_empty() {
                "any unknown path".to_owned()
            } else {
                e.applies_to.join(", ")
            },
            if e.retry_after { "yes" } else { "no" },
            e.title
        );
    }
    md.push('\n');
}

/// `## Endpoints and limits`: the routes, the input limits, the digitize parameters and the
/// stage names.
fn endpoints_section(md: &mut String, contract: &Contract) {
    let api = contract.api();
    let _ = writeln!(md, "## Endpoints and limits\n");
    table_head(md, &["endpoint", "path", "what"]);
    let _ = writeln!(
        md,
        "| digitize | `{} {}` | {} |",
        api.digitize.method, api.digitize.path, api.digitize.summary
    );
    let _ = writeln!(
        md,
        "| export | `{} {}` | {} |",
        api.export.method, api.export.path, api.export.summary
    );
    for (name, e) in [
        ("relay", &api.relay),
        ("contract", &api.contract),
        ("metrics", &api.metrics),
        ("healthz", &api.healthz),
    ] {
        let _ = writeln!(md, "| {name} | `GET {}` | {} |", e.path, e.summary);
    }
    md.push('\n');
    let _ = writeln!(
        md,
        "Digitize takes the image as the raw body ({}), at most {} bytes and {} pixels. \
         Export takes the design JSON, at most {} bytes, and writes {} (default `{}`). \
         Bodies are read before admission: a body slower than {} ms is answered `408 upload_timeout` and never holds a worker.\n",
        api.digitize
            .content_types
            .iter()
            .map(|t| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join(", "),
        api.digitize.max_upload_bytes,
        api.digitize.max_pixels,
        api.export.max_upload_bytes,
        api.export
            .formats
            .iter()
            .map(|f| format!("`{}`", f.as_str()))
            .collect::<Vec<_>>()
            .join(", "),
        api.export.default_format.as_str(),
        contract.upload().read_timeout_ms,
    );
    params_and_stages(md, contract);
}

/// The digitize parameters' table and the stage names of both pipelines.
fn params_and_stages(md: &mut String, contract: &Contract) {
    table_head(
        md,
        &[
            "digitize parameter",
            "kind",
            "min",
            "max",
            "default",
            "unit",
            "meaning",
        ],
    );
    for (name, p) in contract.api().digitize.params.iter() {
        let _ = writeln!(
            md,
            "| `{name}` | {:?} | {} | {} | {} | {} | {} |",
            p.kind, p.min, p.max, p.default, p.unit, p.description
        );
    }
    md.push('\n');
    let stage_list = |s: &[crate::Stage]| {
        s.iter()
            .map(|s| format!("`{s}`"))
            .collect::<Vec<_>>()
            .join(" → ")
    };
    let _ = writeln!(
        md,
        "Stages (the names in `failed_stage` and `completed_stages`): digitize {}; export {}. \
        A request still waiting for a worker is in `queue`.\n",
        stage_list(contract.pool(Pool::Digitize).stages),
        stage_list(contract.pool(Pool::Export).stages)
    );
}

/// `## Observability`: the headers every response carries and the metrics table.
fn observability_section(md: &mut String, contract: &Contract) {
    let obs = contract.observability();
    let _ = writeln!(md, "## Observability\n");
    let _ = writeln!(
        md,
        "Every response carries `{}`. Pipeline responses carry `{}: {}` (W3C Server-Timing, milliseconds). \
         `GET {}` serves Prometheus text with:\n",
        obs.request_id_header,
        obs.server_timing_header,
        obs.server_timing_metrics
            .iter()
            .map(|m| format!("{m};dur=…"))
            .collect::<Vec<_>>()
            .join(", "),
        contract.api().metrics.path
    );
    table_head(md, &["metric", "type", "labels", "meaning"]);
    for m in &obs.metrics {
        let _ = writeln!(
            md,
            "| `{}` | {:?} | {} | {} |",
            m.name,
            m.kind,
            m.labels.join(", "),
            m.help
        );
    }
    md.push('\n');
}

/// `## Test hooks`: the gate and the grammar.
fn hooks_section(md: &mut String, contract: &Contract) {
    let h = contract.hooks();
    let _ = writeln!(md, "## Test hooks\n");
    let _ = writeln!(
        md,
        "Honoured only when the server runs with `{}=1`; otherwise a request carrying `{}` is answered `400 {}`, \
         so a misconfigured gate notices. The grammar (ABNF, RFC 5234; a `%s` string is case-sensitive, RFC 7405), \
         the one the server parses and the OpenAPI document's pattern says:\n\n```text\n{}\n```\n\n`hold` waits at the start of a stage \
         (cancellation and the deadline still apply), `fail` makes a stage fail, `panic` makes it panic, `alloc` \
         charges megabytes to the request's memory budget; the rules of [Hook directives](#hook-directives) say \
         exactly what each does, and which stages do nothing where.\n",
        h.env, h.header, h.disabled_code, h.grammar
    );
}

/// `## Tolerances of the conformance suite`: the slack of the timing checks.
fn tolerances_section(md: &mut String, contract: &Contract) {
    let t = &contract.tolerances;
    let _ = writeln!(md, "## Tolerances of the conformance suite\n");
    table_head(md, &["what", "allowed"]);
    let _ = writeln!(
        md,
        "| refusal latency (a refusal's answer, from its sending) | ≤ {} ms |",
        t.refusal_latency_ms
    );
    let _ = writeln!(
        md,
        "| 504 after the deadline | ≤ {} ms late, never early |",
        t.timeout_late_ms
    );
    let _ = writeln!(
        md,
        "| p50 queue wait: checker's estimate vs the server's, before rounding up | ± {} ms |",
        t.retry_after_jitter_ms
    );
    let _ = writeln!(
        md,
        "| gauge sampling interval | {} ms |",
        t.metrics_poll_interval_ms
    );
    let _ = writeln!(
        md,
        "| trials per timing check | {} (judged on the worst) |",
        t.trials
    );
    let _ = writeln!(
        md,
        "| a request's arrival after its sending, where a rate limit's refill decides | ≤ {} ms |",
        t.rate_limit_slack_ms
    );
    md.push('\n');
}

/// `## Sources`: every document a clause cites, by key.
fn sources_section(md: &mut String, contract: &Contract) {
    let _ = writeln!(md, "## Sources\n");
    for (key, s) in &contract.sources {
        let _ = writeln!(md, "- `{key}`: {}", s.title);
    }
}

/// The anchor of a clause's heading in `docs/concurrency.md` (`t1-max-concurrent-digitize-requests`).
pub(super) fn anchor(c: &ClauseRef<'_>) -> String {
    slug(&format!("{} {}", c.id, c.title))
}

/// A heading's anchor as GitHub makes it: lowercase, spaces to `-`, punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|ch| match ch {
            'a'..='z' | '0'..='9' | '-' | '_' => Some(ch),
            ' ' => Some('-'),
            _ => None,
        })
        .collect()
}

/// `### ID Title`: one clause, with its values, rationale, rules, source, HTTP answers and check.
fn clause_section(md: &mut String, contract: &Contract, c: &ClauseRef<'_>) {
    let _ = writeln!(md, "### {} {}\n", c.id, c.title);
    let _ = writeln!(md, "**{}**\n", contract.text(c, c.statement));
    value_table(md, contract, c);
    let _ = writeln!(md, "**Rationale.** {}\n", contract.text(c, c.rationale));
    let rules: Vec<String> = contract
        .implementation
        .iter()
        .filter(|r| r.clause == Some(c.id))
        .map(|r| format!("[`{}`](#{})", r.id, topic_anchor(r.topic)))
        .collect();
    if !rules.is_empty() {
        let _ = writeln!(
            md,
            "**Implementation rules.** {} (in [Implementation rules](#implementation-rules)).\n",
            rules.join(", ")
        );
    }
    let source = contract
        .sources
        .get(&c.source.doc)
        .map(|s| s.title.as_str())
        .unwrap_or("?");
    let _ = writeln!(
        md,
        "**Source.** `{}` — {}: {}.\n",
        c.source.doc, source, c.source.section
    );
    http_shapes(md, contract, c);
    let _ = writeln!(
        md,
        "**How it is checked.** {} (`plimsoll check --only {}`)\n",
        contract.text(c, c.verification),
        c.id
    );
}

/// A clause's values, field by field, with the variables that override each: the fields of the
/// service's declaration it judges (`pools.digitize.workers`), then its own value's. Nothing for
/// a clause whose value is behaviour only.
fn value_table(md: &mut String, contract: &Contract, c: &ClauseRef<'_>) {
    let sites = contract.override_sites();
    let envs = |path: &str| {
        let envs: Vec<String> = sites
            .iter()
            .filter(|s| s.path == path)
            .map(|s| format!("`{}`", s.spec.env))
            .collect();
        if envs.is_empty() {
            "—".to_owned()
        } else {
            envs.join(", ")
        }
    };
    let mut rows: Vec<(String, &serde_json::Value)> = Vec::new();
    let doc = serde_json::to_value(contract).expect("a contract serializes");
    let mut leaves = Vec::new();
    for section in ["pools", "refusals", "connections", "upload"] {
        leaves_of(&doc[section], section.to_owned(), &mut leaves);
    }
    let relay = |path: &str| {
        path.split('.')
            .nth(1)
            .and_then(|name| contract.pools.get(name))
            .is_some_and(|p| path.starts_with("pools.") && p.routes.is_empty())
    };
    for (path, value) in &leaves {
        if crate::model::judged_by(path, relay(path)) == Some(c.id) {
            rows.push((path.clone(), value));
        }
    }
    for (field, value) in &c.value {
        rows.push((format!("clauses.{}.value.{field}", c.id), value));
    }
    if rows.is_empty() {
        return;
    }
    table_head(md, &["value", "setting", "override"]);
    for (path, value) in rows {
        let shown = match value {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let _ = writeln!(
            md,
            "| `{path}` | `{}` | {} |",
            shown.replace('|', "\\|"),
            envs(&path)
        );
    }
    md.push('\n');
}

/// Every scalar under `value` with its dotted path (`overrides` lists left out: they are the
/// table's third column).
fn leaves_of(value: &serde_json::Value, path: String, out: &mut Vec<(String, serde_json::Value)>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                if k != "overrides" && k != "routes" && k != "stages" {
                    leaves_of(v, format!("{path}.{k}"), out);
                }
            }
        }
        other => out.push((path, other.clone())),
    }
}

/// `**HTTP shape.**`: an example answer, headers and body, of every error code of the clause.
fn http_shapes(md: &mut String, contract: &Contract, c: &ClauseRef<'_>) {
    let errors: Vec<_> = contract
        .errors
        .iter()
        .filter(|e| e.clause == c.id)
        .collect();
    if errors.is_empty() {
        return;
    }
    let _ = writeln!(md, "**HTTP shape.**\n");
    for e in errors {
        let mut headers = vec![
            format!("Content-Type: {}", crate::PROBLEM_CONTENT_TYPE),
            format!("{}: <id>", contract.observability().request_id_header),
        ];
        if e.retry_after {
            headers.push(format!(
                "{}: <delay-seconds>",
                contract.retry_after().header
            ));
        }
        let body =
            serde_json::to_string_pretty(&example_problem(contract, e.code)).expect("serializes");
        let _ = writeln!(
            md,
            "`{}` {} — {}\n\n```http\nHTTP/1.1 {}\n{}\n\n{}\n```\n",
            e.code,
            e.status,
            e.title,
            e.status,
            headers.join("\n"),
            body
        );
    }
}

/// `## Load profiles`: what `plimsoll load` runs and judges, every number from `[load]`.
fn load_section(md: &mut String, contract: &Contract) {
    let l = &contract.load;
    let digitize = contract.pool(Pool::Digitize);
    let (workers, queue) = (digitize.workers, digitize.queue_capacity.unwrap_or(0));
    let (b, st, o, so) = (&l.burst, &l.steady, &l.overload, &l.soak);
    let _ = writeln!(md, "## Load profiles\n");
    let _ = writeln!(
        md,
        "`plimsoll load --profile NAME` drives the digitize endpoint with goose and judges the run against \
         the clauses above (see [`load.md`](load.md)). Rates are relative to capacity = workers / mean \
         service time ({workers} workers here), so the profiles fit any `WORKER_POOL_SIZE`. Each request \
         holds the `{}` stage with the test hook; in the rate profiles the hold is drawn per request from an \
         exponential distribution (cut at {}x its mean) and {} closed-loop users (at least) each think an \
         exponential time between answers, so the refused fraction must match the Engset prediction \
         (its finite-source M/M/c/K/N form when there is a queue) within ±{}σ. Throughout, `/metrics` is read every {} ms and the busy gauge must never exceed the \
         limit.\n",
        l.hold_stage, l.max_hold_factor, l.users, l.sigma, l.scrape_interval_ms
    );
    table_head(md, &["profile", "load", "hold", "duration", "judged by"]);
    let _ = writeln!(
        md,
        "| `burst` | {} waves of {} x workers = {} requests at once | {} ms fixed | until the waves are done | exactly workers + queue = {} admitted per wave, the rest `{}` with a valid `Retry-After` |",
        b.waves,
        b.factor,
        b.factor * workers,
        b.hold_ms,
        workers + queue,
        contract.error(crate::ErrorCode::Overloaded).status
    );
    let _ = writeln!(
        md,
        "| `steady` | {} x capacity | exponential, mean {} ms | {} s | refused fraction within the prediction; admitted p99 ≤ its hold + {} ms |",
        st.load_factor, st.mean_hold_ms, st.duration_s, st.latency_overhead_p99_ms
    );
    let _ = writeln!(
        md,
        "| `overload` | {} x capacity | exponential, mean {} ms | {} s | goodput ≥ {}% of what admission allows; refusal p99 < {} ms; only documented statuses; refused fraction within the prediction |",
        o.load_factor,
        o.mean_hold_ms,
        o.duration_s,
        o.goodput_fraction * 100.0,
        o.refusal_p99_ms
    );
    let _ = writeln!(
        md,
        "| `soak` | {} x capacity, {}% of clients give up halfway | exponential, mean {} ms | {} s | growth of RSS ≤ {} MB, of open files ≤ {}, of temp files ≤ {}; every slot comes back |",
        so.load_factor,
        so.cancel_fraction * 100.0,
        so.mean_hold_ms,
        so.duration_s,
        so.rss_growth_mb,
        so.fd_growth,
        so.temp_files_growth
    );
    md.push('\n');
    for (name, purpose) in [
        ("burst", &b.purpose),
        ("steady", &st.purpose),
        ("overload", &o.purpose),
        ("soak", &so.purpose),
    ] {
        let _ = writeln!(md, "- `{name}`: {purpose}");
    }
    let _ = writeln!(
        md,
        "\nAfter every profile the load stops, the busy gauge, queue depth and temp files must return to \
         zero, and workers + queue held requests must all be admitted again (no slot lost).\n"
    );
}

/// `## Implementation rules`: every `[[implementation]]` rule, grouped by topic, with the clause
/// that judges it.
fn rules_section(md: &mut String, contract: &Contract) {
    let _ = writeln!(md, "## Implementation rules\n");
    let _ = writeln!(
        md,
        "What an implementation does that the clauses' one-line statements leave open: the answers \
         an implementer would otherwise have to guess. Each rule is as normative as the clauses; \
         `plimsoll check` judges it under the clause named (the `contract` check where none is). \
         [`implementing.md`](implementing.md#what-to-build-the-checklist) turns these rules into a \
         checklist.\n"
    );
    let clauses = contract.clause_list();
    for topic in Topic::ALL {
        let rules: Vec<_> = contract
            .implementation
            .iter()
            .filter(|r| r.topic == topic)
            .collect();
        if rules.is_empty() {
            continue;
        }
        let _ = writeln!(md, "### {}\n", topic.title());
        for r in rules {
            let owner = match clauses.iter().find(|c| Some(c.id) == r.clause) {
                Some(c) => format!("[{}](#{})", c.id, anchor(c)),
                None => "`contract` check".to_owned(),
            };
            let text = contract.rule_text(r).unwrap_or_else(|_| r.rule.clone());
            let _ = writeln!(md, "- **`{}`** ({owner}). {text}", r.id);
        }
        md.push('\n');
    }
}

/// The anchor of a topic's heading.
fn topic_anchor(topic: Topic) -> String {
    slug(topic.title())
}
