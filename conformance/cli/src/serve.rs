//! `plimsoll serve`: the reference server as a process.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use plimsoll_server::{Config, LogSink, Server};

/// Command-line settings that override the environment.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to bind.
    #[arg(
        long,
        default_value = "127.0.0.1",
        value_name = "ADDR",
        help_heading = "Listen"
    )]
    pub bind: IpAddr,
    /// Port (default: the contract's `api.default_port`).
    #[arg(long, value_name = "PORT", help_heading = "Listen")]
    pub port: Option<u16>,
    /// Relay workers (R1); wins over RELAY_CONCURRENCY and MESHNET_RELAY_CONCURRENCY.
    #[arg(long, value_name = "N", help_heading = "Relay bridge")]
    pub relay_concurrency: Option<u32>,
    /// Dial this relay (`ws://HOST:PORT/PATH`) and serve its envelopes, reconnecting when it
    /// drops the bridge (seed 003's direction).
    #[arg(long, value_name = "WS_URL", help_heading = "Relay bridge")]
    pub relay_url: Option<String>,
    /// Perform the relay's envelopes against this base URL instead of this server's own API.
    #[arg(
        long,
        value_name = "URL",
        help_heading = "Relay bridge",
        requires = "relay_url"
    )]
    pub relay_upstream: Option<String>,
    /// Parent of per-request temp directories (default: $TMPDIR/plimsoll; env PLIMSOLL_TEMP_DIR).
    #[arg(long, value_name = "DIR", help_heading = "Settings")]
    pub temp_dir: Option<PathBuf>,
    /// Append JSON logs to this file instead of stdout (env PLIMSOLL_LOG_FILE).
    #[arg(long, value_name = "FILE", help_heading = "Settings")]
    pub log_file: Option<PathBuf>,
}

/// `plimsoll serve`: runs the server until SIGTERM or Ctrl-C, then drains; returns the exit code
/// (0 after a drain, 2 when it could not start).
pub(crate) fn run(args: ServeArgs) -> u8 {
    let relay = args.relay_concurrency.map(|n| n.to_string());
    // The flag stands in for every variable that sets the relay's workers.
    let relay_envs: Vec<&str> = plimsoll_spec::Contract::embedded()
        .pool_spec(plimsoll_spec::Pool::Relay)
        .overrides
        .iter()
        .filter(|o| o.field == "workers")
        .map(|o| o.env.as_str())
        .collect();
    let config = Config::from_lookup(|k| {
        if relay.is_some() && relay_envs.contains(&k) {
            return relay.clone();
        }
        std::env::var(k).ok()
    });
    let mut config = match config {
        Ok(c) => c,
        Err(e) => {
            eprintln!("plimsoll serve: {e}");
            return 2;
        }
    };
    if let Some(dir) = args.temp_dir {
        config.temp_root = dir;
    }
    if let Some(path) = args.log_file {
        config.log = LogSink::File(path);
    }
    config.relay_url = args.relay_url;
    config.relay_upstream = args.relay_upstream;
    let port = args.port.unwrap_or(config.contract.api().default_port);
    let runtime = match plimsoll_conformance::session::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("plimsoll serve: cannot start the runtime: {e}");
            return 2;
        }
    };
    let result = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(SocketAddr::new(args.bind, port)).await?;
        eprintln!(
            "plimsoll serve: listening on http://{}",
            listener.local_addr()?
        );
        Server::new(config)?
            .serve(listener, shutdown_signal())
            .await
    });
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("plimsoll serve: {e}");
            2
        }
    }
}

/// SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
