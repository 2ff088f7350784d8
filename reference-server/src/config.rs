//! Server settings: the effective contract (defaults from `spec/contract.toml`, then the
//! environment overrides `plimsoll-spec` parses) plus the few operational knobs that are not
//! part of the contract.

use std::path::PathBuf;
use std::time::Duration;

use plimsoll_spec::{Applied, Contract, OverrideError};

use crate::components::Components;
pub use crate::logging::LogSink;
#[cfg(feature = "mutants")]
use crate::mutant::Mutant;

/// What a server starts from: the contract it keeps and the operational settings around it.
#[derive(Debug, Clone)]
pub struct Config {
    /// The contract with this deployment's overrides applied.
    pub contract: Contract,
    /// The overrides that were applied, for `/v1/contract` readers and the startup log.
    pub overrides: Vec<Applied>,
    /// `PLIMSOLL_TEST_HOOKS=1`: honour `X-Plimsoll-Hook`.
    pub hooks_enabled: bool,
    /// Parent of the per-request temp directories.
    pub temp_root: PathBuf,
    /// Where the structured log goes (F3): stdout, or `PLIMSOLL_LOG_FILE`.
    pub log: LogSink,
    /// On shutdown, in-flight jobs get this long to finish before they are cancelled.
    pub drain_timeout: Duration,
    /// The relay the bridge dials (seed 003's direction), if any: `ws://` or `wss://`.
    pub relay_url: Option<String>,
    /// The bridge's local handler, if not this server: the base URL envelopes are performed
    /// against.
    pub relay_upstream: Option<String>,
    /// The pieces the server is built from: the contract's, unless a test build swapped one.
    pub(crate) components: Components,
}

/// Why the server refuses to start.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A contract override in the environment was refused.
    #[error(transparent)]
    Override(#[from] OverrideError),
    /// A setting outside the contract (`PLIMSOLL_DRAIN_TIMEOUT_MS`, `PLIMSOLL_MUTANT`, …) has a
    /// value it cannot take.
    #[error("{name}={value}: {message}")]
    Setting {
        /// The variable.
        name: &'static str,
        /// Its text as set.
        value: String,
        /// What was expected instead.
        message: &'static str,
    },
}

impl Config {
    /// The contract's defaults with no overrides, hooks off, temp files under the system temp dir.
    pub fn new(contract: Contract) -> Config {
        Config {
            contract,
            overrides: Vec::new(),
            hooks_enabled: false,
            temp_root: std::env::temp_dir().join("plimsoll"),
            log: LogSink::Stdout,
            drain_timeout: Duration::from_secs(10),
            relay_url: None,
            relay_upstream: None,
            components: Components::reference(),
        }
    }

    /// Reads the contract overrides and operational settings from `lookup` (normally the
    /// process environment).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let (contract, overrides) = Contract::embedded().with_overrides(&lookup)?;
        let mut config = Config::new(contract);
        config.overrides = overrides;
        let hooks_env = &Contract::embedded().hooks().env;
        if let Some(value) = lookup(hooks_env) {
            config.hooks_enabled = match value.trim() {
                "1" | "true" => true,
                "0" | "false" | "" => false,
                _ => {
                    return Err(ConfigError::Setting {
                        name: hooks_env,
                        value,
                        message: "expected 1 or 0",
                    });
                }
            };
        }
        if let Some(dir) = lookup("PLIMSOLL_TEMP_DIR") {
            config.temp_root = PathBuf::from(dir);
        }
        if let Some(path) = lookup("PLIMSOLL_LOG_FILE") {
            config.log = LogSink::File(PathBuf::from(path));
        }
        if let Some(value) = lookup("PLIMSOLL_DRAIN_TIMEOUT_MS") {
            let ms = value
                .trim()
                .parse::<u64>()
                .map_err(|_| ConfigError::Setting {
                    name: "PLIMSOLL_DRAIN_TIMEOUT_MS",
                    value: value.clone(),
                    message: "expected milliseconds",
                })?;
            config.drain_timeout = Duration::from_millis(ms);
        }
        #[cfg(feature = "mutants")]
        if let Some(name) = lookup("PLIMSOLL_MUTANT") {
            let mutant: Mutant = name.parse().map_err(|_| ConfigError::Setting {
                name: "PLIMSOLL_MUTANT",
                value: name.clone(),
                message: "unknown mutant",
            })?;
            config = config.with_mutant(mutant);
        }
        Ok(config)
    }

    /// [`Config::from_lookup`] over the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|k| std::env::var(k).ok())
    }

    /// Swaps in a broken piece (self-test builds only).
    #[cfg(feature = "mutants")]
    pub fn with_mutant(mut self, mutant: Mutant) -> Config {
        self.components = mutant.components();
        self
    }

    /// The pieces the server is built from: the contract's, or a broken variant's.
    pub fn components(&self) -> &Components {
        &self.components
    }
}
