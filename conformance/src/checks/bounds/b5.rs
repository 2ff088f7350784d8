//! B5: the bodies of all requests together fit the upload budget. Uploads whose declared lengths
//! fill the budget but for one digitize body and 1 MB are stalled after a prefix, and a chunked
//! digitize upload (no length to reserve) sends three quarters of its limit and stalls too; the
//! next large
//! upload must be refused at once, before its body is sent, while a small request is still
//! served; once the stalled uploads are gone the same upload must be admitted. Judged by the
//! client's own sockets and clock; where the checker can see the process (embedded, `--pid`), its
//! resident memory is read too. The server reports nothing for this clause.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::{ClauseId, ErrorCode};
use reqwest::header::CONTENT_TYPE;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::checks::ctx::{Ctx, ms};
use crate::checks::pieces;
use crate::checks::registry::Check;
use crate::remote::process::{ProcessSource, proc_rss_bytes};
use crate::remote::{Op, Target};

/// B5's entry in the check registry: the evidence the docs print, and `b5`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::B5,
    "Export uploads whose declared `Content-Length`s total the {upload.budget_mb} MB budget less \
     one digitize body and 1 MB are opened on raw connections, each sending its head and a \
     64 KiB prefix and then pausing (well inside the upload read timeout); a chunked digitize \
     upload, which has no length to reserve, sends three quarters of the endpoint's \
     `max_upload_bytes` and pauses too. A digitize upload declaring the endpoint's whole `max_upload_bytes` then \
     sends its head only: it must be answered {status:overloaded} with a `Retry-After` within \
     {tolerances.refusal_latency_ms} ms, before any of its body is sent (a server that does not \
     charge the chunked body has room for it). A small digitize must still be answered 200, and \
     no stalled upload may have been answered (a budget smaller than the contract's refuses one \
     of them). Once the stalled uploads are closed, the same large upload, sent whole, must be \
     admitted (answered anything but {status:overloaded}) within a second. Where the checker \
     can read the implementation's process (the embedded server, `--pid`), its resident memory \
     with the budget held may exceed what it was before by at most the budget and 64 MB.",
    |t, c| Box::pin(b5(t, c)),
);

/// The most uploads the check stalls: the contract's budget takes 16; an adopted budget that
/// would need more (a claim of terabytes) is not filled by opening sockets without end.
const MAX_STALLED: usize = 1024;
/// What each stalled upload sends before it pauses.
const PREFIX: usize = 64 << 10;
/// The chunks of the chunked upload.
const CHUNK: usize = 1 << 20;
/// The room the small digitize needs: the stalled uploads leave it free.
const SLACK: u64 = 1 << 20;
/// What the process's resident memory may grow by beyond the budget while it is held: the
/// runtime, the answers, and (embedded) the checker's own buffers.
const MEMORY_ALLOWANCE: u64 = 64 << 20;
/// Time the server gets to take the stalled heads in before the probe (they are sent on
/// connections of their own, so their order of arrival is not the order of handling).
const SETTLE: Duration = Duration::from_millis(200);
/// What the hold must leave before the upload read timeout besides [`SETTLE`] (`too_late`).
const MARGIN: Duration = Duration::from_millis(100);
/// How long the freed budget may take to admit again, and the spacing of the retries.
const PROMPT: Duration = Duration::from_secs(1);
const RETRY_EVERY: Duration = Duration::from_millis(100);
/// The most of a response the check reads (its head is all it needs).
const HEAD_CAP: usize = 16 << 10;

/// What the check will send, decided from the contract before a connection is opened.
struct Plan {
    addr: SocketAddr,
    host: String,
    /// The declared lengths of the stalled uploads.
    sizes: Vec<u64>,
    /// The bytes the chunked upload sends before it pauses; `None` when the fault cannot carry
    /// them within the upload read timeout (their length is then among the declared ones).
    chunked: Option<u64>,
    /// The probe's declared length: the digitize endpoint's `max_upload_bytes`.
    large: u64,
}

