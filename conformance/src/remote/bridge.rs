//! A bridge under test that the checker starts itself (`--bridge-command`): a shell command with
//! `{relay_url}` and `{upstream_url}` filled in, run in a process group of its own so that a
//! stop signal reaches the bridge and not only the shell, its output kept as a bounded tail for
//! the verdicts, and killed when the run ends whatever happened.

use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};

/// What the checker substitutes in a bridge command.
pub const RELAY_URL: &str = "{relay_url}";
/// In a bridge command, replaced by the URL of the local handler the checker plays (what the bridge
/// relays to).
pub const UPSTREAM_URL: &str = "{upstream_url}";
/// Bytes of the bridge's output kept (the newest): enough for a traceback, bounded whatever the
/// bridge prints.
const TAIL_BYTES: usize = 8 * 1024;

/// Why the bridge could not be started or stopped as asked.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The command names no `{relay_url}`: the bridge could not know where to dial.
    #[error(
        "--bridge-command must contain {RELAY_URL} (and {UPSTREAM_URL}): the checker fills in where the bridge dials and where it relays to"
    )]
    NoRelayUrl,
    /// The shell could not be started.
    #[error("starting the bridge `{command}`: {source}")]
    Spawn {
        /// The command, URLs filled in.
        command: String,
        /// Why it could not start.
        source: std::io::Error,
    },
    /// The process was gone before the checker could see its id.
    #[error("the bridge `{command}` exited at once")]
    ExitedAtOnce {
        /// The command, URLs filled in.
        command: String,
    },
    /// SIGTERM could not be sent to the bridge's process group.
    #[error("sending SIGTERM: {0}")]
    Signal(nix::errno::Errno),
    /// A process of the group outlived the limit after SIGTERM, and the group was killed.
    #[error("the bridge was still running {} ms after SIGTERM (killed)", .limit.as_millis())]
    StillRunning {
        /// How long it was given.
        limit: Duration,
    },
}

/// The bridge's process and the newest of what it printed.
pub struct BridgeProcess {
    command: String,
    child: tokio::sync::Mutex<Child>,
    pgid: Pid,
    tail: Arc<Mutex<Vec<u8>>>,
}

