//! B5 under a flood: hundreds of near-limit uploads at once, each stalled just before its end.
//! The bodies the server holds stay within the upload budget (its own accounting, and the
//! process's resident memory beside it), `/healthz` keeps answering, and every upload gets its
//! documented answer: `overloaded` at once past the budget, `upload_timeout` for the ones it
//! took in and that never finished. The figures are printed for docs/benchmarks.md.

use std::sync::Arc;

use plimsoll_engine::job::allocator;
use plimsoll_spec::ErrorCode;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::*;

/// Uploads at once: half declare their length, half are chunked.
const UPLOADS: usize = 240;
/// The most resident memory may grow beyond the budget, besides what the allocator keeps
/// ([`KEPT_BY_POLICY`]): the server's own buffers (hyper's read buffers, one per connection),
/// the test's clients (one shared piece) and allocator slack.
const ALLOWANCE_MB: u64 = 256;
/// What the process keeps of the memory it frees, by the allocator policy every server sets
/// (`job/allocator`): a heap keeps up to its trim threshold free at its top for the next job,
/// and blocks under the mapping threshold (a chunked body's buffer below 32 MB, and each smaller
/// one it grew from) come from the heaps rather than from mappings returned when freed. The
/// allowance above was set before that policy: with it, the flood's peak read 1153 to 1333 MB
/// over 19 to 20 MB before (ten runs, at `f194712` and after), a budget of 1024 MB, and one in
/// five went past the old bound of 1300; the memory the uploads hold is judged exactly by the
/// server's own accounting (`peak held`), and a server without a budget holds the flood's 2 GB.
const KEPT_BY_POLICY: u64 = allocator::TRIM_THRESHOLD as u64;
/// How long one `/healthz` may take during the flood. It proves the server stays alive, not a
/// latency (no clause bounds `/healthz`): 240 clients pushing 2 GB through loopback in this same
/// process share two cores with it, and a 1 s bound was missed once when other work ran beside
/// the test (8 of 9 answered in time).
const HEALTHZ_LIVENESS: Duration = Duration::from_secs(3);
/// What each client writes at a time.
const PIECE: usize = 1 << 20;

/// What one flooding client saw.
#[derive(Debug)]
struct Seen {
    status: Option<u16>,
    sent: u64,
}