/// Why an upload on a raw connection could not be made as the check needs.
#[derive(Debug, thiserror::Error)]
enum UploadError {
    /// The TCP connection was refused or failed.
    #[error("cannot connect: {0}")]
    Connect(std::io::Error),
    /// A stalled upload's head or prefix could not be written.
    #[error("cannot send: {0}")]
    Send(std::io::Error),
    /// The probe's head could not be written.
    #[error("cannot send its head: {0}")]
    SendHead(std::io::Error),
    /// The server did not take a stalled upload's head and prefix within [`PROMPT`].
    #[error("its head and body were not taken within a second")]
    NotTaken,
    /// The task sending the upload panicked or was cancelled.
    #[error("the upload task panicked: {0}")]
    Panicked(tokio::task::JoinError),
    /// The probe's answer does not begin with an HTTP status line.
    #[error(
        "no HTTP status line in its answer ({read} bytes, then {})",
        if *.too_long { "too long" } else { "closed" }
    )]
    NoStatusLine {
        /// The bytes read.
        read: usize,
        /// Whether reading stopped at [`HEAD_CAP`] (else the server closed the connection).
        too_long: bool,
    },
}

/// Why the budget could not be held.
#[derive(Debug, thiserror::Error)]
enum HoldError {
    /// One of the uploads with a declared length.
    #[error("stalled upload {n} of {of}: {source}")]
    Stalled {
        /// Its number, from 1.
        n: usize,
        /// How many there are.
        of: usize,
        /// What went wrong.
        source: UploadError,
    },
    /// The chunked upload.
    #[error("the chunked upload: {0}")]
    Chunked(UploadError),
}

/// The uploads holding the budget, open until dropped.
struct Held {
    stalled: Vec<TcpStream>,
    chunked: Option<TcpStream>,
}

async fn b5(t: &Arc<Target>, c: &mut Ctx) {
    let refusal = t.bound(plimsoll_fault::Bound::RefusalLatency);
    let overloaded = t.status(ErrorCode::Overloaded);
    let Some(plan) = plan(t, c) else { return };
    c.expected = format!(
        "with {} MB of uploads stalled ({} of them chunked), a {}-byte upload refused {overloaded} within {} ms before its body; a small digitize 200; afterwards the same upload admitted",
        t.expected.upload_budget_mb() - 1,
        plan.chunked.unwrap_or(0) >> 20,
        plan.large,
        refusal.as_millis()
    );
    let rss_before = rss(&t.process);
    let began = Instant::now();
    let held = match hold_budget(t, &plan).await {
        Ok(held) => held,
        Err(e) => return c.fail(e.to_string()),
    };
    tokio::time::sleep(SETTLE).await;
    let rss_held = rss(&t.process);
    if too_late(t, c, began.elapsed()) {
        return;
    }

    let digitize = &t.expected.api().digitize;
    let probe = head(
        &digitize.path,
        &plan.host,
        &digitize.content_types[0],
        plan.large,
    );
    let give_up = refusal.max(Duration::from_millis(500)) * 4;
    let refused = first_answer(plan.addr, probe, give_up).await;
    let refused_note = judge_refusal(t, c, refused, refusal, overloaded);
    let small_note = small_digitize(t, c).await;
    judge_held(t, c, &held, began.elapsed());
    drop(held);

    let after_note = admitted_again(t, c, plan.large, overloaded).await;
    let memory_note = judge_memory(t, c, rss_before, rss_held);
    c.observed = format!(
        "{} uploads stalled with declared lengths, {}; {refused_note}; {small_note}; {after_note}; {memory_note}",
        plan.sizes.len(),
        plan.chunked.map_or("none chunked".into(), |n| format!(
            "1 chunked ({} MB sent)",
            n >> 20
        )),
    );
}