impl BridgeProcess {
    /// Starts `template` under `sh -c` with both URLs filled in; an error when the template names
    /// neither URL (the bridge could not know where to dial) or the shell cannot start.
    pub fn spawn(
        template: &str,
        relay_url: &str,
        upstream_url: &str,
    ) -> Result<BridgeProcess, BridgeError> {
        if !template.contains(RELAY_URL) {
            return Err(BridgeError::NoRelayUrl);
        }
        let command = template
            .replace(RELAY_URL, relay_url)
            .replace(UPSTREAM_URL, upstream_url);
        let spawned = Command::new("sh")
            .arg("-c")
            .arg(&command)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(source) => return Err(BridgeError::Spawn { command, source }),
        };
        let Some(pid) = child.id() else {
            return Err(BridgeError::ExitedAtOnce { command });
        };
        let tail = Arc::new(Mutex::new(Vec::new()));
        if let Some(out) = child.stdout.take() {
            tokio::spawn(keep_tail(out, tail.clone()));
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(keep_tail(err, tail.clone()));
        }
        Ok(BridgeProcess {
            command,
            child: tokio::sync::Mutex::new(child),
            pgid: Pid::from_raw(pid as i32),
            tail,
        })
    }

    /// The command as run, URLs filled in.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// The exit status, if the bridge has exited.
    pub async fn exited(&self) -> Option<ExitStatus> {
        self.child.lock().await.try_wait().ok().flatten()
    }

    /// Waits for the bridge to exit, at most `limit`.
    pub async fn wait(&self, limit: Duration) -> Option<ExitStatus> {
        let mut child = self.child.lock().await;
        tokio::time::timeout(limit, child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Sends SIGTERM to the bridge's process group and waits, at most `limit`, until every
    /// process of the group has exited (the shell may exit at once while the bridge it started
    /// still drains): how long it took, or why not. The group is killed if it is still there
    /// after `limit`.
    pub async fn terminate(&self, limit: Duration) -> Result<(Duration, ExitStatus), BridgeError> {
        let sent = Instant::now();
        killpg(self.pgid, Signal::SIGTERM).map_err(BridgeError::Signal)?;
        let status = self.wait(limit).await;
        while status.is_some() && group_alive(self.pgid) && sent.elapsed() < limit {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let took = sent.elapsed();
        match status {
            Some(status) if !group_alive(self.pgid) => Ok((took, status)),
            _ => {
                self.kill();
                Err(BridgeError::StillRunning { limit })
            }
        }
    }

    /// Kills the whole process group at once.
    pub fn kill(&self) {
        let _ = killpg(self.pgid, Signal::SIGKILL);
    }

    /// The newest lines the bridge printed (stdout and stderr), for a verdict.
    pub fn tail(&self, lines: usize) -> String {
        let tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        let text = String::from_utf8_lossy(&tail);
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for BridgeProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether a process of group `pgid` is still running. On Linux a zombie (exited, not yet
/// reaped by whoever inherited it) counts as exited: /proc says which state each process is in.
fn group_alive(pgid: Pid) -> bool {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return killpg(pgid, None).is_ok();
    };
    let group = pgid.as_raw().to_string();
    procs.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
        matches!(fields.as_slice(), [state, _ppid, pgrp, ..] if *pgrp == group && *state != "Z")
    })
}

/// Reads `from` to its end, keeping only the newest [`TAIL_BYTES`].
async fn keep_tail(mut from: impl AsyncRead + Unpin, tail: Arc<Mutex<Vec<u8>>>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 {
            return;
        }
        let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
        tail.extend_from_slice(&buf[..n]);
        let excess = tail.len().saturating_sub(TAIL_BYTES);
        tail.drain(..excess);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn urls_are_filled_in_and_output_is_kept() {
        let bridge = BridgeProcess::spawn(
            "echo dial {relay_url} relay {upstream_url}",
            "ws://r",
            "http://u",
        )
        .unwrap();
        assert!(bridge.wait(Duration::from_secs(5)).await.is_some());
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(bridge.tail(5), "dial ws://r relay http://u");
    }

    #[tokio::test]
    async fn sigterm_reaches_the_bridge_behind_the_shell() {
        // The shell waits for its child; SIGTERM to the group stops both.
        let bridge = BridgeProcess::spawn("sleep 30; echo {relay_url}", "x", "y").unwrap();
        let (took, status) = bridge.terminate(Duration::from_secs(5)).await.unwrap();
        assert!(took < Duration::from_secs(5));
        assert!(!status.success());
    }

    /// Waits until the command says its trap is set: a fixed sleep raced the shell's start on a
    /// loaded machine, and a SIGTERM before the trap ended the shell at once (3 ms).
    async fn trap_set(bridge: &BridgeProcess) {
        let started = Instant::now();
        while !bridge.tail(10).contains("ready") {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the command never said ready"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn the_stop_is_timed_until_the_bridge_behind_the_shell_has_exited() {
        // The shell exits at once; its child takes 300 ms to stop.
        let bridge = BridgeProcess::spawn(
            "sh -c 'trap \"sleep 0.3; exit 0\" TERM; echo ready; while :; do sleep 0.05; done' & wait # {relay_url}",
            "x",
            "y",
        )
        .unwrap();
        trap_set(&bridge).await;
        let (took, _) = bridge.terminate(Duration::from_secs(5)).await.unwrap();
        assert!(took >= Duration::from_millis(250), "{took:?}");
    }

    #[tokio::test]
    async fn a_bridge_that_ignores_sigterm_is_killed_after_the_limit() {
        let bridge =
            BridgeProcess::spawn("trap '' TERM; echo ready; sleep 30 # {relay_url}", "x", "y")
                .unwrap();
        trap_set(&bridge).await;
        let e = bridge
            .terminate(Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(matches!(e, BridgeError::StillRunning { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            "the bridge was still running 300 ms after SIGTERM (killed)"
        );
    }

    #[test]
    fn a_command_without_the_relay_url_is_refused() {
        let e = BridgeProcess::spawn("true", "x", "y").err().unwrap();
        assert!(matches!(e, BridgeError::NoRelayUrl), "{e}");
        assert_eq!(
            e.to_string(),
            "--bridge-command must contain {relay_url} (and {upstream_url}): the checker fills in where the bridge dials and where it relays to"
        );
    }

    #[test]
    fn the_tail_is_bounded() {
        let tail = Arc::new(Mutex::new(Vec::new()));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let big = vec![b'x'; TAIL_BYTES * 4];
        rt.block_on(keep_tail(&big[..], tail.clone()));
        assert_eq!(tail.lock().unwrap().len(), TAIL_BYTES);
    }
}
