//! Running a server: start-up housekeeping, serving, and a draining shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::logging::LogWriter;
use crate::state::{ApiService, AppState};

/// A configured server, ready to serve.
pub struct Server {
    state: AppState,
}

impl Server {
    /// Prepares the temp root (removing job directories a crash left behind, and logging them)
    /// and the log sink, and sets the process's allocator to keep what jobs free for the next
    /// job ([`plimsoll_engine::job::allocator`]): a server is its process's main work.
    pub fn new(config: Config) -> std::io::Result<Server> {
        plimsoll_engine::job::install_panic_hook();
        plimsoll_engine::job::allocator::keep_freed_memory();
        std::fs::create_dir_all(&config.temp_root)?;
        let log = LogWriter::open(&config.log)?;
        let dispatch = config.components().log_format.dispatch(log.clone());
        let removed = plimsoll_engine::temp::remove_stale(&config.temp_root);
        tracing::dispatcher::with_default(&dispatch, || {
            if !removed.is_empty() {
                tracing::warn!(removed = ?removed, temp_root = %config.temp_root.display(), "removed stale job directories");
            }
            for o in &config.overrides {
                tracing::info!(env = %o.env, clause = %o.clause, field = %o.field, value = %o.to, "contract override");
            }
        });
        Ok(Server {
            state: AppState::new(config, dispatch, log),
        })
    }

    /// What the handlers will share, readable before serving starts.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves until `shutdown` completes, then stops accepting, lets in-flight requests finish
    /// for up to the drain timeout, cancels what is left, and waits for it to stop.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let state = self.state;
        let addr = listener.local_addr()?;
        let drain = state.config.drain_timeout;
        let stop_within =
            Duration::from_millis(state.config.contract.cancellation().stop_within_ms);
        tracing::dispatcher::with_default(&state.dispatch, || {
            tracing::info!(%addr, hooks = state.config.hooks_enabled, "plimsoll-server listening");
        });
        let stopping = CancellationToken::new();
        // Built once; the relay bridge performs its envelopes against the same router.
        let app = crate::http::Api::new(state.clone());
        state.api.set(ApiService::new(app.clone()));
        let _detach = DetachApi(state.clone());
        // The bridge that dials its relay stops with the first signal, without waiting for its
        // workers (seed 003: "without waiting for stragglers"); they end with the drain.
        let _dialling = match &state.config.relay_url {
            Some(url) => Some(spawn_dialling_bridge(&state, url, stopping.clone())?),
            None => None,
        };
        let policy = state.config.components().connections.clone();
        let bounds = state.config.contract.connections().clone();
        let mut serve = std::pin::pin!(crate::accept::serve(
            listener,
            app,
            &*policy,
            &bounds,
            stopping.clone(),
        ));
        tokio::select! {
            () = &mut serve => return Ok(()),
            () = shutdown => stopping.cancel(),
        }
        // Relay work gets the grace R6's seam gives it (none), then is cut: the relay treats it
        // as orphaned once the bridge goes.
        let grace_until = tokio::time::Instant::now() + state.components().relay_stop.grace(drain);
        while state.relay.load().0 > 0 && tokio::time::Instant::now() < grace_until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        state.relay_stop.cancel();
        let drain_until = tokio::time::Instant::now() + drain;
        if tokio::time::timeout_at(drain_until, &mut serve)
            .await
            .is_err()
        {
            // Drain time is up: cancel every job; each stops at its next checkpoint.
            state.shutdown.cancel();
            let _ = tokio::time::timeout(stop_within * 2, &mut serve).await;
        }
        state.shutdown.cancel();
        // Workers release their slots after removing their temp dirs; wait for the HTTP pools
        // (relay workers hold no temp dir, and are not waited for).
        let deadline = tokio::time::Instant::now() + stop_within * 2;
        let busy = |s: &AppState| s.digitize.load().0 + s.export.load().0;
        while busy(&state) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let removed = plimsoll_engine::temp::remove_stale(&state.config.temp_root);
        tracing::dispatcher::with_default(&state.dispatch, || {
            tracing::info!(
                leftover_removed = removed.len(),
                log_lines_dropped = state.log.dropped(),
                "plimsoll-server stopped"
            );
        });
        // Everything logged so far is on the sink before `serve` returns.
        state.flush_log();
        Ok(())
    }

    /// Serves on a background task; for tests and the embedded checker.
    pub fn spawn(self, listener: TcpListener) -> std::io::Result<RunningServer> {
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let state = self.state.clone();
        let join = tokio::spawn(self.serve(listener, stop.clone().cancelled_owned()));
        Ok(RunningServer {
            addr,
            stop,
            join,
            state,
        })
    }
}

/// Starts the bridge that dials `url`, against the configured upstream or this server's API; it
/// is aborted when the returned guard drops (serving ended, however it ended).
fn spawn_dialling_bridge(
    state: &AppState,
    url: &str,
    stop: CancellationToken,
) -> std::io::Result<AbortOnDrop> {
    let upstream = match &state.config.relay_upstream {
        Some(base) => Some(crate::bridge::upstream::service(base).map_err(std::io::Error::other)?),
        None => None,
    };
    let bridge = crate::bridge::dial::run(state.clone(), url.to_owned(), upstream, stop);
    let bridge =
        tracing::instrument::WithSubscriber::with_subscriber(bridge, state.dispatch.clone());
    Ok(AbortOnDrop(tokio::spawn(bridge)))
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Clears the router handed to the relay when serving ends, however it ends (the router holds
/// the state that holds it).
struct DetachApi(AppState);

impl Drop for DetachApi {
    fn drop(&mut self) {
        self.0.api.clear();
    }
}

/// A server serving on a background task.
pub struct RunningServer {
    /// The address it listens on (port 0 resolved).
    pub addr: SocketAddr,
    stop: CancellationToken,
    join: tokio::task::JoinHandle<std::io::Result<()>>,
    state: AppState,
}

impl RunningServer {
    /// Binds `127.0.0.1:0` and serves `config`.
    pub async fn start(config: Config) -> std::io::Result<RunningServer> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        Server::new(config)?.spawn(listener)
    }

    /// The base URL to send requests to.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What the handlers share, for watching the server from inside while it serves.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Graceful shutdown (drain, then cancel).
    pub async fn shutdown(self) -> std::io::Result<()> {
        self.stop.cancel();
        self.join.await.unwrap_or(Ok(()))
    }
}