/// The uploads that fill the budget, or `None` (the check skipped, saying why) when the target
/// or the adopted values leave no way to fill it here.
fn plan(t: &Target, c: &mut Ctx) -> Option<Plan> {
    let budget = t.expected.upload_budget_mb() << 20;
    let (digitize, export) = (&t.expected.api().digitize, &t.expected.api().export);
    let large = digitize.max_upload_bytes;
    let Some((addr, host)) = t.raw_address() else {
        c.skip(format!(
            "B5 stalls uploads on raw HTTP/1 connections and needs a plain http:// target, not {}",
            t.base
        ));
        return None;
    };
    // The declared uploads leave one digitize body (and the slack) free, and the chunked
    // digitize upload fills three quarters of it: a server that charges it has a quarter left,
    // too little for the probe; one that does not has room for it. Charged at most at its
    // endpoint's limit, as a buffer grown by doubling may be, it still leaves the small digitize
    // its slack. (A digitize body rather than an export one: fewer bytes to send while the
    // stalled uploads' read timers run.)
    let chunked = large - large / 4;
    let declared = budget.checked_sub(SLACK + large);
    let Some(declared) = declared.filter(|_| chunked > SLACK) else {
        c.skip(format!(
            "a budget of {budget} bytes with digitize uploads of at most {large} bytes leaves no way to hold it with a chunked upload among the stalled ones"
        ));
        return None;
    };
    let carried = carried(t, c, chunked);
    let mut sizes = pieces(declared, export.max_upload_bytes);
    // A fault that cannot carry the chunked bytes in time: their length is declared instead.
    sizes.extend(carried.is_none().then_some(chunked));
    let chunked = carried;
    if sizes.len() > MAX_STALLED {
        c.skip(format!(
            "a budget of {} MB takes {} stalled uploads to fill, more than the {MAX_STALLED} the checker opens",
            budget >> 20,
            sizes.len()
        ));
        return None;
    }
    let cap = t.expected.connection_cap();
    if sizes.len() + 4 > cap {
        c.skip(format!(
            "{} stalled uploads, a chunked one and 3 probes need more connections than the cap of {cap}",
            sizes.len()
        ));
        return None;
    }
    Some(Plan {
        addr,
        host,
        sizes,
        chunked,
        large,
    })
}

/// The chunked upload's `bytes`, unless the fault the run goes through may not carry them
/// within half the time the hold has inside the upload read timeout, at its slowest rate: the
/// hold would come too close to the timeout to judge (a skip), or the server would rightly
/// time the upload out. Then that part is not applicable under the fault (said so), and its
/// length is declared instead, so the budget is still filled. (Half: the proxy's pieces cost
/// the machine time of their own; under the quick slicer, 24 MB took 949 ms of the 700 where
/// its slowest draws alone take 940.)
fn carried(t: &Target, c: &mut Ctx, bytes: u64) -> Option<u64> {
    let read_timeout = Duration::from_millis(t.expected.upload().read_timeout_ms);
    let within = read_timeout.saturating_sub(SETTLE + MARGIN);
    let Some((slowest, _)) = t.adjustments.byte_rates(plimsoll_fault::Stream::Upstream) else {
        return Some(bytes);
    };
    let takes = Duration::from_secs_f64(bytes as f64 / slowest);
    if takes <= within / 2 {
        return Some(bytes);
    }
    c.fault_removes(
        t,
        Some("the chunked upload"),
        format!(
            "its {bytes} bytes may take {:.0} ms at the fault's slowest rate, more than half the {} ms the hold has within the {} ms upload read timeout; its length was declared instead",
            ms(takes),
            within.as_millis(),
            read_timeout.as_millis()
        ),
    );
    None
}

