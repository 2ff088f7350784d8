//! A request body, read in full before admission (so a slow upload never holds a worker slot),
//! bounded in size and in time (F2, B1), and charged to the server's upload budget (B5) before
//! a byte of it is kept.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use http_body_util::BodyExt;
use plimsoll_spec::ErrorCode;

use crate::bounds::{DeadlinePolicy, UploadBudgetPolicy};
use crate::error::ErrorKind;
use crate::upload_budget::{Reservation, UploadBudget};

/// An unread body and its bounds.
pub struct Upload {
    body: Body,
    /// The `Content-Length` the client declared, if any.
    declared: Option<u64>,
    limit: u64,
    read_timeout: Duration,
    /// When the body is late, given when its head and its latest bytes arrived (B1).
    timer: Arc<dyn DeadlinePolicy>,
    budget: Arc<UploadBudget>,
}

/// A body read in full, with the share of the upload budget it holds until it is dropped.
pub struct Received {
    pub body: Bytes,
    pub reservation: Reservation,
}

/// Why a body was not taken.
pub enum UploadError {
    /// Bad or late input (F2, B1): answered with its own code.
    Rejected(ErrorKind),
    /// The upload budget has no room for it (B5): answered as an overload, body unread.
    OverBudget,
}

impl From<ErrorKind> for UploadError {
    fn from(kind: ErrorKind) -> Self {
        UploadError::Rejected(kind)
    }
}

impl Upload {
    pub fn new(
        body: Body,
        headers: &HeaderMap,
        limit: u64,
        (read_timeout, timer): (Duration, Arc<dyn DeadlinePolicy>),
        budget: &Arc<UploadBudget>,
        policy: &dyn UploadBudgetPolicy,
    ) -> Upload {
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        Upload {
            body,
            declared,
            limit,
            read_timeout,
            timer,
            budget: policy.budget_for(budget, declared),
        }
    }

    /// Reads the whole body. A declared length is charged to the budget before anything is
    /// read, a chunked body as its buffer grows. An oversize body is still drained (up to a
    /// bound, nothing kept, nothing charged) before the 400 is answered: a client that is still
    /// sending when the server closes would see a reset instead of the answer.
    // clause: F2 — `payload_too_large`, `empty_body` (and `upload_timeout` for a stalled body)
    pub async fn read(self) -> Result<Received, UploadError> {
        let Upload {
            mut body,
            declared,
            limit,
            read_timeout,
            timer,
            budget,
        } = self;
        let head = Instant::now();
        let oversize_declared = declared.is_some_and(|n| n > limit);
        if oversize_declared && !timer.drains_declared_oversize() {
            return Err(too_large(limit).into());
        }
        let mut kept = Kept::new(budget.reservation());
        // clause: B5 — a declared length past the budget is refused before its body is read
        // Past this much, stop draining and let the connection close.
        let drain_cap = limit.saturating_mul(4);
        if let Some(n) = declared.filter(|_| !oversize_declared)
            && !kept.reserve(n)
        {
            drain_in_background(body, drain_cap, read_timeout);
            return Err(UploadError::OverBudget);
        }
        let mut seen: u64 = 0;
        let bounds = FrameBounds {
            limit,
            keep: !oversize_declared,
            drain_cap,
            head,
            read_timeout,
            timer: &*timer,
        };
        let read = take_frames(&mut body, &mut kept, &bounds, &mut seen);
        match read.await {
            Err(ReadError::Late) => {
                return Err(ErrorKind::rejected(
                    ErrorCode::UploadTimeout,
                    format!(
                        "the request body did not arrive within {} ms",
                        read_timeout.as_millis()
                    ),
                )
                .into());
            }
            Err(ReadError::OverBudget) => {
                drain_in_background(body, drain_cap.saturating_sub(seen), read_timeout);
                return Err(UploadError::OverBudget);
            }
            Err(ReadError::Body(e)) => {
                return Err(ErrorKind::rejected(
                    ErrorCode::EmptyBody,
                    format!("the body could not be read: {e}"),
                )
                .into());
            }
            Ok(()) => {}
        }
        if seen > limit || oversize_declared {
            return Err(too_large(limit).into());
        }
        let received = kept.finish();
        if received.body.is_empty() {
            return Err(
                ErrorKind::rejected(ErrorCode::EmptyBody, "the request body is empty").into(),
            );
        }
        Ok(received)
    }
}

/// The refusal of a body over the endpoint's `limit`.
fn too_large(limit: u64) -> ErrorKind {
    ErrorKind::rejected(
        ErrorCode::PayloadTooLarge,
        format!("the upload is larger than {limit} bytes"),
    )
}

/// What bounds the reading of one body's frames.
struct FrameBounds<'a> {
    /// The endpoint's `max_upload_bytes`.
    limit: u64,
    /// Whether the bytes are kept (not when the declared length is already over the limit).
    keep: bool,
    /// Past this many bytes, reading stops.
    drain_cap: u64,
    /// When the head was read.
    head: Instant,
    read_timeout: Duration,
    timer: &'a dyn DeadlinePolicy,
}

