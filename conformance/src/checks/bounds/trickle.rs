//! What a fault that trickles the request's bytes (a bandwidth limit, a slicer with a delay)
//! changes in B1 and B4: a client that keeps sending, slowly, must not hold the server past the
//! timer that bounds its upload or its request head. The contract's text reads both as total
//! timers (the body "within N ms", a head "within N ms of opening"), so a trickle that cannot
//! finish in time is cut at the bound, however steadily its bytes arrive; an idle timer,
//! restarted by every read, is the classic slowloris hole and fails here. Each probe runs only
//! when the run's fault slows the upstream enough to make one, and is judged on the checker's
//! own socket and clock; without such a fault it sends nothing and says nothing.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_fault::{Bound, Stream};
use plimsoll_spec::ErrorCode;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::checks::ctx::{Ctx, ms};
use crate::remote::Target;

/// How far past its timer a trickle is made to last at the fault's fastest rate: far enough
/// that an answer at the bound cannot be its end.
const PAST: f64 = 1.5;
/// The largest request head the probe sends: heads past 8 KiB are refused by common servers
/// and proxies (nginx's default buffers), which would be an answer, not a timer.
const MAX_HEAD: u64 = 8 << 10;
/// The longest header line of the padded head.
const LINE: usize = 1000;
/// How early the checker's timer may see an event (its own slack).
const SLACK: Duration = Duration::from_millis(10);
/// What the checker reads of an answer: its status line is all it needs.
const READ_CAP: usize = 16 << 10;

/// The fault's upstream rates (slowest, fastest, bytes per second), when it trickles.
fn rates(t: &Target) -> Option<(f64, f64)> {
    t.adjustments.byte_rates(Stream::Upstream)
}

/// The bytes that take at least `PAST` times `timer` to cross at `fastest`.
fn past(timer: Duration, fastest: f64) -> u64 {
    (fastest * timer.as_secs_f64() * PAST).ceil() as u64 + 1
}

/// How long `bytes` may take to cross at `slowest`.
fn crossing(bytes: u64, slowest: f64) -> Duration {
    Duration::from_secs_f64(bytes as f64 / slowest)
}

/// What a raw connection showed: when an answer's head came or the server closed (from the
/// connection's opening), and the answer's status, if any.
struct Ended {
    after: Duration,
    status: Option<u16>,
    /// Whether neither came before the checker gave up.
    open: bool,
}

/// Writes `head` then `body` bytes on a fresh connection from a task of its own and reads what
/// comes back until an answer's head has come, the server closes, `give_up` passes, or
/// [`READ_CAP`] bytes came.
async fn send_and_watch(
    addr: SocketAddr,
    head: Vec<u8>,
    body: u64,
    give_up: Duration,
) -> std::io::Result<Ended> {
    let stream = TcpStream::connect(addr).await?;
    let _ = stream.set_nodelay(true);
    let (mut read, mut write) = stream.into_split();
    let opened = Instant::now();
    let writer: JoinHandle<()> = tokio::spawn(async move {
        if write.write_all(&head).await.is_err() {
            return;
        }
        let piece = vec![0u8; 64 << 10];
        let mut left = body;
        while left > 0 {
            let n = left.min(piece.len() as u64) as usize;
            if write.write_all(&piece[..n]).await.is_err() {
                return;
            }
            left -= n as u64;
        }
        // Keep the write half open: the answer, not the client's close, ends the exchange.
        std::future::pending::<()>().await;
    });
    let mut got = Vec::new();
    let watch = async {
        let mut chunk = [0u8; 4096];
        while got.len() < READ_CAP && !got.windows(4).any(|w| w == b"\r\n\r\n") {
            match read.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
            }
        }
    };
    let open = tokio::time::timeout(give_up, watch).await.is_err();
    writer.abort();
    let status = std::str::from_utf8(&got)
        .ok()
        .and_then(|text| text.strip_prefix("HTTP/1."))
        .and_then(|rest| rest.get(2..5))
        .and_then(|code| code.parse().ok());
    Ok(Ended {
        after: opened.elapsed(),
        status,
        open,
    })
}