/// Opens the stalled export uploads, one per declared length, and the chunked digitize one,
/// side by side: the hold takes as long as its slowest upload rather than their sum, which a
/// slow path (a fault, a far client) would push past the upload read timeout.
async fn hold_budget(t: &Target, plan: &Plan) -> Result<Held, HoldError> {
    let (export, digitize) = (&t.expected.api().export, &t.expected.api().digitize);
    let content_type = &export.content_types[0];
    let tasks: Vec<_> = plan
        .sizes
        .iter()
        .map(|&len| {
            let request = head(&export.path, &plan.host, content_type, len);
            let prefix = vec![b' '; PREFIX.min(len as usize)];
            tokio::spawn(stall(plan.addr, request, prefix))
        })
        .collect();
    let chunked = plan.chunked.map(|bytes| {
        let request = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: {}\r\nTransfer-Encoding: chunked\r\n\r\n",
            digitize.path, plan.host, digitize.content_types[0]
        );
        tokio::spawn(stall(plan.addr, request.into_bytes(), chunks(bytes)))
    });
    let of = plan.sizes.len();
    let mut stalled = Vec::with_capacity(of);
    for (i, task) in tasks.into_iter().enumerate() {
        let stream = task.await.unwrap_or_else(|e| Err(UploadError::Panicked(e)));
        stalled.push(stream.map_err(|source| HoldError::Stalled {
            n: i + 1,
            of,
            source,
        })?);
    }
    let chunked = match chunked {
        Some(task) => Some(
            task.await
                .unwrap_or_else(|e| Err(UploadError::Panicked(e)))
                .map_err(HoldError::Chunked)?,
        ),
        None => None,
    };
    Ok(Held { stalled, chunked })
}

/// `total` bytes of body as 1 MB chunks of the chunked transfer coding, without the last chunk.
fn chunks(total: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(total as usize + 1024);
    for n in pieces(total, CHUNK as u64) {
        out.extend_from_slice(format!("{n:x}\r\n").as_bytes());
        out.resize(out.len() + n as usize, b' ');
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// No stalled upload may have been answered while the budget was held.
fn judge_held(t: &Target, c: &mut Ctx, held: &Held, held_for: Duration) {
    if too_late(t, c, held_for) {
        return;
    }
    let answered = held.stalled.iter().filter(|s| has_answered(s)).count();
    c.require(answered == 0, || {
        format!(
            "{answered} of the {} stalled uploads (within the budget together) were answered before their bodies ended",
            held.stalled.len(),
        )
    });
    c.require(!held.chunked.as_ref().is_some_and(has_answered), || {
        "the stalled chunked upload (within the budget with the others) was answered before its body ended".into()
    });
}

/// Whether the budget has been held too close to the upload read timeout to judge anything: the
/// server may rightly have answered the stalled uploads `upload_timeout` and freed their bytes
/// (a machine too busy to open them in time). Then the check skips, saying so.
fn too_late(t: &Target, c: &mut Ctx, held_for: Duration) -> bool {
    let read_timeout = Duration::from_millis(t.expected.upload().read_timeout_ms);
    let late = held_for + MARGIN > read_timeout;
    if late {
        c.skip(format!(
            "holding the budget took {:.0} ms, too close to the {} ms upload read timeout to be sure the stalled uploads still held it",
            ms(held_for),
            read_timeout.as_millis()
        ));
    }
    late
}

/// The process's resident memory, where the checker can read it.
fn rss(process: &ProcessSource) -> Option<u64> {
    match process {
        ProcessSource::Proc { pid, .. } => proc_rss_bytes(*pid).map(|b| b as u64),
        ProcessSource::Metrics | ProcessSource::Unavailable(_) => None,
    }
}

/// With the budget held, the process may not have grown by more than the budget and
/// [`MEMORY_ALLOWANCE`]: the bodies it holds are all that the budget lets it keep.
fn judge_memory(t: &Target, c: &mut Ctx, before: Option<u64>, held: Option<u64>) -> String {
    let (Some(before), Some(held)) = (before, held) else {
        return match &t.process {
            ProcessSource::Proc { pid, .. } => format!("memory: /proc/{pid} could not be read"),
            ProcessSource::Metrics => "memory not read (no --pid; /metrics is a claim)".into(),
            ProcessSource::Unavailable(why) => format!("memory not read: {why}"),
        };
    };
    let budget = t.expected.upload_budget_mb() << 20;
    let grew = held.saturating_sub(before);
    c.require(grew <= budget + MEMORY_ALLOWANCE, || {
        format!(
            "with the budget held the process's resident memory grew by {} MB, more than the {} MB budget and {} MB",
            grew >> 20,
            budget >> 20,
            MEMORY_ALLOWANCE >> 20
        )
    });
    let whose = match t.process {
        ProcessSource::Proc { embedded: true, .. } => " (this process: server and checker)",
        _ => "",
    };
    format!(
        "memory{whose}: {} MB before, {} MB with the budget held",
        before >> 20,
        held >> 20
    )
}

/// A small digitize while the budget is held: the budget must leave room for it.
async fn small_digitize(t: &Arc<Target>, c: &mut Ctx) -> String {
    match t.digitize(None).await {
        Ok(reply) => {
            c.reply(t, "small digitize while the budget is held", &reply);
            c.require(reply.ok(), || {
                format!(
                    "a small digitize while the budget is held was answered {} {}: the budget must leave room for it",
                    reply.status,
                    reply.code()
                )
            });
            format!("small digitize {}", reply.status)
        }
        Err(e) => {
            c.fail(format!("small digitize while the budget is held: {e}"));
            "small digitize: no answer".into()
        }
    }
}

fn head(path: &str, host: &str, content_type: &str, len: u64) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {content_type}\r\nContent-Length: {len}\r\n\r\n"
    )
    .into_bytes()
}

