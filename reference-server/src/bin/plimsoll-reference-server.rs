//! The reference server as a bare process, for tests that need one they can kill
//! (`tests/server/crash.rs`). `plimsoll serve` is the command for people.
//!
//! Configured by the environment only (the contract's overrides, `PLIMSOLL_TEST_HOOKS`,
//! `PLIMSOLL_TEMP_DIR`, `PLIMSOLL_LOG_FILE`, …), it listens on the address given as its one
//! argument (default `127.0.0.1:0`), prints `listening on http://ADDR` on stdout once it accepts
//! connections, and stops gracefully on SIGINT or SIGTERM.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

use std::process::ExitCode;

use plimsoll_server::{Config, Server};

fn main() -> ExitCode {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".to_owned());
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("plimsoll-reference-server: {e}");
            return ExitCode::from(2);
        }
    };
    let served = tokio::runtime::Runtime::new().and_then(|rt| {
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind(&addr).await?;
            let server = Server::new(config)?;
            println!("listening on http://{}", listener.local_addr()?);
            server.serve(listener, stopped()).await
        })
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("plimsoll-reference-server: {e}");
            ExitCode::FAILURE
        }
    }
}

/// SIGINT or SIGTERM.
async fn stopped() {
    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let term = async {
        #[cfg(unix)]
        if let Some(term) = term.as_mut() {
            term.recv().await;
            return;
        }
        std::future::pending::<()>().await;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}
