//! A request body, read in full before admission (so a slow upload never holds a worker slot),
//! bounded in size and in time.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use http_body_util::BodyExt;
use plimsoll_spec::ErrorCode;

use crate::error::ErrorKind;

/// An unread body and its bounds.
pub struct Upload {
    body: Body,
    /// The `Content-Length` the client declared, if any.
    declared: Option<u64>,
    limit: u64,
    read_timeout: Duration,
}

impl Upload {
    pub fn new(body: Body, headers: &HeaderMap, limit: u64, read_timeout: Duration) -> Upload {
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        Upload {
            body,
            declared,
            limit,
            read_timeout,
        }
    }

    /// Reads the whole body. An oversize body is still drained (up to a bound) before the 400 is
    /// answered: a client that is still sending when the server closes would see a reset
    /// instead of the answer.
    // clause: F2 — `payload_too_large`, `empty_body` (and `upload_timeout` for a stalled body)
    pub async fn read(self) -> Result<Bytes, ErrorKind> {
        let Upload {
            mut body,
            declared,
            limit,
            read_timeout,
        } = self;
        // Past this much, stop draining and let the connection close.
        let drain_cap = limit.saturating_mul(4);
        // A body that arrives as one frame (most do) is kept as that frame, without a copy.
        let mut first: Option<Bytes> = None;
        let mut kept = Vec::new();
        let mut seen: u64 = 0;
        let read = async {
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| e.to_string())?;
                if let Ok(data) = frame.into_data() {
                    seen += data.len() as u64;
                    if seen <= limit && declared.is_none_or(|n| n <= limit) {
                        match first.take() {
                            None if kept.is_empty() => first = Some(data),
                            Some(earlier) => {
                                kept.extend_from_slice(&earlier);
                                kept.extend_from_slice(&data);
                            }
                            None => kept.extend_from_slice(&data),
                        }
                    } else if seen > drain_cap {
                        break;
                    }
                }
            }
            Ok::<(), String>(())
        };
        match tokio::time::timeout(read_timeout, read).await {
            Err(_) => {
                return Err(ErrorKind::rejected(
                    ErrorCode::UploadTimeout,
                    format!(
                        "the request body did not arrive within {} ms",
                        read_timeout.as_millis()
                    ),
                ));
            }
            Ok(Err(e)) => {
                return Err(ErrorKind::rejected(
                    ErrorCode::EmptyBody,
                    format!("the body could not be read: {e}"),
                ));
            }
            Ok(Ok(())) => {}
        }
        if seen > limit || declared.is_some_and(|n| n > limit) {
            return Err(ErrorKind::rejected(
                ErrorCode::PayloadTooLarge,
                format!("the upload is larger than {limit} bytes"),
            ));
        }
        let body = first.unwrap_or_else(|| Bytes::from(kept));
        if body.is_empty() {
            return Err(ErrorKind::rejected(
                ErrorCode::EmptyBody,
                "the request body is empty",
            ));
        }
        Ok(body)
    }
}