/// Sends a head and part of the body, then leaves the connection open, stalled.
async fn stall(addr: SocketAddr, head: Vec<u8>, part: Vec<u8>) -> Result<TcpStream, UploadError> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(UploadError::Connect)?;
    let send = async {
        stream.write_all(&head).await?;
        stream.write_all(&part).await
    };
    tokio::time::timeout(PROMPT, send)
        .await
        .map_err(|_| UploadError::NotTaken)?
        .map_err(UploadError::Send)?;
    Ok(stream)
}

/// Whether the server has written anything on a stalled upload's connection, or closed it.
fn has_answered(stream: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    !matches!(stream.try_read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// A response head on a raw connection.
struct RawAnswer {
    after: Duration,
    status: u16,
    /// The head's fields, names as sent.
    fields: Vec<(String, String)>,
}

impl RawAnswer {
    /// The value of the field `name` (in any letter case, as HTTP compares names), if sent.
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `request` (a head only) and reads the first response head, timed from the end of the
/// write; `None` when none came within `give_up`.
async fn first_answer(
    addr: SocketAddr,
    request: Vec<u8>,
    give_up: Duration,
) -> Result<Option<RawAnswer>, UploadError> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(UploadError::Connect)?;
    stream
        .write_all(&request)
        .await
        .map_err(UploadError::SendHead)?;
    let sent = Instant::now();
    let mut buf = Vec::with_capacity(4096);
    let read = async {
        let mut chunk = [0u8; 4096];
        while buf.len() < HEAD_CAP && !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    };
    if tokio::time::timeout(give_up, read).await.is_err() {
        return Ok(None);
    }
    let after = sent.elapsed();
    let text = String::from_utf8_lossy(&buf);
    let mut lines = text.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or(UploadError::NoStatusLine {
            read: buf.len(),
            too_long: buf.len() >= HEAD_CAP,
        })?;
    let fields = lines
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect();
    Ok(Some(RawAnswer {
        after,
        status,
        fields,
    }))
}

fn judge_refusal(
    t: &Target,
    c: &mut Ctx,
    answer: Result<Option<RawAnswer>, UploadError>,
    refusal: Duration,
    overloaded: u16,
) -> String {
    let label = "the large upload while the budget is held";
    let max_retry = t.max_retry_after_s(plimsoll_spec::Pool::Digitize);
    match answer {
        Err(e) => {
            c.fail(format!("{label}: {e}"));
            "large upload: error".into()
        }
        Ok(None) => {
            c.fail(format!(
                "{label} got no answer before its body was sent: it was admitted to the read (no budget bounds the bodies in flight)"
            ));
            "large upload: not refused".into()
        }
        Ok(Some(a)) => {
            c.trials_ms.push(ms(a.after));
            c.sample("refusal latency", ms(a.after));
            c.require(a.status == overloaded, || {
                format!("{label} was answered {} instead of {overloaded}", a.status)
            });
            c.require(a.after <= refusal, || {
                format!(
                    "{label} was refused after {:.0} ms, more than {} ms",
                    ms(a.after),
                    refusal.as_millis()
                )
            });
            let t3 = t.expected.retry_after();
            let (name, min_retry) = (&t3.header, t3.min_seconds);
            let hint = a.field(name);
            let delay = hint.and_then(|v| v.parse::<u64>().ok());
            c.require(
                delay.is_some_and(|d| (min_retry..=max_retry).contains(&d)),
                || {
                    format!(
                        "{label}: {name} {hint:?} is not a delay of {min_retry}..={max_retry} s"
                    )
                },
            );
            format!(
                "large upload answered {} after {:.0} ms ({name} {})",
                a.status,
                ms(a.after),
                hint.unwrap_or("absent")
            )
        }
    }
}

/// With the stalled uploads gone, the large upload (sent whole) must be admitted within
/// [`PROMPT`]: any answer but an overload.
async fn admitted_again(t: &Arc<Target>, c: &mut Ctx, large: u64, overloaded: u16) -> String {
    let api = &t.expected.api().digitize;
    let body = hyper::body::Bytes::from(vec![0u8; large as usize]);
    let start = Instant::now();
    loop {
        let request = t
            .client
            .post(t.url(&api.path))
            .header(CONTENT_TYPE, api.content_types[0].as_str())
            .body(body.clone());
        match t.send(request, Op::Digitize).await {
            Ok(reply) if reply.status != overloaded => {
                c.reply(t, "the large upload once the budget is free", &reply);
                return format!(
                    "afterwards admitted ({} {}) after {:.0} ms",
                    reply.status,
                    reply.code(),
                    ms(start.elapsed())
                );
            }
            Ok(reply) if start.elapsed() >= PROMPT => {
                c.reply(t, "the large upload once the budget is free", &reply);
                c.fail(format!(
                    "the large upload was still refused {} {} a second after the stalled uploads were closed",
                    reply.status,
                    reply.code()
                ));
                return "afterwards still refused".into();
            }
            Ok(_) => tokio::time::sleep(RETRY_EVERY).await,
            Err(e) => {
                c.fail(format!("the large upload once the budget is free: {e}"));
                return "afterwards: no answer".into();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_upload_says_which_and_why() {
        let closed = UploadError::NoStatusLine {
            read: 12,
            too_long: false,
        };
        assert_eq!(
            closed.to_string(),
            "no HTTP status line in its answer (12 bytes, then closed)"
        );
        let long = UploadError::NoStatusLine {
            read: HEAD_CAP,
            too_long: true,
        };
        assert_eq!(
            long.to_string(),
            "no HTTP status line in its answer (16384 bytes, then too long)"
        );
        let stalled = HoldError::Stalled {
            n: 2,
            of: 15,
            source: UploadError::NotTaken,
        };
        assert_eq!(
            stalled.to_string(),
            "stalled upload 2 of 15: its head and body were not taken within a second"
        );
        assert_eq!(
            HoldError::Chunked(UploadError::NotTaken).to_string(),
            "the chunked upload: its head and body were not taken within a second"
        );
    }
}
