//! The load generator's own ceiling, for the `bench_loadgen` example: how many requests per
//! second goose, driven the way [`runner`](super::runner) drives it, can send at all.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use goose::prelude::*;

use super::run::keep_alive;
use super::runner::{GooseFailure, base_configuration, on_goose_thread, own_client};

/// The requests per second goose drives with `users` users looping `GET path` without pause
/// for `duration`: the load generator's own ceiling (the `bench_loadgen` example). Counted
/// from the first request for exactly `duration`, so goose's start-up and shutdown do not
/// dilute the figure. Everything but the request is the runner's: its configuration, its
/// client, its thread and runtime, and each answer read to its end.
pub async fn saturate(
    host: &str,
    path: &str,
    users: usize,
    duration: Duration,
) -> Result<(u64, f64), GooseFailure> {
    let mut config = base_configuration(host, users, None);
    config.run_time = Some((duration.as_secs() + 1).to_string());
    let count = Arc::new(AtomicU64::new(0));
    let first: Arc<std::sync::OnceLock<Instant>> = Arc::new(std::sync::OnceLock::new());
    let (counter, start, path) = (count.clone(), first.clone(), Arc::new(path.to_owned()));
    let function: TransactionFunction = Arc::new(move |user| {
        let (counter, start, path) = (counter.clone(), start.clone(), path.clone());
        Box::pin(async move {
            let began = *start.get_or_init(Instant::now);
            if began.elapsed() >= duration {
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Ok(());
            }
            let goose = user.get(&path).await?;
            let ok = match goose.response {
                Ok(response) => response.status().is_success() && response.bytes().await.is_ok(),
                Err(_) => false,
            };
            if ok && began.elapsed() < duration {
                counter.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
    });
    let keep_alive = keep_alive(plimsoll_spec::Contract::embedded());
    let client: TransactionFunction =
        Arc::new(move |user| Box::pin(async move { own_client(user, keep_alive).await }));
    let scenario = Scenario::new("saturate")
        .register_transaction(Transaction::new(client).set_on_start())
        .register_transaction(Transaction::new(function));
    on_goose_thread(move || async move {
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