/// Writes a near-limit body in pieces of `piece` and stops 1 MB short of its end (or when the
/// server has answered); then waits for the answer, up to `wait`. Every client writes the same
/// piece: the resident memory judged is this process's, and 240 pieces of their own (240 MB)
/// were most of the allowance, so the server's buffers passed it once.
async fn flood_one(
    addr: std::net::SocketAddr,
    limit: u64,
    chunked: bool,
    wait: Duration,
    piece: Arc<[u8]>,
) -> Seen {
    let Ok(stream) = TcpStream::connect(addr).await else {
        return Seen {
            status: None,
            sent: 0,
        };
    };
    let (mut rx, mut tx) = stream.into_split();
    let length = if chunked {
        "Transfer-Encoding: chunked".to_owned()
    } else {
        format!("Content-Length: {limit}")
    };
    let head = format!(
        "POST /v1/export HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{length}\r\n\r\n"
    );
    let answer = tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        let mut got = Vec::new();
        while !got.windows(4).any(|w| w == b"\r\n\r\n") && got.len() < 64 << 10 {
            match rx.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&got)
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse::<u16>().ok())
    });
    let frame = format!("{PIECE:x}\r\n");
    let mut sent = 0;
    let _ = tx.write_all(head.as_bytes()).await;
    while sent + 2 * PIECE as u64 <= limit && !answer.is_finished() {
        let wrote = if chunked {
            tx.write_all(frame.as_bytes()).await.is_ok()
                && tx.write_all(&piece).await.is_ok()
                && tx.write_all(b"\r\n").await.is_ok()
        } else {
            tx.write_all(&piece).await.is_ok()
        };
        if !wrote {
            break;
        }
        sent += PIECE as u64;
    }
    let status = tokio::time::timeout(wait, answer)
        .await
        .ok()
        .and_then(|joined| joined.ok().flatten());
    drop(tx);
    Seen { status, sent }
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b5_a_flood_of_stalled_uploads_stays_within_the_upload_budget() {
    let read_timeout = Duration::from_millis(6000);
    let s = Arc::new(
        TestServer::start(&[(
            "UPLOAD_READ_TIMEOUT_MS",
            &read_timeout.as_millis().to_string(),
        )])
        .await,
    );
    let contract = &s.state().config.contract;
    let budget = contract.upload_budget_mb() << 20;
    let limit = contract.api().export.max_upload_bytes;
    let addr = s.server.server().addr;
    let before = rss_bytes();
    let started = Instant::now();

    let piece: Arc<[u8]> = vec![b' '; PIECE].into();
    let clients: Vec<_> = (0..UPLOADS)
        .map(|i| {
            tokio::spawn(flood_one(
                addr,
                limit,
                i % 2 == 1,
                read_timeout + Duration::from_secs(4),
                piece.clone(),
            ))
        })
        .collect();

    // While the flood is on: the budget holds, memory follows it, /healthz answers.
    let mut peak_held = 0;
    let mut peak_rss = before;
    let mut healthz = (0, 0);
    let mut slowest = Duration::ZERO;
    while started.elapsed() < read_timeout - Duration::from_millis(500) {
        peak_held = peak_held.max(s.state().upload_budget.held());
        peak_rss = peak_rss.max(rss_bytes());
        let asked = Instant::now();
        let ok = s
            .client
            .get(s.url("/healthz"))
            .timeout(HEALTHZ_LIVENESS)
            .send()
            .await
            .is_ok_and(|r| r.status() == 200);
        slowest = slowest.max(asked.elapsed());
        healthz = (healthz.0 + usize::from(ok), healthz.1 + 1);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut seen = Vec::new();
    for client in clients {
        seen.push(client.await.unwrap());
    }
    let took = started.elapsed();
    let after_rss = rss_bytes();

    let overloaded = contract.error(ErrorCode::Overloaded).status;
    let upload_timeout = contract.error(ErrorCode::UploadTimeout).status;
    let refused = seen.iter().filter(|s| s.status == Some(overloaded)).count();
    let timed_out = seen
        .iter()
        .filter(|s| s.status == Some(upload_timeout))
        .count();
    let sent_mb: u64 = seen.iter().map(|s| s.sent).sum::<u64>() >> 20;
    println!(
        "flood: {UPLOADS} uploads of up to {} MB ({sent_mb} MB sent in all) in {:.1} s; budget {} MB, \
         peak held {} MB; RSS before {} MB, peak {} MB, after {} MB; {refused} refused {overloaded}, \
         {timed_out} answered {upload_timeout}; /healthz 200 {} of {} times (slowest {} ms)",
        limit >> 20,
        took.as_secs_f64(),
        budget >> 20,
        peak_held >> 20,
        before >> 20,
        peak_rss >> 20,
        after_rss >> 20,
        healthz.0,
        healthz.1,
        slowest.as_millis(),
    );
    assert!(peak_held <= budget, "held {peak_held} of {budget}");
    assert!(
        peak_rss <= before + budget + (ALLOWANCE_MB << 20) + KEPT_BY_POLICY,
        "RSS grew from {} MB to {} MB, past the {} MB budget, the {ALLOWANCE_MB} MB allowance and the {} MB the allocator keeps",
        before >> 20,
        peak_rss >> 20,
        budget >> 20,
        KEPT_BY_POLICY >> 20
    );
    assert_eq!(healthz.0, healthz.1, "/healthz failed during the flood");
    let unanswered: Vec<_> = seen
        .iter()
        .enumerate()
        .filter(|(_, s)| s.status != Some(overloaded) && s.status != Some(upload_timeout))
        .collect();
    assert!(
        unanswered.is_empty(),
        "uploads without their documented answer: {unanswered:?}"
    );
    assert!(
        refused > 0 && timed_out > 0,
        "{refused} refused, {timed_out} timed out"
    );
    s.wait_metric(
        plimsoll_spec::MetricName::WorkersBusy,
        Some(plimsoll_spec::Pool::Export),
        Duration::from_secs(1),
        |v| v == 0.0,
    )
    .await
    .expect("no upload took a slot");
    let deadline = Instant::now() + Duration::from_secs(2);
    while s.state().upload_budget.held() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(s.state().upload_budget.held(), 0, "the budget came back");
    assert!(s.temp_entries().is_empty(), "{:?}", s.temp_entries());
}
