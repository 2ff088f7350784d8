//! How fast is the load generator itself? Requests per second goose (through `plimsoll load`'s
//! runner) drives against `GET /healthz` of the reference server, beside `wrk` on the same
//! endpoint of the same server in the same run, and the ratio.
//!
//! ```sh
//! cargo run --release -p plimsoll-conformance --example bench_loadgen [-- SECONDS CONNECTIONS]
//! ```
//!
//! Both generators get the same number of connections and the same time; they take turns
//! (goose, wrk, goose, wrk) so neither gets a warmer server. `wrk` comes from Debian
//! (`apt-get install wrk`); without it only goose's figure is printed.

use std::process::Command;
use std::time::Duration;

use plimsoll_load::bench::saturate;
use plimsoll_server::{Config, LogSink, RunningServer};

fn main() {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let connections: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(32);

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
    println!("target {base}{path}, {connections} connections, {seconds} s per run");

    let goose_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (mut goose, mut wrk) = (Vec::new(), Vec::new());
    for round in 1..=2 {
        let (n, rps) = goose_rt
            .block_on(saturate(
                &base,
                path,
                connections,
                Duration::from_secs(seconds),
            ))
            .expect("goose ran");
        println!("round {round}: goose {rps:>9.0} req/s ({n} requests)");
        goose.push(rps);
        match run_wrk(&format!("{base}{path}"), connections, seconds) {
            Some(rps) => {
                println!("round {round}: wrk   {rps:>9.0} req/s");
                wrk.push(rps);
            }
            None => println!("round {round}: wrk not available (apt-get install wrk)"),
        }
    }
    let best = |v: &[f64]| v.iter().copied().fold(f64::NAN, f64::max);
    println!();
    println!(
        "goose (plimsoll load runner): {:.0} req/s (best of {})",
        best(&goose),
        goose.len()
    );
    if !wrk.is_empty() {
        println!(
            "wrk:                          {:.0} req/s (best of {})",
            best(&wrk),
            wrk.len()
        );
        println!(
            "ratio goose / wrk:            {:.2}",
            best(&goose) / best(&wrk)
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
