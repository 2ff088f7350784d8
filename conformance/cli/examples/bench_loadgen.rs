//! How fast is the load generator itself? Requests per second goose (through `plimsoll load`'s
//! runner) drives against `GET /healthz` of the reference server, beside `wrk` on the same
//! endpoint of the same server in the same run, and the ratio.
//!
//! ```sh
//! cargo run --release -p plimsoll --example bench_loadgen [-- SECONDS CONNECTIONS ROUNDS]
//! ```
//!
//! Both generators get the same number of connections and the same time; they take turns
//! (goose, wrk, goose, wrk, …) so neither gets a warmer server, and each round's ratio is
//! goose's figure over the wrk run right after it. The summary gives the ratios' minimum,
//! median and maximum. `wrk` comes from Debian (`apt-get install wrk`); without it only goose's
//! figures are printed.

use std::process::Command;
use std::time::Duration;

use plimsoll_load::bench::saturate;
use plimsoll_server::{Config, LogSink, RunningServer};

fn main() {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let connections: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(32);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);

    // The server on its own runtime, logging to /dev/null: the access log would otherwise
    // dominate a trivial endpoint.
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = server_rt.block_on(async {
        let mut config = Config::from_lookup(|_| None).unwrap();
        config.log = LogSink::File("/dev/null".into());
        config.temp_root = std::env::temp_dir().join("plimsoll-bench");
        RunningServer::start(config).await.unwrap()
    });
    let base = server.url();
    let path = &plimsoll_spec::Contract::embedded().api().healthz.path;
    println!(
        "target {base}{path}, {connections} connections, {seconds} s per run, {rounds} rounds"
    );

    // The command's own runtime, as `plimsoll load` has it; the runner runs goose on a thread
    // of its own beside it.
    let goose_rt = plimsoll_conformance::session::runtime().unwrap();
    let mut ratios = Vec::new();
    for round in 1..=rounds {
        let (n, rps) = goose_rt
            .block_on(saturate(
                &base,
                path,
                connections,
                Duration::from_secs(seconds),
            ))
            .expect("goose ran");
        match run_wrk(&format!("{base}{path}"), connections, seconds) {
            Some(wrk) => {
                let ratio = rps / wrk;
                println!(
                    "round {round}: goose {rps:>8.0} req/s ({n} requests), wrk {wrk:>8.0} req/s, ratio {ratio:.2}"
                );
                ratios.push(ratio);
            }
            None => println!(
                "round {round}: goose {rps:>8.0} req/s ({n} requests), wrk not available (apt-get install wrk)"
            ),
        }
    }
    if !ratios.is_empty() {
        ratios.sort_by(f64::total_cmp);
        let median = if ratios.len() % 2 == 1 {
            ratios[ratios.len() / 2]
        } else {
            (ratios[ratios.len() / 2 - 1] + ratios[ratios.len() / 2]) / 2.0
        };
        println!(
            "ratio goose / wrk over {} rounds: min {:.2}, median {:.2}, max {:.2}",
            ratios.len(),
            ratios[0],
            median,
            ratios[ratios.len() - 1]
        );
    }
    server_rt.block_on(async {
        let _ = server.shutdown().await;
    });
}

/// `wrk -t2 -cN -dS URL`, parsed for its `Requests/sec:` line.
fn run_wrk(url: &str, connections: usize, seconds: u64) -> Option<f64> {
    let out = Command::new("wrk")
        .args([
            "-t2",
            &format!("-c{connections}"),
            &format!("-d{seconds}s"),
            url,
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
}
