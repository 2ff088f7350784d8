//! What the checker can see of the target's process besides HTTP: its memory and open files,
//! from `/proc/<pid>` when it knows the pid (the embedded server runs in the checker's own
//! process; `--pid` names an external one), otherwise from the standard Prometheus process
//! metrics, which are the target's claims.

use std::path::Path;

/// Prometheus' standard process-collector names.
pub const RSS_METRIC: &str = "process_resident_memory_bytes";
/// The same collector's count of open file descriptors.
pub const FDS_METRIC: &str = "process_open_fds";

/// Where the server's memory and open-file figures come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessSource {
    /// `/proc/<pid>/status` and `/proc/<pid>/fd`.
    Proc {
        /// The server's process id.
        pid: u32,
        /// Whether it is the checker's own process (the embedded server), whose figures
        /// include the checker's.
        embedded: bool,
    },
    /// The target's own `process_*` metrics.
    Metrics,
    /// Nothing to read, with the reason.
    Unavailable(String),
}

impl ProcessSource {
    /// The embedded server: it runs in this process.
    pub fn this_process() -> ProcessSource {
        ProcessSource::Proc {
            pid: std::process::id(),
            embedded: true,
        }
    }

    /// An external target: `/proc/PID` when `--pid` names a readable one, else its metrics.
    pub fn external(pid: Option<u32>) -> ProcessSource {
        match pid {
            Some(pid) if Path::new(&format!("/proc/{pid}/status")).exists() => {
                ProcessSource::Proc {
                    pid,
                    embedded: false,
                }
            }
            Some(pid) => ProcessSource::Unavailable(format!("/proc/{pid} is not readable here")),
            None => ProcessSource::Metrics,
        }
    }

    /// Where the figures come from, or why there are none, as evidence names it.
    pub fn describe(&self) -> String {
        match self {
            ProcessSource::Proc {
                pid,
                embedded: true,
            } => {
                format!(
                    "/proc/{pid} (the embedded server shares this process with the load generator)"
                )
            }
            ProcessSource::Proc { pid, .. } => format!("/proc/{pid}"),
            ProcessSource::Metrics => format!("{RSS_METRIC} / {FDS_METRIC} from /metrics"),
            ProcessSource::Unavailable(why) => why.clone(),
        }
    }
}

/// Resident memory in bytes, from `/proc/<pid>/status`.
pub fn proc_rss_bytes(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024.0)
}

/// Open file descriptors, from `/proc/<pid>/fd`.
pub fn proc_fds(pid: u32) -> Option<f64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let pid = std::process::id();
        assert!(proc_rss_bytes(pid).is_some_and(|b| b > 1e5));
        assert!(proc_fds(pid).is_some_and(|n| n >= 3.0));
    }
}