/// B1 under a trickle: an upload whose body cannot arrive within the upload read timeout at the
/// fault's fastest rate must be answered `upload_timeout` at the bound (from its head, plus the
/// head's own crossing), and the sample image, crossing well within it, must be served. `None`
/// when the fault does not trickle the upstream.
pub(super) async fn upload(t: &Arc<Target>, c: &mut Ctx) -> Option<String> {
    let (slowest, fastest) = rates(t)?;
    let read_timeout = Duration::from_millis(t.expected.upload().read_timeout_ms);
    let digitize = &t.expected.api().digitize;
    let bytes = past(read_timeout, fastest);
    if bytes > digitize.max_upload_bytes {
        return Some(format!(
            "trickled upload: not applicable, the fault carries the largest digitize body ({} bytes) within {:.0} ms",
            digitize.max_upload_bytes,
            ms(crossing(digitize.max_upload_bytes, fastest))
        ));
    }
    let Some((addr, host)) = t.raw_address() else {
        return Some("trickled upload: not applicable, the target is not plain http://".into());
    };
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {}\r\nContent-Length: {bytes}\r\n\r\n",
        digitize.path, digitize.content_types[0]
    )
    .into_bytes();
    let head_crossing = crossing(head.len() as u64, slowest);
    let bound = read_timeout + t.bound(Bound::TimeoutLate) + head_crossing;
    let give_up = bound.max(crossing(bytes, slowest)) + Duration::from_secs(1);
    let ended = send_and_watch(addr, head, bytes, give_up).await;
    let note = judge_upload(t, c, ended, (bytes, fastest), read_timeout, bound);
    Some(format!(
        "{note}; {}",
        within(t, c, slowest, read_timeout).await
    ))
}

fn judge_upload(
    t: &Target,
    c: &mut Ctx,
    ended: std::io::Result<Ended>,
    (bytes, fastest): (u64, f64),
    read_timeout: Duration,
    bound: Duration,
) -> String {
    let what = format!(
        "an upload trickling past the {} ms upload read timeout ({bytes} bytes, at least {:.0} ms to cross)",
        read_timeout.as_millis(),
        ms(crossing(bytes, fastest))
    );
    let ended = match ended {
        Ok(ended) => ended,
        Err(e) => {
            c.fail(format!("{what}: cannot connect: {e}"));
            return "trickled upload: no connection".into();
        }
    };
    let expected = t.status(ErrorCode::UploadTimeout);
    let at = ms(ended.after);
    let answer = ended
        .status
        .map_or("no answer".to_owned(), |s| format!("{s}"));
    c.sample(
        "trickled upload's 408 after the read timeout",
        at - ms(read_timeout),
    );
    if ended.status != Some(expected) {
        c.fail(format!(
            "{what} got {answer} after {at:.0} ms, not {expected} `{}` at the bound: the upload read timer must be a total timer from the head, not one restarted by every read",
            ErrorCode::UploadTimeout
        ));
    } else if ended.after + SLACK < read_timeout || ended.after > bound {
        c.fail(format!(
            "{what} got {expected} after {at:.0} ms, outside {} to {:.0} ms (the timeout, its tolerance and the head's own crossing)",
            read_timeout.as_millis(),
            ms(bound)
        ));
    }
    format!("trickled upload ({bytes} bytes): {answer} after {at:.0} ms")
}

/// The sample image, crossing at the fault's slowest rate within half the upload read timeout,
/// must be served: a trickle that completes in time is admitted.
async fn within(t: &Arc<Target>, c: &mut Ctx, slowest: f64, read_timeout: Duration) -> String {
    let takes = crossing(t.image.len() as u64, slowest);
    if takes > read_timeout / 2 {
        return format!(
            "a trickle within the timeout: not applicable, the sample image may take {:.0} ms to cross",
            ms(takes)
        );
    }
    match t.digitize(None).await {
        Ok(reply) => {
            c.reply(t, "a trickled upload within the read timeout", &reply);
            c.require(reply.ok(), || {
                format!(
                    "the sample image, trickling in within {:.0} ms of the {} ms upload read timeout, was answered {} {}: a trickle that completes in time must be admitted",
                    ms(takes),
                    read_timeout.as_millis(),
                    reply.status,
                    reply.code()
                )
            });
            format!("a trickle within the timeout: {}", reply.status)
        }
        Err(e) => {
            c.fail(format!(
                "the sample image, trickled within the timeout: {e}"
            ));
            "a trickle within the timeout: no answer".into()
        }
    }
}

