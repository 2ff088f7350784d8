//! The service's error log: one JSON line per error answer (`{"request_id": …, "status": …,
//! "error": …}`), appended to a file the service is given (`ERROR_LOG`), joined to its answer by
//! the request id. A lying variant writes plain text, or leaves its refusals out.

use std::path::Path;
use std::sync::Arc;

use http::StatusCode;
use tokio::io::AsyncWriteExt as _;

/// How the service writes its error lines: as its contract says, or as a lying variant does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorLines {
    /// One JSON line per error answer.
    #[default]
    Json,
    /// One plain-text line per error answer (`ERROR <id> <status>`), no JSON.
    Plain,
    /// No line for a refusal (`429`, `503`): only other errors are logged.
    SkipRefusals,
}

/// The open log, shared by every request.
#[derive(Clone)]
pub(crate) struct ErrorLog {
    file: Arc<tokio::sync::Mutex<tokio::fs::File>>,
    lines: ErrorLines,
}

impl ErrorLog {
    /// Opens `path` for appending (created if missing), once, as the service starts.
    pub(crate) fn open(path: &Path, lines: ErrorLines) -> std::io::Result<ErrorLog> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(ErrorLog {
            file: Arc::new(tokio::sync::Mutex::new(tokio::fs::File::from_std(file))),
            lines,
        })
    }

    /// Writes the line of an error answer `status` to the request `id` (none for another
    /// answer). A line that cannot be written is lost, never the answer.
    pub(crate) async fn write(&self, id: &str, status: StatusCode) {
        if !(status.is_client_error() || status.is_server_error()) {
            return;
        }
        let refusal = matches!(status.as_u16(), 429 | 503);
        let error = status.canonical_reason().unwrap_or("error");
        let line = match self.lines {
            ErrorLines::SkipRefusals if refusal => return,
            ErrorLines::Plain => format!("ERROR {id} {}\n", status.as_u16()),
            ErrorLines::Json | ErrorLines::SkipRefusals => {
                let line = serde_json::json!({
                    "request_id": id,
                    "status": status.as_u16(),
                    "error": error,
                });
                format!("{line}\n")
            }
        };
        let mut file = self.file.lock().await;
        let _ = file.write_all(line.as_bytes()).await;
        let _ = file.flush().await;
    }
}
