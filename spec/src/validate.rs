//! The rules a contract must satisfy beyond its types: ranges, the seed's headroom arguments,
//! every error code exactly once, placeholders that resolve. Each broken rule is a
//! [`Violation`] naming its dotted field; [`crate::parse`] adds the line.

use std::collections::BTreeSet;

use crate::model::Contract;
use crate::parse::Violation;
use crate::{ClauseId, ErrorCode, MetricName, Stage};

impl Contract {
    /// Every rule of a contract document: the effective-value rules plus the headroom rules the
    /// seed argues in prose, which bind the document but not a deployment's overrides (a test
    /// deployment may scale timeouts down on purpose).
    pub fn violations(&self) -> Vec<Violation> {
        let mut out = self.effective_violations();
        let b1 = &self.clauses.b1.value;
        for (field, timeout, reference) in [
            (
                "digitize_timeout_ms",
                b1.digitize_timeout_ms,
                b1.reference_digitize_ms,
            ),
            (
                "export_timeout_ms",
                b1.export_timeout_ms,
                b1.reference_export_ms,
            ),
        ] {
            let needed = b1.headroom_factor.saturating_mul(reference);
            if timeout < needed {
                out.push(violation(
                    &format!("clauses.B1.value.{field}"),
                    format!(
                        "{timeout} ms is below the headroom rule: at least {}x the reference duration ({reference} ms) = {needed} ms",
                        b1.headroom_factor
                    ),
                ));
            }
        }
        let b2 = &self.clauses.b2.value;
        if b2.memory_cap_mb <= b2.reference_peak_mb {
            out.push(violation(
                "clauses.B2.value.memory_cap_mb",
                format!(
                    "{} MB does not exceed the documented peak of the reference workload ({} MB)",
                    b2.memory_cap_mb, b2.reference_peak_mb
                ),
            ));
        }
        out
    }

