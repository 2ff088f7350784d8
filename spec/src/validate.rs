//! The rules a contract must satisfy beyond its types: ranges, the seed's headroom arguments,
//! every error code exactly once, placeholders that resolve. Each broken rule is a
//! [`Violation`] naming its dotted field; [`crate::parse`] adds the line.

use std::collections::BTreeSet;

use crate::model::{Contract, Hint, LANGUAGE, MAX_BODY_TEXT, Refusal, RefusalBody};
use crate::parse::Violation;
use crate::{ClauseId, ErrorCode, MetricName, Pool, Stage};

impl Contract {
    /// Every rule of a contract document: the effective-value rules plus the headroom rules the
    /// seed argues in prose, which bind the document but not a deployment's overrides (a test
    /// deployment may scale timeouts down on purpose).
    pub fn violations(&self) -> Vec<Violation> {
        let mut out = self.effective_violations();
        let Some(clauses) = &self.clauses else {
            return out; // the headroom rules are the reference clauses' own
        };
        let factor = clauses.b1.value.headroom_factor;
        for (name, pool) in &self.pools {
            let (Some(deadline), Some(reference)) = (pool.deadline_ms, pool.reference_ms) else {
                continue;
            };
            let needed = factor.saturating_mul(reference);
            if deadline < needed {
                out.push(violation(
                    &format!("pools.{name}.deadline_ms"),
                    format!(
                        "{deadline} ms is below the headroom rule: at least {factor}x the reference duration ({reference} ms) = {needed} ms"
                    ),
                ));
            }
        }
        let peak = clauses.b2.value.reference_peak_mb;
        for (name, pool) in &self.pools {
            match pool.memory_cap_mb {
                Some(cap) if cap <= peak => out.push(violation(
                    &format!("pools.{name}.memory_cap_mb"),
                    format!(
                        "{cap} MB does not exceed the documented peak of the reference workload ({peak} MB)"
                    ),
                )),
                _ => {}
            }
        }
        out
    }

    /// The rules every effective contract (document or after overrides) must satisfy: the
    /// service's, for any contract; and once it declares `[api]`, the reference surface's.
    pub fn effective_violations(&self) -> Vec<Violation> {
        let mut out = [
            self.language_violations(),
            self.pool_violations(),
            self.refusal_violations(),
            self.hold_violations(),
            self.pool_metrics_violations(),
            self.rate_limit_violations(),
            self.bad_request_violations(),
            self.request_id_violations(),
            self.server_timing_violations(),
            self.error_log_violations(),
            self.claim_violations(),
            self.connection_violations(),
            self.failure_violations(),
            self.temp_files_violations(),
            self.upload_violations(),
            self.override_violations(),
            self.range_violations(),
            self.connection_cap_violations(),
            self.stage_violations(),
            self.error_table_violations(),
        ]
        .concat();
        if !self.is_reference() {
            return out;
        }
        let missing = self.missing_reference_sections();
        let pools: Vec<&str> = Pool::ALL
            .iter()
            .map(|p| p.as_str())
            .filter(|p| !self.pools.contains_key(*p))
            .collect();
        if !missing.is_empty() || !pools.is_empty() {
            // The rules below read the reference sections and pools; without them only this is
            // to say.
            let needs: Vec<String> = missing
                .iter()
                .map(|s| format!("[{s}]"))
                .chain(pools.iter().map(|p| format!("[pools.{p}]")))
                .collect();
            out.push(violation(
                "api",
                format!(
                    "declares the reference service's API, so it needs every section the \
                     reference checks read: {} missing (a contract for another service leaves \
                     out [api])",
                    needs.join(", ")
                ),
            ));
            return out;
        }
        out.extend(
            [
                self.clause_violations(),
                self.rule_violations(),
                self.reference_range_violations(),
                self.upload_budget_violations(),
                self.api_violations(),
                self.metric_violations(),
            ]
            .concat(),
        );
        out
    }