/// B4 under a trickle: a request head that cannot arrive within the head timeout at the fault's
/// fastest rate must be closed at the head timeout from the connection's opening, unanswered.
/// `None` when the fault does not trickle the upstream.
/// The head asks `path` (the request B4's kept connections ask).
pub(super) async fn head(t: &Target, c: &mut Ctx, path: &str) -> Option<String> {
    let (slowest, fastest) = rates(t)?;
    let timeout = Duration::from_millis(t.expected.connections.as_ref()?.head_timeout_ms);
    let bytes = past(timeout, fastest);
    if bytes > MAX_HEAD {
        return Some(format!(
            "trickled head: not applicable, the fault carries an {MAX_HEAD}-byte head within {:.0} ms",
            ms(crossing(MAX_HEAD, fastest))
        ));
    }
    let Some((addr, host)) = t.raw_address() else {
        return Some("trickled head: not applicable, the target is not plain http://".into());
    };
    let head = padded_head(path, &host, bytes as usize);
    let (early, late) = (t.bound(Bound::CloseEarly), t.bound(Bound::CloseLate));
    let give_up = timeout.max(crossing(bytes, slowest)) + late + Duration::from_secs(1);
    let what = format!(
        "a request head trickling past the {} ms head timeout ({bytes} bytes, at least {:.0} ms to cross)",
        timeout.as_millis(),
        ms(crossing(bytes, fastest))
    );
    let ended = match send_and_watch(addr, head, 0, give_up).await {
        Ok(ended) => ended,
        Err(e) => {
            c.fail(format!("{what}: cannot connect: {e}"));
            return Some("trickled head: no connection".into());
        }
    };
    Some(judge_head(c, &what, &ended, timeout, (early, late)))
}

fn judge_head(
    c: &mut Ctx,
    what: &str,
    ended: &Ended,
    timeout: Duration,
    (early, late): (Duration, Duration),
) -> String {
    let at = ms(ended.after);
    if ended.open {
        c.fail(format!(
            "{what} was still open after {at:.0} ms: the head timer must bound the head as a whole, not restart at every byte"
        ));
        return format!("trickled head: still open after {at:.0} ms");
    }
    if let Some(status) = ended.status.filter(|s| (200..300).contains(s)) {
        c.fail(format!(
            "{what} was answered {status} after {at:.0} ms: the head timer must bound the head as a whole, not restart at every byte"
        ));
        return format!("trickled head: answered {status} after {at:.0} ms");
    }
    c.sample(
        "trickled head's close after the head timeout",
        at - ms(timeout),
    );
    c.require(
        ended.after + early >= timeout && ended.after <= timeout + late,
        || {
            format!(
                "{what} was closed after {at:.0} ms, not within {} to {:.0} ms of its opening",
                timeout.saturating_sub(early).as_millis(),
                ms(timeout + late)
            )
        },
    );
    format!("trickled head: closed after {at:.0} ms")
}

/// A `GET path` head (the path B4's kept connections ask) of about `bytes` bytes: padded with header
/// lines of at most [`LINE`] bytes, the blank line last.
fn padded_head(path: &str, host: &str, bytes: usize) -> Vec<u8> {
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n");
    let mut n = 0;
    while head.len() + 2 < bytes {
        let room = (bytes - head.len() - 2).clamp(24, LINE);
        let name = format!("X-Plimsoll-Pad-{n}: ");
        let value = "a".repeat(room.saturating_sub(name.len() + 2).max(1));
        head.push_str(&format!("{name}{value}\r\n"));
        n += 1;
    }
    head.push_str("\r\n");
    head.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_padded_head_is_about_its_size_with_short_lines() {
        let head = padded_head("/healthz", "127.0.0.1:1", 5000);
        assert!((5000..5100).contains(&head.len()), "{}", head.len());
        assert!(head.ends_with(b"\r\n\r\n"));
        let text = String::from_utf8(head).unwrap();
        assert!(text.split("\r\n").all(|line| line.len() <= LINE));
    }

    #[test]
    fn a_trickle_past_its_timer_outlasts_it_at_the_fastest_rate() {
        let bytes = past(Duration::from_secs(2), 2500.0);
        assert_eq!(bytes, 7501);
        assert!(crossing(bytes, 2500.0) >= Duration::from_secs(3));
    }
}