    /// The rules every effective contract (document or after overrides) must satisfy.
    pub fn effective_violations(&self) -> Vec<Violation> {
        [
            self.clause_violations(),
            self.rule_violations(),
            self.range_violations(),
            self.connection_cap_violations(),
            self.upload_budget_violations(),
            self.api_violations(),
            self.error_table_violations(),
            self.stage_violations(),
            self.metric_violations(),
        ]
        .concat()
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

    /// Every bounded number lies in the range where it makes sense at all.
    fn range_violations(&self) -> Vec<Violation> {
        let (c, b3) = (&self.clauses, &self.clauses.b3.value);
        // (field, value, min, max)
        #[rustfmt::skip]
        let ranges: [(&str, u64, u64, u64); 25] = [
            ("clauses.T1.value.digitize_workers", c.t1.value.digitize_workers.into(), 1, 1024),
            ("clauses.T1.value.export_workers", c.t1.value.export_workers.into(), 1, 1024),
            ("clauses.T2.value.digitize_queue_capacity", c.t2.value.digitize_queue_capacity.into(), 0, 100_000),
            ("clauses.T2.value.export_queue_capacity", c.t2.value.export_queue_capacity.into(), 0, 100_000),
            ("clauses.T3.value.window_samples", c.t3.value.window_samples.into(), 1, 100_000),
            ("clauses.T3.value.min_seconds", c.t3.value.min_seconds, 1, 86_400),
            ("clauses.B1.value.digitize_timeout_ms", c.b1.value.digitize_timeout_ms, 1, 86_400_000),
            ("clauses.B1.value.export_timeout_ms", c.b1.value.export_timeout_ms, 1, 86_400_000),
            ("clauses.B1.value.upload_read_timeout_ms", c.b1.value.upload_read_timeout_ms, 1, 86_400_000),
            ("clauses.B1.value.headroom_factor", c.b1.value.headroom_factor, 1, 1000),
            ("clauses.B2.value.memory_cap_mb", c.b2.value.memory_cap_mb, 1, 1 << 20),
            ("clauses.B3.value.stop_within_ms", b3.stop_within_ms, 1, 60_000),
            ("clauses.B3.value.checkpoint_interval_ms", b3.checkpoint_interval_ms, 1, b3.stop_within_ms.saturating_sub(1).max(1)),
            ("clauses.B4.value.head_timeout_ms", c.b4.value.head_timeout_ms, 100, 3_600_000),
            ("clauses.B4.value.max_connections", c.b4.value.max_connections.into(), 1, 1_000_000),
            ("clauses.B5.value.upload_budget_mb", c.b5.value.upload_budget_mb, 1, 1 << 24),
            ("clauses.R1.value.relay_concurrency", c.r1.value.relay_concurrency.into(), 1, 1024),
            ("clauses.R4.value.overflow_factor", c.r4.value.overflow_factor.into(), 2, 100),
            ("clauses.R5.value.max_frame_body_bytes", c.r5.value.max_frame_body_bytes, 64, 1 << 24),
            ("clauses.R6.value.reconnect_within_ms", c.r6.value.reconnect_within_ms, 1, 60_000),
            // The first retry comes before the bound, or no bridge could meet it.
            ("clauses.R6.value.backoff_initial_ms", c.r6.value.backoff_initial_ms, 1, c.r6.value.reconnect_within_ms.saturating_sub(1).max(1)),
            ("clauses.R6.value.backoff_max_ms", c.r6.value.backoff_max_ms, c.r6.value.backoff_initial_ms, 600_000),
            ("clauses.R6.value.stop_within_ms", c.r6.value.stop_within_ms, 1, 60_000),
            ("tolerances.trials", self.tolerances.trials.into(), 1, 100),
            ("api.digitize.max_pixels", self.api.digitize.max_pixels, 1, 1 << 32),
        ];
        ranges
            .into_iter()
            .filter(|(_, value, min, max)| !(min..=max).contains(&value))
            .map(|(field, value, min, max)| {
                violation(field, format!("{value} is out of range {min}..={max}"))
            })
            .collect()
    }

    /// Every request a pool may hold sits on an open connection: the connection cap must leave
    /// room for all of them and one more (a /healthz probe, a /metrics scrape).
    fn connection_cap_violations(&self) -> Vec<Violation> {
        let c = &self.clauses;
        let held = u64::from(c.t1.value.digitize_workers)
            + u64::from(c.t2.value.digitize_queue_capacity)
            + u64::from(c.t1.value.export_workers)
            + u64::from(c.t2.value.export_queue_capacity);
        if u64::from(c.b4.value.max_connections) > held {
            return Vec::new();
        }
        vec![violation(
            "clauses.B4.value.max_connections",
            format!(
                "{} must exceed the requests the pools can hold (workers + queue of both \
                 pools: {held})",
                c.b4.value.max_connections
            ),
        )]
    }

    /// The bodies the pools can hold (every worker and queue place of both job pools at its
    /// endpoint's `max_upload_bytes`) plus one largest upload being read must fit the upload
    /// budget: otherwise the budget, not the pools, would refuse requests the pools can take.
    fn upload_budget_violations(&self) -> Vec<Violation> {
        let needed = self.upload_budget_floor_bytes();
        let budget = self
            .clauses
            .b5
            .value
            .upload_budget_mb
            .saturating_mul(1 << 20);
        if budget >= needed {
            return Vec::new();
        }
        vec![violation(
            "clauses.B5.value.upload_budget_mb",
            format!(
                "{} MB is below the bodies the pools can hold (workers + queue of both job \
                 pools at their max_upload_bytes) plus one largest upload: {} MB",
                self.clauses.b5.value.upload_budget_mb,
                needed.div_ceil(1 << 20)
            ),
        )]
    }

    /// The least upload budget (bytes) the pools and limits need: see
    /// `upload_budget_violations`. The B5 check stalls uploads up to the budget from here.
    pub fn upload_budget_floor_bytes(&self) -> u64 {
        let c = &self.clauses;
        let (digitize, export) = (&self.api.digitize, &self.api.export);
        let held = |workers: u32, queue: u32, max: u64| {
            (u64::from(workers) + u64::from(queue)).saturating_mul(max)
        };
        held(
            c.t1.value.digitize_workers,
            c.t2.value.digitize_queue_capacity,
            digitize.max_upload_bytes,
        )
        .saturating_add(held(
            c.t1.value.export_workers,
            c.t2.value.export_queue_capacity,
            export.max_upload_bytes,
        ))
        .saturating_add(digitize.max_upload_bytes.max(export.max_upload_bytes))
    }

    /// Every digitize parameter's default lies in its range, and export's default format is one
    /// it offers.
    fn api_violations(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        for (name, p) in self.api.digitize.params.iter() {
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
            .api
            .export
            .formats
            .contains(&self.api.export.default_format)
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
        for code in ErrorCode::ALL {
            let n = self.errors.iter().filter(|e| e.code == code).count();
            if n != 1 {
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
        for code in &self.clauses.f2.value.codes {
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

    /// Each pipeline has distinct stages of its own: none of them the pseudo-stages `queue` and
    /// `relay`.
    fn stage_violations(&self) -> Vec<Violation> {
        [
            ("digitize", &self.stages.digitize),
            ("export", &self.stages.export),
        ]
        .into_iter()
        .filter(|(_, stages)| {
            let unique: BTreeSet<_> = stages.iter().collect();
            stages.is_empty()
                || unique.len() != stages.len()
                || stages.contains(&Stage::Queue)
                || stages.contains(&Stage::Relay)
        })
        .map(|(name, _)| {
            violation(
                &format!("stages.{name}"),
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
                    .observability
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
}

/// A broken rule of `field`, its line unknown until [`Contract::from_toml`] looks it up.
fn violation(field: &str, message: String) -> Violation {
    Violation {
        field: field.to_owned(),
        line: None,
        message,
    }
}