    /// Every clause's prose is present and its placeholders resolve, its source is a key of
    /// `[sources]`, and each override names one scalar field with a variable of its own.
    fn clause_violations(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        let mut envs = BTreeSet::new();
        for clause in self.clause_list() {
            let at = |f: &str| format!("clauses.{}.{f}", clause.id);
            for (field, text) in [
                ("title", clause.title),
                ("statement", clause.statement),
                ("rationale", clause.rationale),
                ("verification", clause.verification),
                ("source.section", &clause.source.section),
            ] {
                if text.trim().is_empty() {
                    out.push(violation(&at(field), "must not be empty".into()));
                }
                if let Err(e) = self.expand(&clause, text) {
                    out.push(violation(&at(field), e.to_string()));
                }
            }
            if !self.sources.contains_key(&clause.source.doc) {
                out.push(violation(
                    &at("source.doc"),
                    format!(
                        "`{}` is not a key of [sources] ({})",
                        clause.source.doc,
                        self.sources.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
            for o in clause.overrides {
                if !envs.insert(o.env.clone()) {
                    out.push(violation(
                        &at("overrides"),
                        format!("`{}` overrides two fields", o.env),
                    ));
                }
                match clause.value.get(&o.field) {
                    Some(v) if !v.is_object() && !v.is_array() => {}
                    _ => out.push(violation(
                        &at("overrides"),
                        format!(
                            "`{}` names `{}`, which is not a scalar field of value",
                            o.env, o.field
                        ),
                    )),
                }
            }
        }
        out
    }

    /// Every implementation rule has a well-formed id of its own and a non-empty text whose
    /// placeholders resolve.
    fn rule_violations(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        let mut ids = BTreeSet::new();
        for (i, rule) in self.implementation.iter().enumerate() {
            let at = |f: &str| format!("implementation.{i}.{f}");
            let well_formed = !rule.id.is_empty()
                && rule
                    .id
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !well_formed {
                out.push(violation(
                    &at("id"),
                    format!("`{}` is not lowercase letters, digits and `-`", rule.id),
                ));
            }
            if !ids.insert(rule.id.as_str()) {
                out.push(violation(
                    &at("id"),
                    format!("`{}` names two rules", rule.id),
                ));
            }
            if rule.rule.trim().is_empty() {
                out.push(violation(&at("rule"), "must not be empty".into()));
            }
            if let Err(e) = self.rule_text(rule) {
                out.push(violation(&at("rule"), e.to_string()));
            }
        }
        out
    }

    /// Every bounded number of the service lies in the range where it makes sense at all.
    fn range_violations(&self) -> Vec<Violation> {
        // (field, value, min, max)
        let mut ranges: Vec<(String, u64, u64, u64)> = Vec::new();
        let mut range = |field: &str, value: u64, min: u64, max: u64| {
            ranges.push((field.to_owned(), value, min, max));
        };
        for (name, pool) in &self.pools {
            let at = |f: &str| format!("pools.{name}.{f}");
            range(&at("workers"), pool.workers.into(), 1, 1_000_000);
            if let Some(places) = pool.queue.capacity.places() {
                range(&at("queue.capacity"), places.into(), 0, 1_000_000);
            }
            if let Some(ms) = pool.deadline_ms {
                range(&at("deadline_ms"), ms, 1, 86_400_000);
            }
            if let Some(ms) = pool.queue.timeout_ms {
                range(&at("queue.timeout_ms"), ms, 1, 3_600_000);
            }
            if let Some(mb) = pool.memory_cap_mb {
                range(&at("memory_cap_mb"), mb, 1, 1 << 20);
            }
            if let Some(stop) = &pool.cancellation {
                range(
                    &at("cancellation.stop_within_ms"),
                    stop.stop_within_ms,
                    1,
                    60_000,
                );
                let below = stop.stop_within_ms.saturating_sub(1).max(1);
                range(
                    &at("cancellation.checkpoint_interval_ms"),
                    stop.checkpoint_interval_ms,
                    1,
                    below,
                );
            }
        }
        for (name, refusal) in &self.refusals {
            if let Some(hint) = refusal.hint.as_ref().and_then(|h| h.estimated()) {
                let at = |f: &str| format!("refusals.{name}.hint.{f}");
                range(
                    &at("window_samples"),
                    hint.window_samples.into(),
                    1,
                    100_000,
                );
                range(&at("min_seconds"), hint.min_seconds, 1, 86_400);
            }
        }
        for (name, pool) in &self.pools {
            if let Some(ms) = pool.hold.as_ref().and_then(|h| h.at_least_ms) {
                range(&format!("pools.{name}.hold.at_least_ms"), ms, 1, 600_000);
            }
        }
        if let Some(c) = &self.connections {
            range(
                "connections.head_timeout_ms",
                c.head_timeout_ms,
                100,
                3_600_000,
            );
            if let Some(cap) = c.max_connections {
                range("connections.max_connections", cap.into(), 1, 1_000_000);
            }
        }
        if let Some(u) = &self.upload {
            range("upload.read_timeout_ms", u.read_timeout_ms, 1, 86_400_000);
            if let Some(budget) = u.budget_mb {
                range("upload.budget_mb", budget, 1, 1 << 24);
            }
            if let Some(max) = u.max_body_bytes {
                range("upload.max_body_bytes", max, 1, MAX_BODY_BYTES);
            }
        }
        range("tolerances.trials", self.tolerances.trials.into(), 1, 100);
        out_of_range(ranges)
    }

    /// Every bounded number of the reference surface lies in its range.
    fn reference_range_violations(&self) -> Vec<Violation> {
        let c = self.clauses();
        #[rustfmt::skip]
        let fixed: [(&str, u64, u64, u64); 8] = [
            ("clauses.B1.value.headroom_factor", c.b1.value.headroom_factor, 1, 1000),
            ("clauses.R4.value.overflow_factor", c.r4.value.overflow_factor.into(), 2, 100),
            ("clauses.R5.value.max_frame_body_bytes", c.r5.value.max_frame_body_bytes, 64, 1 << 24),
            ("clauses.R6.value.reconnect_within_ms", c.r6.value.reconnect_within_ms, 1, 60_000),
            // The first retry comes before the bound, or no bridge could meet it.
            ("clauses.R6.value.backoff_initial_ms", c.r6.value.backoff_initial_ms, 1, c.r6.value.reconnect_within_ms.saturating_sub(1).max(1)),
            ("clauses.R6.value.backoff_max_ms", c.r6.value.backoff_max_ms, c.r6.value.backoff_initial_ms, 600_000),
            ("clauses.R6.value.stop_within_ms", c.r6.value.stop_within_ms, 1, 60_000),
            ("api.digitize.max_pixels", self.api().digitize.max_pixels, 1, 1 << 32),
        ];
        out_of_range(
            fixed
                .map(|(f, v, min, max)| (f.to_owned(), v, min, max))
                .to_vec(),
        )
    }

    /// Every request a pool may hold sits on an open connection: the connection cap must leave
    /// room for all of them and one more (a /healthz probe, a /metrics scrape). Pools fed by no
    /// route (the relay's) hold no connection of their own.
    fn connection_cap_violations(&self) -> Vec<Violation> {
        let held: u64 = self
            .pools
            .values()
            .filter(|p| !p.routes.is_empty())
            .map(|p| u64::from(p.workers) + u64::from(p.queue.capacity.places().unwrap_or(0)))
            .sum();
        let Some(cap) = self.connections.as_ref().and_then(|c| c.max_connections) else {
            return Vec::new();
        };
        if u64::from(cap) > held {
            return Vec::new();
        }
        vec![violation(
            "connections.max_connections",
            format!(
                "{cap} must exceed the requests the pools can hold (workers + queue places of \
                 every pool with routes: {held})"
            ),
        )]
    }

    /// The bodies the pools can hold (every worker and queue place of both job pools at its
    /// endpoint's `max_upload_bytes`) plus one largest upload being read must fit the upload
    /// budget: otherwise the budget, not the pools, would refuse requests the pools can take.
    fn upload_budget_violations(&self) -> Vec<Violation> {
        // A budget left out is `upload_violations`' to name.
        let Some(budget_mb) = self.upload().budget_mb else {
            return Vec::new();
        };
        let needed = self.upload_budget_floor_bytes();
        if budget_mb.saturating_mul(1 << 20) >= needed {
            return Vec::new();
        }
        vec![violation(
            "upload.budget_mb",
            format!(
                "{} MB is below the bodies the pools can hold (workers + queue of both job \
                 pools at their max_upload_bytes) plus one largest upload: {} MB",
                budget_mb,
                needed.div_ceil(1 << 20)
            ),
        )]
    }

    /// The least upload budget (bytes) the pools and limits need: see
    /// `upload_budget_violations`. The B5 check stalls uploads up to the budget from here.
    pub fn upload_budget_floor_bytes(&self) -> u64 {
        let held = |pool: Pool, max: u64| {
            let limits = self.pool(pool);
            (u64::from(limits.workers) + u64::from(limits.queue_capacity.unwrap_or(0)))
                .saturating_mul(max)
        };
        let (digitize, export) = (&self.api().digitize, &self.api().export);
        held(Pool::Digitize, digitize.max_upload_bytes)
            .saturating_add(held(Pool::Export, export.max_upload_bytes))
            .saturating_add(digitize.max_upload_bytes.max(export.max_upload_bytes))
    }

    /// Every digitize parameter's default lies in its range, and export's default format is one
    /// it offers.
    fn api_violations(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        for (name, p) in self.api().digitize.params.iter() {
            if !(p.min <= p.default && p.default <= p.max) {
                out.push(violation(
                    &format!("api.digitize.params.{name}"),
                    format!(
                        "needs min <= default <= max, got {} <= {} <= {}",
                        p.min, p.default, p.max
                    ),
                ));
            }
        }
        if !self
            .api()
            .export
            .formats
            .contains(&self.api().export.default_format)
        {
            out.push(violation(
                "api.export.default_format",
                "is not one of `formats`".into(),
            ));
        }
        out
    }

    /// `[[errors]]` lists every code exactly once with an error status (`Retry-After` on 503
    /// only), and F2's codes are F2 errors.
    fn error_table_violations(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        // The reference surface answers every code; another service's table lists its own.
        let least = usize::from(self.is_reference());
        for code in ErrorCode::ALL {
            let n = self.errors.iter().filter(|e| e.code == code).count();
            if n > 1 || n < least {
                out.push(violation(
                    "errors",
                    format!("code `{code}` must appear exactly once, found {n}"),
                ));
            }
        }
        for (i, e) in self.errors.iter().enumerate() {
            let at = |f: &str| format!("errors.{i}.{f}");
            if !(400..=599).contains(&e.status) {
                out.push(violation(
                    &at("status"),
                    format!("{} is not an error status", e.status),
                ));
            }
            if e.retry_after && e.status != 503 {
                out.push(violation(
                    &at("retry_after"),
                    "Retry-After is only sent with 503".into(),
                ));
            }
        }
        let f2 = self.clauses.as_ref().map(|c| c.f2.value.codes.as_slice());
        for code in f2.unwrap_or_default() {
            if self
                .errors
                .iter()
                .find(|e| e.code == *code)
                .is_none_or(|e| e.clause != ClauseId::F2)
            {
                out.push(violation(
                    "clauses.F2.value.codes",
                    format!("`{code}` is not an F2 error in [[errors]]"),
                ));
            }
        }
        out
    }

    /// Each pool's stages are distinct and none of them is a pseudo-stage (`queue`, `relay`).
    fn stage_violations(&self) -> Vec<Violation> {
        self.pools
            .iter()
            .filter(|(_, pool)| {
                let unique: BTreeSet<_> = pool.stages.iter().collect();
                unique.len() != pool.stages.len()
                    || pool.stages.contains(&Stage::Queue)
                    || pool.stages.contains(&Stage::Relay)
            })
            .map(|(name, _)| {
                violation(
                    &format!("pools.{name}.stages"),
                    "needs distinct stages, none of them `queue` or `relay`".into(),
                )
            })
            .collect()
    }

    /// `[[observability.metrics]]` lists every metric exactly once.
    fn metric_violations(&self) -> Vec<Violation> {
        MetricName::ALL
            .into_iter()
            .filter_map(|name| {
                let n = self
                    .observability()
                    .metrics
                    .iter()
                    .filter(|m| m.name == name)
                    .count();
                (n != 1).then(|| {
                    violation(
                        "observability.metrics",
                        format!("metric `{name}` must appear exactly once, found {n}"),
                    )
                })
            })
            .collect()
    }

    /// The document is written in the language this build reads.
    fn language_violations(&self) -> Vec<Violation> {
        if self.language == LANGUAGE {
            return Vec::new();
        }
        vec![violation(
            "language",
            format!(
                "this build reads contract language {LANGUAGE}, the document is written in {}",
                self.language
            ),
        )]
    }

    /// Every pool is well formed: its routes are a method and a path, a bounded queue names
    /// the refusal a full pool answers (a key of `[refusals]`) and an unbounded one names none,
    /// a refusal's error is one the `[[errors]]` table answers, and the pools this build's
    /// checks judge are declared.
    fn pool_violations(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        for (table, n) in [
            ("pools", self.pools.len()),
            ("refusals", self.refusals.len()),
        ] {
            if n > MAX_ENTRIES {
                out.push(violation(
                    table,
                    format!("{n} entries; a contract declares at most {MAX_ENTRIES}"),
                ));
            }
        }
        for (name, pool) in &self.pools {
            let at = |f: &str| format!("pools.{name}.{f}");
            out.extend(route_violations(&at("routes"), &pool.routes));
            match (&pool.refusal, pool.queue.capacity.places()) {
                (None, Some(_)) => out.push(violation(
                    &at("refusal"),
                    "a bounded queue refuses when full: name its refusal (a key of [refusals])"
                        .into(),
                )),
                (Some(_), None) => out.push(violation(
                    &at("refusal"),
                    "an unbounded queue never refuses: it takes no refusal".into(),
                )),
                (Some(r), Some(_)) if !self.refusals.contains_key(r) => out.push(violation(
                    &at("refusal"),
                    format!("`{r}` is not a key of [refusals]"),
                )),
                _ => {}
            }
            out.extend(self.deadline_answer_violations(name, pool));
            let q = &pool.queue;
            match (q.timeout_ms, &q.timeout_answer) {
                (Some(_), Some(answer)) if !self.refusals.contains_key(answer) => {
                    out.push(violation(
                        &at("queue.timeout_answer"),
                        format!("`{answer}` is not a key of [refusals]"),
                    ))
                }
                (Some(_), None) | (None, Some(_)) => out.push(violation(
                    &at("queue"),
                    "a queue timeout is `timeout_ms` with its `timeout_answer` (a key of \
                     [refusals]), both or neither"
                        .into(),
                )),
                _ => {}
            }
            if q.timeout_ms.is_some() && q.capacity.places() == Some(0) {
                out.push(violation(
                    &at("queue.timeout_ms"),
                    "a queue of no places has no wait to time out".into(),
                ));
            }
        }
        out
    }

    /// A pool's deadline answer (B1): another service's deadline comes with the answer it gets
    /// (a key of [refusals]); the reference surface's is its `timeout` error.
    fn deadline_answer_violations(
        &self,
        name: &str,
        pool: &crate::model::PoolSpec,
    ) -> Vec<Violation> {
        let at = |f: &str| format!("pools.{name}.{f}");
        match (self.is_reference(), pool.deadline_ms, &pool.deadline_answer) {
            (true, _, Some(_)) => vec![violation(
                &at("deadline_answer"),
                "the reference surface answers its deadlines with its `timeout` error; \
                 `deadline_answer` is for another service's contract"
                    .into(),
            )],
            (false, Some(_), None) | (false, None, Some(_)) => vec![violation(
                &at("deadline_ms"),
                "a deadline is `deadline_ms` with its `deadline_answer` (a key of [refusals]), \
                 both or neither"
                    .into(),
            )],
            (false, Some(_), Some(answer)) if !self.refusals.contains_key(answer) => {
                vec![violation(
                    &at("deadline_answer"),
                    format!("`{answer}` is not a key of [refusals]"),
                )]
            }
            _ => Vec::new(),
        }
    }

    /// Every refusal answers either an error of `[[errors]]` or a status of its own (a
    /// client or server error), not both and not neither.
    fn refusal_violations(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        for (name, refusal) in &self.refusals {
            let at = |f: &str| format!("refusals.{name}.{f}");
            match (refusal.error, refusal.status) {
                (Some(code), None) if !self.errors.iter().any(|e| e.code == code) => {
                    out.push(violation(
                        &at("error"),
                        format!("`{code}` is not an error of [[errors]]"),
                    ))
                }
                (None, Some(status)) if !(400..=599).contains(&status) => out.push(violation(
                    &at("status"),
                    format!("{status} is not an error status"),
                )),
                (Some(_), Some(_)) | (None, None) => out.push(violation(
                    &format!("refusals.{name}"),
                    "answers either `error` (a code of [[errors]]) or `status`, exactly one".into(),
                )),
                _ => {}
            }
            if let Some(body) = &refusal.body {
                out.extend(refusal_body_violations(&at("body"), refusal, body));
            }
            if let Some(Hint::Range(h)) = &refusal.hint {
                if h.min_seconds > h.max_seconds {
                    out.push(violation(
                        &at("hint"),
                        format!(
                            "`min_seconds` {} is above `max_seconds` {}: no delay fits",
                            h.min_seconds, h.max_seconds
                        ),
                    ));
                }
                if h.max_seconds > 86_400 {
                    out.push(violation(
                        &at("hint.max_seconds"),
                        format!("{} is out of range 0..=86400", h.max_seconds),
                    ));
                }
            }
        }
        out
    }

    /// A pool holds one way, by a hook with a header name or by a slow recipe the checker can
    /// send ([`recipe_violations`]).
    fn hold_violations(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        for (name, pool) in &self.pools {
            let Some(hold) = &pool.hold else { continue };
            let ways = [
                hold.at_least_ms.is_some(),
                hold.hook.is_some(),
                hold.dependency.is_some(),
            ];
            if ways.iter().filter(|w| **w).count() != 1 {
                out.push(violation(
                    &format!("pools.{name}.hold"),
                    "holds by a slow request (`at_least_ms`), by a hook (`hook`) or by a \
                     dependency the checker plays (`dependency`), exactly one"
                        .into(),
                ));
            }
            if let Some(dependency) = &hold.dependency {
                out.extend(dependency_violations(
                    &format!("pools.{name}.hold.dependency"),
                    dependency,
                ));
            }
            if let Some(hook) = &hold.hook
                && !http_token(&hook.header)
            {
                out.push(violation(
                    &format!("pools.{name}.hold.hook.header"),
                    format!("`{}` is not a header name", hook.header),
                ));
            }
            out.extend(recipe_violations(
                &format!("pools.{name}.hold.request"),
                &hold.request,
                SUCCESS,
            ));
        }
        out
    }

    /// Every pool's declared series are ones the checker can read: a path like a recipe's, at
    /// least one series, each a Prometheus metric name with at most 16 labels, each a label
    /// name with a value of at most 256 bytes.
    fn pool_metrics_violations(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        for (name, pool) in self.pools.iter().take(MAX_ENTRIES) {
            let Some(metrics) = &pool.metrics else {
                continue;
            };
            let at = |f: &str| format!("pools.{name}.metrics.{f}");
            if !metrics.path.starts_with('/')
                || metrics.path.len() > 1024
                || !metrics.path.bytes().all(|b| b.is_ascii_graphic())
            {
                out.push(violation(
                    &at("path"),
                    "needs a path of visible ASCII starting with `/`, at most 1 KB".into(),
                ));
            }
            if metrics.declared().next().is_none() {
                out.push(violation(
                    &format!("pools.{name}.metrics"),
                    "declares no series (`busy`, `queued`, `limit` or `refused`)".into(),
                ));
            }
            for (what, series) in metrics.declared() {
                if let Some(why) = series_problem(series) {
                    out.push(violation(&at(what), why));
                }
            }
        }
        out
    }

    /// Every rate limit is one the checker can measure and send: at most [`MAX_ENTRIES`] of
    /// them, well-formed routes, a rate of 1 to 1000 a second and a burst of at most 1000 (the
    /// checker sends a burst's requests at once), a refusal of `[refusals]`, and a request it
    /// can send.
    fn rate_limit_violations(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        if self.rate_limits.len() > MAX_ENTRIES {
            out.push(violation(
                "rate_limits",
                format!(
                    "{} entries; a contract declares at most {MAX_ENTRIES}",
                    self.rate_limits.len()
                ),
            ));
        }
        for (name, limit) in self.rate_limits.iter().take(MAX_ENTRIES) {
            let at = |f: &str| format!("rate_limits.{name}.{f}");
            out.extend(route_violations(&at("routes"), &limit.routes));
            out.extend(out_of_range(vec![
                (at("rate_per_second"), limit.rate_per_second.into(), 1, 1000),
                (at("burst"), limit.burst.into(), 0, 1000),
            ]));
            if !self.refusals.contains_key(&limit.refusal) {
                out.push(violation(
                    &at("refusal"),
                    format!("`{}` is not a key of [refusals]", limit.refusal),
                ));
            }
            out.extend(recipe_violations(&at("request"), &limit.request, SUCCESS));
        }
        out
    }

    /// Every pool's bad requests are ones the checker can send and judge: at most
    /// [`MAX_BAD_REQUESTS`] in the whole contract, each named, a recipe it can send whose
    /// status is a client error (F2: bad input is never a server error), and a code, when
    /// given, at a JSON Pointer of at most 1 KB with a value of at most 1 KB.
    fn bad_request_violations(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        let total: usize = (self.pools.values())
            .map(|p| p.bad_requests.len() + p.over_cap.len())
            .sum();
        if total > MAX_BAD_REQUESTS {
            out.push(violation(
                "pools",
                format!(
                    "{total} bad and over-cap requests; a contract declares at most \
                     {MAX_BAD_REQUESTS} in all"
                ),
            ));
            return out; // each is cheap to judge, but not this many
        }
        for (name, pool) in &self.pools {
            if !pool.over_cap.is_empty() && pool.memory_cap_mb.is_none() {
                out.push(violation(
                    &format!("pools.{name}.over_cap"),
                    "a request over the memory cap needs the pool's `memory_cap_mb`".into(),
                ));
            }
            let lists = [
                ("bad_requests", &pool.bad_requests, CLIENT_ERROR),
                ("over_cap", &pool.over_cap, ERROR),
            ];
            for (list, requests, statuses) in lists {
                out.extend(answered_violations(
                    &format!("pools.{name}.{list}"),
                    requests,
                    statuses,
                ));
            }
        }
        out
    }

    /// `[request_id]` is one the checker can judge: for a service without the reference surface
    /// (whose id is `clauses.f4`), a header name, a kept length of 1 to 1024 bytes (the checker
    /// sends an id that long and one a byte longer), at most 32 extra characters, each visible
    /// ASCII but a comma (a comma joins two ids in one field), a recipe it can send, and an
    /// error pointer that is a JSON Pointer of at most 1 KB.
    fn request_id_violations(&self) -> Vec<Violation> {
        let Some(ids) = &self.request_id else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if self.is_reference() {
            out.push(violation(
                "request_id",
                "the reference surface declares its request id in `clauses.f4`; `[request_id]` \
                 is for another service's contract"
                    .into(),
            ));
        }
        if !http_token(&ids.header) {
            out.push(violation(
                "request_id.header",
                format!("`{}` is not a header name", ids.header),
            ));
        }
        if !(1..=1024).contains(&ids.client_id_max_len) {
            out.push(violation(
                "request_id.client_id_max_len",
                format!("{} is not within 1..=1024", ids.client_id_max_len),
            ));
        }
        let extra = &ids.client_id_extra_chars;
        if extra.len() > 32 || !extra.bytes().all(|b| b.is_ascii_graphic() && b != b',') {
            out.push(violation(
                "request_id.client_id_extra_chars",
                "at most 32 characters, each visible ASCII but a comma".into(),
            ));
        }
        out.extend(recipe_violations(
            "request_id.request",
            &ids.request,
            SUCCESS,
        ));
        if let Some(pointer) = &ids.error_pointer
            && (!pointer.starts_with('/') || pointer.len() > 1024)
        {
            out.push(violation(
                "request_id.error_pointer",
                "is not a JSON Pointer (`/`-prefixed tokens) of at most 1 KB".into(),
            ));
        }
        out
    }

    /// `[server_timing]` is another service's (the reference's is `[observability]`), a header
    /// name and two distinct entry names, each a token.
    fn server_timing_violations(&self) -> Vec<Violation> {
        let Some(timing) = &self.server_timing else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if self.is_reference() {
            out.push(violation(
                "server_timing",
                "the reference surface declares its Server-Timing in `[observability]`; \
                 `[server_timing]` is for another service's contract"
                    .into(),
            ));
        }
        for (field, name) in [
            ("header", &timing.header),
            ("queue", &timing.queue),
            ("run", &timing.run),
        ] {
            if !http_token(name) || name.len() > 256 {
                out.push(violation(
                    &format!("server_timing.{field}"),
                    format!("`{name}` is not a token of at most 256 bytes"),
                ));
            }
        }
        if timing.queue == timing.run {
            out.push(violation(
                "server_timing.run",
                "names the same entry as `queue`".into(),
            ));
        }
        out
    }

    /// `[error_logs]` is another service's (the reference's is `clauses.f3`), joined to its
    /// answers by the id `[request_id]` declares: its fields name `request_id`, at most 32 of
    /// them, each 1 to 64 bytes.
    fn error_log_violations(&self) -> Vec<Violation> {
        let Some(logs) = &self.error_logs else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if self.is_reference() {
            out.push(violation(
                "error_logs",
                "the reference surface declares its error lines in `clauses.f3`; `[error_logs]` \
                 is for another service's contract"
                    .into(),
            ));
        }
        if self.request_id.is_none() {
            out.push(violation(
                "error_logs",
                "a line is joined to its answer by the request id: declare `[request_id]` too"
                    .into(),
            ));
        }
        let named = logs.fields.iter().any(|f| f == "request_id");
        let sized =
            logs.fields.len() <= 32 && logs.fields.iter().all(|f| (1..=64).contains(&f.len()));
        if !named || !sized {
            out.push(violation(
                "error_logs.fields",
                "names `request_id` among at most 32 fields, each 1 to 64 bytes".into(),
            ));
        }
        out
    }

    /// `[claim]` is another service's (the reference's is `api.contract`), at a path the checker
    /// can ask: one a `GET` recipe could have.
    fn claim_violations(&self) -> Vec<Violation> {
        let Some(claim) = &self.claim else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if self.is_reference() {
            out.push(violation(
                "claim",
                "the reference surface serves its claim at `api.contract`; `[claim]` is for \
                 another service's contract"
                    .into(),
            ));
        }
        let get = crate::model::Recipe::get(&claim.path);
        out.extend(recipe_violations("claim", &get, SUCCESS));
        out
    }

    /// `[connections]` is one B4 can judge: the reference surface caps its connections and
    /// asks `api.healthz`; another service's contract names the request a kept connection
    /// asks (its cap may be left out).
    fn connection_violations(&self) -> Vec<Violation> {
        let Some(c) = &self.connections else {
            return Vec::new();
        };
        match (self.is_reference(), &c.request) {
            (true, Some(_)) => vec![violation(
                "connections.request",
                "the reference surface's connections ask `api.healthz`; `request` is for \
                 another service's contract"
                    .into(),
            )],
            (true, None) if c.max_connections.is_none() => vec![violation(
                "connections.max_connections",
                "the reference server caps its connections: declare the cap".into(),
            )],
            (true, None) => Vec::new(),
            (false, Some(request)) => recipe_violations("connections.request", request, SUCCESS),
            (false, None) => vec![violation(
                "connections",
                "B4 keeps connections open with a request answered at once whatever the pools \
                 hold: declare it as `request` (a health path, such as `GET /healthz`)"
                    .into(),
            )],
        }
    }

    /// A pool's `failure` (F1) is one the checker can provoke: the pool is held by a dependency
    /// the checker plays (which fails a call), the answer is a server error, its body a shape
    /// the checker can match. The reference surface's failures are `clauses.F1`'s (its hooks).
    fn failure_violations(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        for (name, pool) in &self.pools {
            let Some(failure) = &pool.failure else {
                continue;
            };
            let at = format!("pools.{name}.failure");
            if self.is_reference() {
                out.push(violation(
                    &at,
                    "the reference surface's failures are `clauses.F1`'s, provoked by its hook; \
                     a pool's `failure` is for another service's contract"
                        .into(),
                ));
            }
            if pool
                .hold
                .as_ref()
                .and_then(|h| h.dependency.as_ref())
                .is_none()
            {
                out.push(violation(
                    &at,
                    "the checker provokes the failure as the dependency the pool is held by: \
                     declare `hold.dependency`"
                        .into(),
                ));
            }
            if !(500..=599).contains(&failure.status) {
                out.push(violation(
                    &format!("{at}.status"),
                    format!("{} is not a server error (500-599)", failure.status),
                ));
            }
            if let Some(body) = &failure.body {
                out.extend(body_shape_violations(&format!("{at}.body"), body));
            }
        }
        out
    }

    /// `[temp_files]` is another service's (the reference's is its rule `temp-folder`), named
    /// by an environment variable a shell can set.
    fn temp_files_violations(&self) -> Vec<Violation> {
        let Some(temp) = &self.temp_files else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if self.is_reference() {
            out.push(violation(
                "temp_files",
                "the reference surface keeps its temp folder by its rule `temp-folder`; \
                 `[temp_files]` is for another service's contract"
                    .into(),
            ));
        }
        let name_ok = (1..=256).contains(&temp.env.len())
            && !temp.env.starts_with(|c: char| c.is_ascii_digit())
            && temp
                .env
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !name_ok {
            out.push(violation(
                "temp_files.env",
                format!("`{}` is not an environment variable's name", temp.env),
            ));
        }
        out
    }

    /// `[upload]`: the reference surface's has its budget (B5) and answers with its own errors
    /// on `api.digitize`; another service's names the request its bodies go to, the answers
    /// by keys of `[refusals]`, and no budget (B5 fills one with the reference routes' bodies).
    fn upload_violations(&self) -> Vec<Violation> {
        let Some(u) = &self.upload else {
            return Vec::new();
        };
        if self.is_reference() {
            return reference_upload_violations(u);
        }
        let mut out = Vec::new();
        if u.budget_mb.is_some() {
            out.push(violation(
                "upload.budget_mb",
                "B5 fills the budget with the reference API's uploads; a contract without \
                 `[api]` cannot declare one yet"
                    .into(),
            ));
        }
        match &u.request {
            Some(request) => {
                out.extend(recipe_violations("upload.request", request, SUCCESS));
                let body = request.body().map_or(0, |b| b.len() as u64);
                if u.max_body_bytes.is_some_and(|max| body > max) {
                    out.push(violation(
                        "upload.request.body",
                        "is longer than `max_body_bytes`: the checker grows it to the limit".into(),
                    ));
                }
            }
            None => out.push(violation(
                "upload",
                "the checker sends its bodies to a route of the service: declare it as \
                 `request` (its body is grown with trailing spaces)"
                    .into(),
            )),
        }
        for (field, key) in [
            ("read_timeout_answer", &u.read_timeout_answer),
            ("too_large", &u.too_large),
        ] {
            if let Some(key) = key.as_ref().filter(|k| !self.refusals.contains_key(*k)) {
                out.push(violation(
                    &format!("upload.{field}"),
                    format!("`{key}` is not a key of [refusals]"),
                ));
            }
        }
        if u.max_body_bytes.is_some() != u.too_large.is_some() {
            out.push(violation(
                "upload.max_body_bytes",
                "a largest body is `max_body_bytes` with its `too_large` answer (a key of \
                 [refusals]), both or neither"
                    .into(),
            ));
        }
        out
    }

    /// Every override of a pool or a section names one scalar field of its table, and no
    /// variable is declared twice in one table.
    fn override_violations(&self) -> Vec<Violation> {
        let doc = serde_json::to_value(self).expect("a contract serializes");
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for site in self.override_sites() {
            if site.path.starts_with("clauses.") {
                continue; // `clause_violations` judges a clause's own
            }
            let owner = &site.owner;
            if !seen.insert((owner.clone(), site.spec.env.clone())) {
                out.push(violation(
                    &format!("{owner}.overrides"),
                    format!("`{}` is declared twice", site.spec.env),
                ));
            }
            let relay = site.owner.starts_with("pools.")
                && self
                    .pools
                    .get(&site.owner[6..])
                    .is_some_and(|p| p.routes.is_empty());
            if crate::model::judged_by(&site.path, relay).is_none() {
                out.push(violation(
                    &format!("{owner}.overrides"),
                    format!(
                        "`{}` names `{}`, a field no clause judges",
                        site.spec.env, site.spec.field
                    ),
                ));
                continue;
            }
            let pointer = format!("/{}", site.path.replace('.', "/"));
            match doc.pointer(&pointer) {
                Some(v) if !v.is_object() && !v.is_array() => {}
                _ => out.push(violation(
                    &format!("{owner}.overrides"),
                    format!(
                        "`{}` names `{}`, which is not a scalar field of its table",
                        site.spec.env, site.spec.field
                    ),
                )),
            }
        }
        out
    }
}

/// A table's routes (a pool's, a rate limit's): at most [`MAX_ENTRIES`], each an upper-case
/// method and a path pattern ([`path_pattern_ok`]). `at` is the routes' dotted path.
fn route_violations(at: &str, routes: &[crate::model::Route]) -> Vec<Violation> {
    let mut out = Vec::new();
    if routes.len() > MAX_ENTRIES {
        out.push(violation(
            at,
            format!(
                "{} routes; a table declares at most {MAX_ENTRIES}",
                routes.len()
            ),
        ));
    }
    for (i, route) in routes.iter().enumerate().take(MAX_ENTRIES) {
        let method_ok = (1..=16).contains(&route.method.len())
            && route.method.bytes().all(|b| b.is_ascii_uppercase());
        if !method_ok || !path_pattern_ok(&route.path) {
            out.push(violation(
                &format!("{at}.{i}"),
                format!(
                    "`{} {}` is not an upper-case method and a path of `/`-separated \
                     segments, each literal or one `{{name}}`",
                    route.method, route.path
                ),
            ));
        }
    }
    out
}

/// The statuses a recipe's answer may be declared with, and their name in a violation.
type Statuses = (std::ops::RangeInclusive<u16>, &'static str);

/// A served request's: a success.
const SUCCESS: Statuses = (200..=299, "a success status");

/// The largest body an `[upload]` may declare: the checker sends one byte more, streamed, and
/// a gigabyte is already seconds of a CI job.
const MAX_BODY_BYTES: u64 = 1 << 30;

/// The reference surface's `[upload]`: its budget, and none of another service's fields (its
/// route is `api.digitize`, its answers are its errors, its largest bodies `max_upload_bytes`).
fn reference_upload_violations(u: &crate::model::Upload) -> Vec<Violation> {
    let mut out = Vec::new();
    if u.budget_mb.is_none() {
        out.push(violation(
            "upload.budget_mb",
            "the reference server holds its bodies within a budget: declare it".into(),
        ));
    }
    for (field, set) in [
        ("request", u.request.is_some()),
        ("read_timeout_answer", u.read_timeout_answer.is_some()),
        ("max_body_bytes", u.max_body_bytes.is_some()),
        ("too_large", u.too_large.is_some()),
    ] {
        if set {
            out.push(violation(
                &format!("upload.{field}"),
                "the reference surface's uploads are `api.digitize`'s, answered with its errors; \
                 this field is for another service's contract"
                    .into(),
            ));
        }
    }
    out
}

/// A bad request's: a client error.
const CLIENT_ERROR: Statuses = (400..=499, "a client error status (400-499)");
/// The statuses an over-cap request may be answered with: any error.
const ERROR: Statuses = (400..=599, "an error status (400-599)");

/// The most bad requests a contract declares, all pools together: F2 sends each once.
const MAX_BAD_REQUESTS: usize = 256;

/// A request the checker sends (a pool's slow recipe, a rate limit's request, a bad request)
/// is one it can send: an upper-case method, a path and query starting with `/` (at most 8
/// KB), at most 64 headers with names and values that can travel in HTTP/1.1, a body of at
/// most 64 KB, and a status in `statuses` (a success, or a bad request's client error).
/// `prefix` is the recipe's dotted path.
fn recipe_violations(prefix: &str, r: &crate::model::Recipe, statuses: Statuses) -> Vec<Violation> {
    let mut out = Vec::new();
    let at = |f: &str| format!("{prefix}.{f}");
    let method_ok =
        (1..=16).contains(&r.method.len()) && r.method.bytes().all(|b| b.is_ascii_uppercase());
    if !method_ok {
        out.push(violation(
            &at("method"),
            format!("`{}` is not an upper-case method", r.method),
        ));
    }
    if !r.path.starts_with('/')
        || r.path.len() > 8192
        || !r.path.bytes().all(|b| b.is_ascii_graphic())
    {
        out.push(violation(
            &at("path"),
            "needs a path and query of visible ASCII starting with `/`, at most 8 KB".into(),
        ));
    }
    let header_ok = |(k, v): (&String, &String)| {
        http_token(k)
            && v.len() <= 8192
            && v.bytes()
                .all(|b| b == b' ' || b == b'\t' || b.is_ascii_graphic())
    };
    if r.headers.len() > 64 || !r.headers.iter().all(header_ok) {
        out.push(violation(
            &at("headers"),
            "at most 64 headers, each a token name and a visible-ASCII value of at most 8 KB"
                .into(),
        ));
    }
    if r.body.as_ref().is_some_and(|b| b.len() > 64 * 1024) {
        out.push(violation(&at("body"), "at most 64 KB".into()));
    }
    if let Some(file) = &r.body_file {
        if r.body.is_some() {
            out.push(violation(
                &at("body_file"),
                "a recipe has a `body` or a `body_file`, not both".into(),
            ));
        }
        if !inside(file) {
            out.push(violation(
                &at("body_file"),
                format!(
                    "`{}` is not a relative path inside the contract's folder (no `..`, at most \
                     1 KB)",
                    file.chars().take(64).collect::<String>()
                ),
            ));
        }
    }
    let (range, kind) = statuses;
    if !range.contains(&r.status) {
        out.push(violation(
            &at("status"),
            format!("{} is not {kind}", r.status),
        ));
    }
    out
}

/// A dependency the checker can play: `env` a POSIX environment variable name (upper-case
/// letters, digits and `_`, not starting with a digit, at most 256) and `listen` an IP address
/// and port the checker can bind (`127.0.0.1:18093`; port 0 would tell the service nothing).
fn dependency_violations(prefix: &str, d: &crate::model::DependencyHold) -> Vec<Violation> {
    let mut out = Vec::new();
    let env_ok = (1..=256).contains(&d.env.len())
        && !d.env.starts_with(|c: char| c.is_ascii_digit())
        && d.env
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if !env_ok {
        out.push(violation(
            &format!("{prefix}.env"),
            format!(
                "`{}` is not an environment variable name (A-Z, 0-9, `_`)",
                d.env.chars().take(64).collect::<String>()
            ),
        ));
    }
    match d.listen.parse::<std::net::SocketAddr>() {
        Ok(addr) if addr.port() != 0 => {}
        _ => out.push(violation(
            &format!("{prefix}.listen"),
            format!(
                "`{}` is not an IP address and a port other than 0 (`127.0.0.1:18093`)",
                d.listen.chars().take(64).collect::<String>()
            ),
        )),
    }
    out
}

/// Why `series` cannot be read from a Prometheus exposition, if it cannot: a metric name is
/// `[a-zA-Z_:][a-zA-Z0-9_:]*` and a label name `[a-zA-Z_][a-zA-Z0-9_]*` (Prometheus' data
/// model), each at most 256 bytes, with at most 16 labels of values of at most 256 bytes.
fn series_problem(series: &crate::model::Series) -> Option<String> {
    let name_ok = |s: &str, colon: bool| {
        (1..=256).contains(&s.len())
            && !s.starts_with(|c: char| c.is_ascii_digit())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || (colon && b == b':'))
    };
    let shown = |s: &str| s.chars().take(64).collect::<String>();
    if !name_ok(&series.name, true) {
        return Some(format!("`{}` is not a metric name", shown(&series.name)));
    }
    if series.labels.len() > 16 {
        return Some(format!("{} labels; at most 16", series.labels.len()));
    }
    for (label, value) in &series.labels {
        if !name_ok(label, false) {
            return Some(format!("`{}` is not a label name", shown(label)));
        }
        if value.len() > 256 {
            return Some(format!("label `{label}`'s value is longer than 256 bytes"));
        }
    }
    None
}

/// Whether `file` names a file inside the contract's folder: a relative path of at most 1 KB
/// whose every part is a plain name. A contract is user input, and a body file is sent to the
/// target: a path out of the folder (`/home/me/.ssh/id_ed25519`, `../../secrets`) would let a
/// contract send any file the checker can read.
pub(crate) fn inside(file: &str) -> bool {
    let path = std::path::Path::new(file);
    !file.is_empty()
        && file.len() <= 1024
        && path
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// An HTTP token (a header name): 1 to 256 of RFC 9110's `tchar`.
fn http_token(s: &str) -> bool {
    (1..=256).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Each `(field, value, min, max)` whose value lies outside `min..=max`, as a violation.
fn out_of_range(ranges: Vec<(String, u64, u64, u64)>) -> Vec<Violation> {
    ranges
        .into_iter()
        .filter(|(_, value, min, max)| !(*min..=*max).contains(value))
        .map(|(field, value, min, max)| {
            violation(&field, format!("{value} is out of range {min}..={max}"))
        })
        .collect()
}

/// A refusal's body shape goes with a bare `status` (an `error`'s body is its table's), and is
/// one the checker can match ([`body_shape_violations`]).
fn refusal_body_violations(field: &str, refusal: &Refusal, body: &RefusalBody) -> Vec<Violation> {
    let mut out = Vec::new();
    if refusal.error.is_some() {
        out.push(violation(
            field,
            "goes with `status`: an `error` refusal's body is its [[errors]] problem+json".into(),
        ));
    }
    out.extend(body_shape_violations(field, body));
    out
}

/// A declared body shape (a refusal's, a failure's) within bounded sizes, its pointer a JSON
/// Pointer and its `contains` not empty.
fn body_shape_violations(field: &str, body: &RefusalBody) -> Vec<Violation> {
    let mut out = Vec::new();
    if body.declared_text().len() > MAX_BODY_TEXT {
        out.push(violation(
            field,
            format!(
                "declares {} bytes, at most {MAX_BODY_TEXT}: name a part of the body (`contains`)",
                body.declared_text().len()
            ),
        ));
    }
    match body {
        RefusalBody::Json(code) => {
            let pointer_ok = code.pointer.is_empty() || code.pointer.starts_with('/');
            if !pointer_ok || code.pointer.len() > 1024 {
                out.push(violation(
                    &format!("{field}.pointer"),
                    "is not a JSON Pointer (empty, or `/`-prefixed tokens) of at most 1 KB".into(),
                ));
            }
        }
        RefusalBody::Contains(c) if c.contains.is_empty() => out.push(violation(
            &format!("{field}.contains"),
            "is empty, which every body contains: leave `body` out for any body".into(),
        )),
        _ => {}
    }
    out
}

/// The most entries a table of the service declares (pools, refusals, a pool's routes): more
/// than any service has, few enough that every rule over them stays cheap.
const MAX_ENTRIES: usize = 256;

/// A route's path pattern: at most 1 KB, `/`-separated segments, each literal (unreserved URL
/// characters and `%`) or exactly one `{name}` standing for one segment. A pattern is matched
/// segment by segment, never as a regular expression, so none can backtrack.
fn path_pattern_ok(path: &str) -> bool {
    let literal = |c: char| c.is_ascii_alphanumeric() || "-._~%".contains(c);
    path.len() <= 1024
        && path.starts_with('/')
        && path[1..].split('/').all(|segment| {
            match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(name) => {
                    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                }
                None => segment.chars().all(literal),
            }
        })
}

/// A broken rule of `field`, its line unknown until [`Contract::from_toml`] looks it up.
fn violation(field: &str, message: String) -> Violation {
    Violation {
        field: field.to_owned(),
        line: None,
        message,
    }
}

/// Each of `requests` (a pool's bad or over-cap requests, at `prefix`) is one the checker can
/// send and judge: named, a recipe it can send whose status is in `statuses`, and a code, when
/// given, at a JSON Pointer of at most 1 KB with a value of at most 1 KB.
fn answered_violations(
    prefix: &str,
    requests: &[crate::model::BadRequest],
    statuses: Statuses,
) -> Vec<Violation> {
    let mut out = Vec::new();
    for (i, bad) in requests.iter().enumerate() {
        let at = |f: &str| format!("{prefix}.{i}.{f}");
        if bad.what.trim().is_empty() || bad.what.len() > 256 {
            out.push(violation(
                &at("what"),
                "names what is wrong in 1 to 256 bytes".into(),
            ));
        }
        out.extend(recipe_violations(
            &at("request"),
            &bad.request,
            statuses.clone(),
        ));
        if let Some(code) = &bad.code {
            let pointer_ok = code.pointer.is_empty() || code.pointer.starts_with('/');
            if !pointer_ok || code.pointer.len() > 1024 {
                out.push(violation(
                    &at("code.pointer"),
                    "is not a JSON Pointer (empty, or `/`-prefixed tokens) of at \
                     most 1 KB"
                        .into(),
                ));
            }
            if code.value.len() > 1024 {
                out.push(violation(&at("code.value"), "at most 1 KB".into()));
            }
        }
    }
    out
}
