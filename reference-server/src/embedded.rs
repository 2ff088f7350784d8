//! The reference server in a workspace of its own: a fresh temporary folder holds its temp root
//! (`jobs/`) and its log file, and it listens on `127.0.0.1:0`. `plimsoll check`,
//! `plimsoll load` and the server's own tests all start a server this way, so there is one
//! lifecycle to get right (the workspace outlives the server; shutdown drains).

use std::path::{Path, PathBuf};

use crate::state::AppState;
use crate::{Config, ConfigError, LogSink, RunningServer};

/// A running reference server and the folder that holds its files.
pub struct Embedded {
    server: RunningServer,
    // Dropped after `server` (field order): the temp root outlives every job.
    workspace: tempfile::TempDir,
}

impl Embedded {
    /// Starts `config` with its temp root and log file in a new workspace.
    pub async fn start(config: Config) -> std::io::Result<Embedded> {
        Embedded::start_in(tempfile::tempdir()?, config).await
    }

    /// Starts `config` in `workspace`, which the caller may have prepared (a `jobs/` folder
    /// holding what a crashed run left, say).
    pub async fn start_in(
        workspace: tempfile::TempDir,
        mut config: Config,
    ) -> std::io::Result<Embedded> {
        config.temp_root = workspace.path().join("jobs");
        config.log = LogSink::File(workspace.path().join("server.log"));
        let server = RunningServer::start(config).await?;
        Ok(Embedded { server, workspace })
    }

    /// The base URL to send requests to (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The running server, for tests that need its bare address (raw sockets).
    pub fn server(&self) -> &RunningServer {
        &self.server
    }

    /// What the server's handlers share, for tests that watch its pools from inside.
    pub fn state(&self) -> &AppState {
        self.server.state()
    }

    /// Where the server keeps its per-request temp directories.
    pub fn temp_dir(&self) -> PathBuf {
        self.workspace.path().join("jobs")
    }

    /// The server's JSON log file. Lines reach it a moment after they are logged; see
    /// [`Embedded::flush_log`].
    pub fn log_path(&self) -> PathBuf {
        self.workspace.path().join("server.log")
    }

    /// Waits until every line logged so far is in the log file (at most 2 s).
    pub fn flush_log(&self) -> bool {
        self.state().flush_log()
    }

    /// The folder that holds the temp root and the log file.
    pub fn workspace(&self) -> &Path {
        self.workspace.path()
    }

    /// Graceful shutdown (drain, then cancel); the workspace is removed afterwards.
    pub async fn shutdown(self) -> std::io::Result<()> {
        self.server.shutdown().await
    }

    /// Graceful shutdown, handing the workspace back (removed when dropped), for callers that
    /// inspect what the server left behind.
    pub async fn shutdown_keeping_workspace(self) -> std::io::Result<tempfile::TempDir> {
        self.server.shutdown().await?;
        Ok(self.workspace)
    }
}

impl Config {
    /// A config from the embedded contract with `overrides` applied as if they were
    /// environment variables (`("QUEUE_CAPACITY", "2")`).
    pub fn from_overrides(overrides: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::from_lookup(|k| {
            overrides
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        })
    }
}
