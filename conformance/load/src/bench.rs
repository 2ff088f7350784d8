//! The load generator's own ceiling, for the `bench_loadgen` example: how many requests per
//! second goose, driven the way [`runner`](super::runner) drives it, can send at all.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use goose::prelude::*;
use plimsoll_conformance::remote::body::MAX_REPLY_BYTES;

use super::connection::Target;
use super::run::{USER_AGENT, keep_alive};
use super::runner::{
    GooseFailure, REQUEST_TIMEOUT, base_configuration, connection_of, on_goose_runtime,
    own_connection,
};

/// The requests per second goose drives with `users` users looping `GET path` without pause
/// for `duration`: the load generator's own ceiling (the `bench_loadgen` example). Counted
/// from the first request for exactly `duration`, so goose's start-up and shutdown do not
/// dilute the figure. Everything but the request's template is the runner's: its
/// configuration, each user's own connection, each answer read to its end and recorded with
/// goose, its thread and runtime.
pub async fn saturate(
    host: &str,
    path: &str,
    users: usize,
    duration: Duration,
) -> Result<(u64, f64), GooseFailure> {
    let mut config = base_configuration(host, users, None);
    config.run_time = Some((duration.as_secs() + 1).to_string());
    let target = Target::new(host, &plimsoll_conformance::remote::Trust::default())
        .map_err(GooseFailure::Target)?;
    let uri = Target::uri(path).map_err(GooseFailure::Target)?;
    let count = Arc::new(AtomicU64::new(0));
    let first: Arc<std::sync::OnceLock<Instant>> = Arc::new(std::sync::OnceLock::new());
    let (counter, start) = (count.clone(), first.clone());
    let function: TransactionFunction = Arc::new(move |user| {
        let (counter, start, uri) = (counter.clone(), start.clone(), uri.clone());
        Box::pin(async move {
            let began = *start.get_or_init(Instant::now);
            if began.elapsed() >= duration {
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Ok(());
            }
            let request = http::Request::get(uri)
                .header(http::header::USER_AGENT, USER_AGENT)
                .body(Default::default())
                .map_err(|e| Box::new(TransactionError::Custom(e.to_string())))?;
            let sent = Instant::now();
            let answer = (connection_of(user)?)
                .exchange(request, MAX_REPLY_BYTES, REQUEST_TIMEOUT)
                .await;
            let took = sent.elapsed();
            let status = answer.as_ref().ok().map(|a| a.status);
            let ok = answer.is_ok_and(|a| (200..300).contains(&a.status) && a.body.is_ok());
            if ok && began.elapsed() < duration {
                counter.fetch_add(1, Ordering::Relaxed);
            }
            user.record_custom_request_duration("GET", "saturate", took, ok, status, None)
                .await
        })
    });
    let keep_alive = keep_alive(plimsoll_spec::Contract::embedded());
    let scenario = Scenario::new("saturate")
        .register_transaction(own_connection(target, keep_alive))
        .register_transaction(Transaction::new(function));
    on_goose_runtime(move || async move {
        GooseAttack::initialize_with_config(config)?
            .register_scenario(scenario)
            .execute()
            .await?;
        Ok(())
    })
    .await?;
    let n = count.load(Ordering::Relaxed);
    Ok((n, n as f64 / duration.as_secs_f64()))
}