/// Takes in `body`'s frames until its end (or past the drain cap), keeping those within the
/// limit, each frame due by the timer's deadline; `seen` counts every byte.
async fn take_frames(
    body: &mut Body,
    kept: &mut Kept,
    bounds: &FrameBounds<'_>,
    seen: &mut u64,
) -> Result<(), ReadError> {
    let mut last_read = bounds.head;
    loop {
        let late = bounds
            .timer
            .upload_deadline(bounds.head, last_read, bounds.read_timeout);
        let Ok(next) = tokio::time::timeout_at(late.into(), body.frame()).await else {
            return Err(ReadError::Late);
        };
        let Some(frame) = next else { break };
        last_read = Instant::now();
        let frame = frame.map_err(|e| ReadError::Body(e.to_string()))?;
        if let Ok(data) = frame.into_data() {
            *seen += data.len() as u64;
            if *seen <= bounds.limit && bounds.keep {
                kept.push(data, bounds.limit)?;
            } else if *seen > bounds.drain_cap {
                break;
            }
        }
    }
    Ok(())
}

/// Reads what is left of a refused body and keeps none of it, within the read timeout and up to
/// a bound: the refusal is answered at once, and a client still sending sees it instead of the
/// reset a close with unread bytes would cause.
fn drain_in_background(mut body: Body, cap: u64, within: Duration) {
    tokio::spawn(async move {
        let mut seen: u64 = 0;
        let drain = async {
            while let Some(Ok(frame)) = body.frame().await {
                if let Ok(data) = frame.into_data() {
                    seen += data.len() as u64;
                    if seen > cap {
                        break;
                    }
                }
            }
        };
        let _ = tokio::time::timeout(within, drain).await;
    });
}

/// Why reading stopped early.
enum ReadError {
    Body(String),
    OverBudget,
    /// The body was still arriving at its deadline (B1's upload read timeout).
    Late,
}

/// The bytes kept so far and the budget they are charged to. A body that arrives as one frame
/// (most do) is kept as that frame, without a copy; otherwise frames are copied into a buffer
/// whose whole capacity is charged, grown by doubling (up to the limit) only after the budget
/// granted the growth.
struct Kept {
    first: Option<Bytes>,
    buffer: Vec<u8>,
    reservation: Reservation,
}

impl Kept {
    fn new(reservation: Reservation) -> Kept {
        Kept {
            first: None,
            buffer: Vec::new(),
            reservation,
        }
    }

    /// Charges `total` bytes up front (a declared length).
    fn reserve(&mut self, total: u64) -> bool {
        self.reservation.grow_to(total)
    }

    fn len(&self) -> u64 {
        (self.first.as_ref().map_or(0, Bytes::len) + self.buffer.len()) as u64
    }

    // clause: B5 — a chunked body is charged as its buffer grows, cut off past the budget
    fn push(&mut self, data: Bytes, limit: u64) -> Result<(), ReadError> {
        let needed = self.len() + data.len() as u64;
        if self.first.is_none() && self.buffer.is_empty() {
            if !self.reservation.grow_to(needed) {
                return Err(ReadError::OverBudget);
            }
            self.first = Some(data);
            return Ok(());
        }
        if self.buffer.capacity() < needed as usize {
            let held = self.reservation.bytes();
            let capacity = if needed <= held {
                held
            } else {
                needed.max(held.saturating_mul(2).min(limit))
            };
            if !self.reservation.grow_to(capacity) {
                return Err(ReadError::OverBudget);
            }
            let capacity = usize::try_from(capacity).unwrap_or(usize::MAX);
            self.buffer
                .reserve_exact(capacity.saturating_sub(self.buffer.len()));
        }
        if let Some(earlier) = self.first.take() {
            self.buffer.extend_from_slice(&earlier);
        }
        self.buffer.extend_from_slice(&data);
        Ok(())
    }

    fn finish(self) -> Received {
        let body = match self.first {
            Some(first) if self.buffer.is_empty() => first,
            _ => Bytes::from(self.buffer),
        };
        Received {
            body,
            reservation: self.reservation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(n: usize) -> Bytes {
        Bytes::from(vec![7u8; n])
    }

    #[test]
    fn a_chunked_body_is_charged_its_whole_buffer_as_it_grows() {
        let budget = UploadBudget::new(1 << 20);
        let mut kept = Kept::new(budget.reservation());
        for _ in 0..10 {
            assert!(kept.push(chunk(10_000), 1 << 20).is_ok());
            assert!(
                budget.held() >= kept.buffer.capacity() as u64,
                "held {} < buffer capacity {}",
                budget.held(),
                kept.buffer.capacity()
            );
        }
        let received = kept.finish();
        assert_eq!(received.body.len(), 100_000);
        drop(received);
        assert_eq!(budget.held(), 0, "the reservation goes back with the body");
    }

    #[test]
    fn a_chunked_body_past_the_budget_is_cut_off_and_gives_back_what_it_held() {
        let budget = UploadBudget::new(50_000);
        let mut kept = Kept::new(budget.reservation());
        let mut refused = false;
        for _ in 0..10 {
            if kept.push(chunk(10_000), 1 << 20).is_err() {
                refused = true;
                break;
            }
        }
        assert!(refused, "100 kB of chunks never passed a 50 kB budget");
        assert!(budget.held() <= 50_000);
        drop(kept);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn a_declared_length_is_charged_once_and_the_buffer_never_exceeds_it() {
        let budget = UploadBudget::new(1 << 20);
        let mut kept = Kept::new(budget.reservation());
        assert!(kept.reserve(30_000));
        for _ in 0..3 {
            assert!(kept.push(chunk(10_000), 1 << 20).is_ok());
        }
        assert_eq!(budget.held(), 30_000);
        assert_eq!(kept.finish().body.len(), 30_000);
    }
}
