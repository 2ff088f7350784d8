//! B4: connections are bounded — a silent, a half-sent and an idle keep-alive connection are
//! each closed at the head timeout (not before, not much after), and past the connection cap one
//! more is closed at once, unanswered, while the open ones keep being served. Judged by what the
//! client's own sockets see; the server reports nothing for this clause. For any contract that
//! declares `[connections]`: a kept connection asks the contract's request (`api.healthz` on the
//! reference surface, `connections.request` elsewhere), and a contract that promises no cap has
//! its head timeout judged alone.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use plimsoll_spec::model::Recipe;
use plimsoll_spec::{ClauseId, Contract};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::checks::ctx::{Ctx, ms};
use crate::checks::registry::{Check, reference_or_declared};
use crate::remote::{Target, connection};

/// B4's entry in the check registry: the evidence the docs print, and `b4`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::B4,
    "Three connections are opened at once: one sends nothing, one sends half a request head and \
     stalls, one sends a whole request, reads its answer and stays idle. The server must close \
     each no earlier than {connections.head_timeout_ms} ms (from opening, or from the answer's end) and \
     within {tolerances.timeout_late_ms} ms after it, while `{api.healthz.path}` answers 200 on fresh \
     connections meanwhile. Then connections up to the cap are opened 32 at a time (a slow path \
     costs one round trip per 32, not one per connection), each asking `{api.healthz.path}` once and \
     staying open, and one more after them: the one past {connections.max_connections} must be closed without an answer \
     within a second (not served, not left waiting in the accept backlog); one refused below the \
     cap is retried for up to a second, since a place held by a connection closed just before \
     may take a moment to free. At the cap, a request on an open connection must still be \
     answered, and after one is closed a new connection must be served within a second; once \
     all are closed, 32 fresh connections at once (or the cap, if smaller) must be served within \
     two seconds (the places freed). Under \
     a fault that trickles the request's bytes (`--fault trickle`), a request head that cannot \
     arrive within 1.5 times the head timeout must be closed unanswered at the head timeout \
     from its connection's opening: the timer bounds the head as a whole.",
    |t, c| Box::pin(b4(t, c)),
)
.applies_when(applies)
.covers(&["connection-bounds"]);

/// B4 judges the reference surface's bounds and any contract's `[connections]`.
fn applies(contract: &Contract) -> Result<(), String> {
    reference_or_declared(
        contract,
        contract.connections.is_some(),
        "the contract declares no connection bounds (`[connections]`: a head timeout, a cap)",
    )
}

/// How long a connection past the cap may take to be closed, and a freed place to serve again.
const PROMPT: Duration = Duration::from_secs(1);
/// Connections opened at once while filling the cap: a slow path costs one round trip per wave
/// rather than per connection, and a wave stays well inside a small accept backlog (a SYN
/// dropped from a full one is sent again only a second later).
const WAVE: usize = 32;

/// How far inside the head timeout the cap's fill must end for the cap to be told from the
/// timeout.
const FILL_MARGIN: Duration = Duration::from_millis(100);
/// Spacing of retries while a place frees.
const RETRY_EVERY: Duration = Duration::from_millis(100);

async fn b4(t: &Arc<Target>, c: &mut Ctx) {
    let Some(b4) = t.expected.connections.as_ref() else {
        return;
    };
    let head = Duration::from_millis(b4.head_timeout_ms);
    let late = t.bound(plimsoll_fault::Bound::CloseLate);
    // How early a close may come: timer granularity (the server's timer starts after our
    // connect), and a latency fault's jitter.
    let early = t.bound(plimsoll_fault::Bound::CloseEarly);
    let cap = b4.max_connections.map(|n| n as usize);
    c.expected = format!(
        "silent, half-sent and idle connections closed {}–{} ms after opening or answering; {}",
        b4.head_timeout_ms,
        (head + late).as_millis(),
        cap.map_or("no connection cap promised".to_owned(), |cap| format!(
            "connection {} closed unanswered within {} ms; open ones still served; a freed place served again",
            cap + 1,
            PROMPT.as_millis()
        ))
    );
    let Some(at) = Endpoint::of(t) else {
        c.skip(format!(
            "B4 opens raw HTTP/1 connections and needs a plain http:// target, not {}",
            t.base
        ));
        return;
    };

    // First, while every place is free: after the cap's fill, closes still on their way leave
    // a new connection refused for a moment.
    let trickled = super::trickle::head(t, c, &at.probe.path).await;
    let (closes, never_closed) = head_timeouts(t, c, &at, head, (early, late)).await;
    let cap_note = match cap {
        Some(cap) => match unfillable(t, cap, head) {
            Some(why) => {
                c.fault_removes(t, Some("the connection cap"), why);
                "connection cap not judged".to_owned()
            }
            None => {
                let room = Room {
                    cap,
                    left_open: never_closed,
                };
                connection_cap(c, &at, room, head).await
            }
        },
        None => "no connection cap declared: not judged".to_owned(),
    };
    c.observed = format!("{closes}; {cap_note}");
    if let Some(note) = trickled {
        c.observed = format!("{}; {note}", c.observed);
    }
}

/// Why the run's fault leaves no time to fill `cap` connections within the head timeout, when
/// its slowest round trips would not: the fill opens them [`WAVE`] at a time, each wave asked
/// and answered before the next, and must end well inside the timeout (`connection_cap`), or the
/// first connections' idle close (the server's right) ends the fill before the cap is reached.
/// A fault-free run, or one whose round trips add nothing, always fills.
fn unfillable(t: &Target, cap: usize, head: Duration) -> Option<String> {
    let (_, most) = t.adjustments.round_trip();
    let waves = u32::try_from(cap.div_ceil(WAVE)).unwrap_or(u32::MAX);
    let slowest = most.saturating_mul(waves);
    if most.is_zero() || slowest + FILL_MARGIN < head {
        return None;
    }
    Some(format!(
        "filling {cap} connections {WAVE} at a time takes {waves} round trips, each up to {} ms through it: up to {} ms, not well inside the {} ms head timeout, whose idle close would end the first connections before the last opened",
        most.as_millis(),
        slowest.as_millis(),
        head.as_millis()
    ))
}

/// What one idle connection showed: the time from opening (or from the answer's end) to the
/// server's close, `None` if still open when the checker gave up, or why it could not be seen.
type Closed = Result<Option<Duration>, ProbeError>;

/// Where B4's raw connections go and what they send, all from the contract: the target's address
/// and `Host`, the request an answered connection asks (answered at once, whatever the pools
/// hold), and the request head a half-sent connection stops in.
#[derive(Debug, Clone)]
struct Endpoint {
    addr: SocketAddr,
    host: String,
    /// The reference's health path, or the contract's `connections.request`.
    probe: Recipe,
    /// A request head cut before its end.
    partial_head: Vec<u8>,
}

impl Endpoint {
    /// The target's, when it is plain HTTP.
    fn of(t: &Target) -> Option<Endpoint> {
        let (addr, host) = t.raw_address()?;
        let contract = &t.expected;
        let (probe, partial_head) = if contract.is_reference() {
            // A pool request that never finishes its head.
            let api = contract.api();
            let head = format!(
                "POST {} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {}\r\n",
                api.digitize.path, api.digitize.content_types[0]
            );
            (Recipe::get(&api.healthz.path), head.into_bytes())
        } else {
            let probe = contract.connections.as_ref()?.request.clone()?;
            let head = format!(
                "{} {} HTTP/1.1\r\nHost: {host}\r\n",
                probe.method, probe.path
            );
            (probe, head.into_bytes())
        };
        Some(Endpoint {
            addr,
            host,
            probe,
            partial_head,
        })
    }

    /// The probe request as the evidence names it (`GET /healthz`).
    fn asked(&self) -> String {
        format!("{} {}", self.probe.method, self.probe.path)
    }
}

/// Why a raw connection could not be opened or used as the check needs.
#[derive(Debug, thiserror::Error)]
enum ProbeError {
    /// The TCP connection was refused or failed.
    #[error("cannot connect: {0}")]
    Connect(std::io::Error),
    /// The first bytes could not be written.
    #[error("cannot send: {0}")]
    Send(std::io::Error),
    /// The HTTP/1 client could not start on the connection.
    #[error("HTTP/1 handshake: {0}")]
    Handshake(hyper::Error),
    /// The probe request answered, but not with its status.
    #[error("{path} answered {status}")]
    Status {
        /// The probe request (`GET /healthz`).
        path: String,
        /// What it answered.
        status: u16,
    },
    /// The connection closed before the health path was answered.
    #[error("closed before {0} was answered")]
    Closed(String),
    /// The health path was neither answered nor its connection closed within [`PROMPT`].
    #[error("{0} unanswered for a second")]
    Stalled(String),
    /// The task watching the connection panicked or was cancelled.
    #[error("the probe panicked: {0}")]
    Panicked(tokio::task::JoinError),
}

/// The three kinds of idle connection, opened side by side.
struct IdleConnections {
    silent: JoinHandle<Closed>,
    half: JoinHandle<Closed>,
    idle: JoinHandle<Closed>,
}

impl IdleConnections {
    /// Opens a silent, a half-sent and an idle keep-alive connection, each waiting up to
    /// `give_up` for its close.
    fn open(at: &Endpoint, give_up: Duration) -> IdleConnections {
        IdleConnections {
            silent: tokio::spawn(closed_after(at.addr, None, give_up)),
            half: tokio::spawn(closed_after(
                at.addr,
                Some(at.partial_head.clone()),
                give_up,
            )),
            idle: tokio::spawn(idle_closed_after(at.clone(), give_up)),
        }
    }

    /// Whether every one has seen its close (or given up).
    fn all_finished(&self) -> bool {
        self.silent.is_finished() && self.half.is_finished() && self.idle.is_finished()
    }
}

/// The three kinds of idle connection, side by side, with the health path asked meanwhile.
async fn head_timeouts(
    t: &Arc<Target>,
    c: &mut Ctx,
    at: &Endpoint,
    head: Duration,
    (early, late): (Duration, Duration),
) -> (String, usize) {
    let give_up = head + late + Duration::from_millis(500);
    let connections = IdleConnections::open(at, give_up);
    let healthz = healthz_meanwhile(t, at, &connections, head + late).await;
    let failed = healthz.iter().filter(|ok| !**ok).count();
    c.require(failed == 0, || {
        format!(
            "{} failed {failed} of {} times while idle connections were open",
            at.asked(),
            healthz.len()
        )
    });

    let IdleConnections { silent, half, idle } = connections;
    let mut notes = Vec::new();
    let mut never_closed = 0;
    for (label, task) in [
        ("a silent connection", silent),
        ("a connection that sent half a request head", half),
        ("an idle keep-alive connection (after one answer)", idle),
    ] {
        let closed = task.await.unwrap_or_else(|e| Err(ProbeError::Panicked(e)));
        never_closed += usize::from(matches!(closed, Ok(None)));
        notes.push(judge_close(c, label, closed, head, (early, late), give_up));
    }
    let note = format!(
        "silent / half-sent / idle connections: {}; {} {} {} of {} times meanwhile",
        notes.join(" / "),
        at.asked(),
        at.probe.status,
        healthz.len() - failed,
        healthz.len()
    );
    (note, never_closed)
}

/// Asks the probe request on fresh connections every quarter second until `until` passed or
/// every idle connection saw its close: whether each was answered with its status.
async fn healthz_meanwhile(
    t: &Target,
    at: &Endpoint,
    connections: &IdleConnections,
    until: Duration,
) -> Vec<bool> {
    let mut healthz = Vec::new();
    let start = Instant::now();
    while start.elapsed() < until && !connections.all_finished() {
        let ok = matches!(
            t.send_recipe(&at.probe, PROMPT).await,
            Ok(reply) if reply.status == at.probe.status
        );
        healthz.push(ok);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    healthz
}

/// Requires the connection `label` to be closed at the head timeout (not more than `early`
/// before, not more than `late` after); returns the note for the observation.
fn judge_close(
    c: &mut Ctx,
    label: &str,
    closed: Closed,
    head: Duration,
    (early, late): (Duration, Duration),
    give_up: Duration,
) -> String {
    match closed {
        Ok(Some(after)) => {
            c.trials_ms.push(ms(after));
            c.sample("close after the head timeout", ms(after) - ms(head));
            c.require(after + early >= head, || {
                format!(
                    "{label} was closed after {:.0} ms, before the {} ms head timeout",
                    ms(after),
                    head.as_millis()
                )
            });
            c.require(after <= head + late, || {
                format!(
                    "{label} was closed after {:.0} ms, more than {} ms after the {} ms head timeout",
                    ms(after),
                    late.as_millis(),
                    head.as_millis()
                )
            });
            format!("closed after {:.0} ms", ms(after))
        }
        Ok(None) => {
            c.fail(format!(
                "{label} was still open {} ms later (head timeout {} ms): nothing closes it",
                give_up.as_millis(),
                head.as_millis()
            ));
            "never closed".into()
        }
        Err(e) => {
            c.fail(format!("{label}: {e}"));
            "error".into()
        }
    }
}

/// Opens a connection, sends `first` (if any) and waits for the server to close it: the time
/// from the connect to the close, or `None` if it is still open after `give_up`.
async fn closed_after(addr: SocketAddr, first: Option<Vec<u8>>, give_up: Duration) -> Closed {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(ProbeError::Connect)?;
    let opened = Instant::now();
    if let Some(bytes) = first {
        stream.write_all(&bytes).await.map_err(ProbeError::Send)?;
    }
    let mut buf = [0u8; 4096];
    let closed = async {
        loop {
            match stream.read(&mut buf).await {
                // Some servers answer a stalled head with 408 before closing: still a close.
                Ok(n) if n > 0 => continue,
                _ => return opened.elapsed(),
            }
        }
    };
    Ok(tokio::time::timeout(give_up, closed).await.ok())
}

/// Asks the health path once on a keep-alive connection, then waits for the server to close it:
/// the time from the answer's end to the close.
async fn idle_closed_after(at: Endpoint, give_up: Duration) -> Closed {
    let mut held = open(at.addr).await?;
    match ask(&mut held.sender, &at).await {
        Asked::Answered(status) if status == at.probe.status => {}
        Asked::Answered(status) => {
            return Err(ProbeError::Status {
                path: at.asked(),
                status,
            });
        }
        Asked::Closed => return Err(ProbeError::Closed(at.asked())),
        Asked::Stalled => return Err(ProbeError::Stalled(at.asked())),
    }
    let answered = Instant::now();
    Ok(tokio::time::timeout(give_up, &mut held.closed)
        .await
        .ok()
        .map(|_| answered.elapsed()))
}

/// One open client connection: its request handle and the task that ends when it closes.
struct Held {
    sender: SendRequest<Full<Bytes>>,
    closed: JoinHandle<()>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.closed.abort();
    }
}

async fn open(addr: SocketAddr) -> Result<Held, ProbeError> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(ProbeError::Connect)?;
    let (sender, conn) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(ProbeError::Handshake)?;
    let closed = tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(Held { sender, closed })
}

enum Asked {
    Answered(u16),
    /// The connection closed before any answer.
    Closed,
    /// Neither answered nor closed within [`PROMPT`].
    Stalled,
}

/// Asks the probe request on `sender`'s connection, reading its answer to the end (within the
/// checker's reply cap) so the connection is idle, not mid-answer.
async fn ask(sender: &mut SendRequest<Full<Bytes>>, at: &Endpoint) -> Asked {
    match tokio::time::timeout(PROMPT, connection::send(sender, &at.probe, &at.host)).await {
        Ok(Ok((status, ..))) => Asked::Answered(status),
        Ok(Err(_)) => Asked::Closed,
        Err(_) => Asked::Stalled,
    }
}

/// Fills the cap in waves; the next must be closed unanswered, the open ones
/// still served, and a freed place served again.
async fn connection_cap(c: &mut Ctx, at: &Endpoint, room: Room, head: Duration) -> String {
    let cap = room.cap;
    let Filled {
        mut held,
        refused_at,
        took: filled,
    } = match fill(c, at, room, head).await {
        Ok(filled) => filled,
        Err(ended) => return ended.to_string(),
    };
    if filled + FILL_MARGIN >= head {
        c.fail(format!(
            "filling {cap} connections took {:.0} ms, near the {} ms head timeout: the cap cannot be told from the timeout",
            ms(filled),
            head.as_millis()
        ));
    }
    let still_served = still_served(&mut held, at).await;
    c.require(still_served, || {
        format!(
            "at the cap, {} on an open connection was not answered {}",
            at.asked(),
            at.probe.status
        )
    });
    let served_again = served_again(&mut held, at).await;
    c.require(served_again.is_some(), || {
        format!(
            "after one of {cap} connections closed, no new connection was served within {} ms",
            PROMPT.as_millis()
        )
    });
    drop(held);
    let room = WAVE.min(cap);
    let freed = places_freed(at, room).await;
    c.require(freed.is_some(), || {
        format!(
            "after the cap's connections closed, {room} fresh connections at once were not all \
             served within {} ms: the closed connections' places were not freed",
            (PROMPT * 2).as_millis()
        )
    });
    format!(
        "connection {refused_at} closed unanswered after {cap} filled in {:.0} ms; open ones served: {}; freed place served again {}; {room} at once served {}",
        ms(filled),
        if still_served { "yes" } else { "no" },
        served_again.map_or("never".to_owned(), |d| format!("after {:.0} ms", ms(d))),
        freed.map_or("never".to_owned(), |d| format!("after {:.0} ms", ms(d)))
    )
}

/// The cap, and how many of the checker's own idle connections (the head-timeout probes) the
/// server never closed: those still hold places of the cap.
#[derive(Clone, Copy)]
struct Room {
    cap: usize,
    left_open: usize,
}

impl Room {
    /// `who` ("connection 512 was") closed unanswered with `open_now` of the fill's open: a
    /// fault of the cap, unless the checker's probes the server never closed fill the gap, which
    /// is the head timeout's fault.
    fn below_cap(self, who: String, open_now: usize) -> String {
        let cap = self.cap;
        if self.left_open > 0 && open_now + self.left_open >= cap {
            format!(
                "{who} closed unanswered with {open_now} of the fill open: the missing places of the cap of {cap} are held by the {} idle connection(s) the head-timeout probe left open, which the server never closed (a fault of the head timeout above, not of the cap)",
                self.left_open
            )
        } else {
            format!("{who} closed unanswered with only {open_now} open, below the cap of {cap}")
        }
    }

    /// `who` was closed unanswered with only `open_now` open: a place held by a connection
    /// closed just before may take a moment to free, so the fill goes on until `retry_until`
    /// (set at the first such close), then fails, blaming the cap or the head timeout.
    async fn closed_below_cap(
        self,
        c: &mut Ctx,
        who: String,
        open_now: usize,
        retry_until: &mut Option<Instant>,
    ) -> Step {
        let until = *retry_until.get_or_insert_with(|| Instant::now() + PROMPT);
        if Instant::now() >= until {
            c.fail(self.below_cap(who, open_now));
            return Step::Ended(Unfilled::RefusedBelowCap(open_now + 1));
        }
        tokio::time::sleep(RETRY_EVERY).await;
        Step::Next
    }
}

/// The cap filled: the connections held open, the number of the one closed unanswered past
/// them, and how long filling took.
struct Filled {
    held: Vec<Held>,
    refused_at: usize,
    took: Duration,
}

/// Why the fill ended before the cap refused a connection; its message is the observation (the
/// failure is recorded where the fill ended).
#[derive(Debug, thiserror::Error)]
enum Unfilled {
    /// Connections closed faster than the checker opened them.
    #[error("only {open} of {cap} connections stayed open within the head timeout")]
    Closing {
        /// The connections open when the head timeout passed.
        open: usize,
        /// The cap.
        cap: usize,
    },
    /// Connection `0` could not be opened.
    #[error("could not open connection {0}")]
    CannotOpen(usize),
    /// `0` connections were served at once, more than the cap.
    #[error("{0} connections served at once")]
    Uncapped(usize),
    /// Connection `0` was neither answered nor closed.
    #[error("connection {0} left waiting")]
    LeftWaiting(usize),
    /// Connection `0` was closed unanswered below the cap.
    #[error("refused at connection {0}")]
    RefusedBelowCap(usize),
}

/// Fills the cap, then opens one more: each connection asks the health path once and is kept open,
/// until one past the cap is closed unanswered. The missing connections are opened in waves,
/// so a slow path (a latency fault, a far client) costs one round trip per wave rather than
/// one per connection. `Err` is the observation when the fill ended otherwise (its failure already
/// recorded).
async fn fill(c: &mut Ctx, at: &Endpoint, room: Room, head: Duration) -> Result<Filled, Unfilled> {
    let cap = room.cap;
    let mut held: Vec<Held> = Vec::with_capacity(cap);
    let started = Instant::now();
    let mut retry_until: Option<Instant> = None;
    let refused_at = loop {
        // Only open connections count, and only they are kept: a server that closes each
        // connection after its answer (no keep-alive) must not make the checker hold one handle
        // per connection it ever opened.
        held.retain(|h| !h.closed.is_finished());
        // The cap can only be told from the head timeout if it is filled within it (judged
        // by the caller); a server whose connections close faster than they are opened (no
        // keep-alive, or a head timer shorter than the fill) never reaches the cap, so the fill
        // ends here.
        if started.elapsed() >= head {
            let open_now = held.len();
            c.fail(format!(
                "after {} ms (the head timeout) only {open_now} of {cap} connections stayed open: the server closes them (its head timer, or no keep-alive) faster than the checker opens them, so the cap cannot be judged",
                head.as_millis()
            ));
            return Err(Unfilled::Closing {
                open: open_now,
                cap,
            });
        }
        let step = if held.len() < cap {
            side_by_side(c, at, room, &mut held, &mut retry_until).await
        } else {
            one_more(c, at, room, &mut held, &mut retry_until).await
        };
        match step {
            Step::Next => {}
            Step::Refused(at) => break at,
            Step::Ended(note) => return Err(note),
        }
    };
    Ok(Filled {
        held,
        refused_at,
        took: started.elapsed(),
    })
}

/// What one connection opened to fill the cap showed: the connection (when it opened) and
/// how its health request went.
type Opened = (Result<Held, ProbeError>, Asked);

/// Opens one connection and asks the health path on it.
async fn open_and_ask(at: Endpoint) -> Opened {
    match open(at.addr).await {
        Ok(mut next) => {
            let asked = ask(&mut next.sender, &at).await;
            (Ok(next), asked)
        }
        Err(e) => (Err(e), Asked::Closed),
    }
}

/// Opens the connections missing below the cap, up to [`WAVE`] at once; the served ones are kept
/// in `held`.
/// One closed unanswered below the cap is retried until `retry_until` (set at the first such
/// close: a place held by a connection closed just before may take a moment to free).
async fn side_by_side(
    c: &mut Ctx,
    at: &Endpoint,
    room: Room,
    held: &mut Vec<Held>,
    retry_until: &mut Option<Instant>,
) -> Step {
    let missing = (room.cap - held.len()).min(WAVE);
    let tasks: Vec<JoinHandle<Opened>> = (0..missing)
        .map(|_| tokio::spawn(open_and_ask(at.clone())))
        .collect();
    let mut refused = 0usize;
    let mut first_error = None;
    for task in tasks {
        match task.await {
            Ok((Ok(next), Asked::Answered(_))) => held.push(next),
            Ok((Ok(_), Asked::Closed)) => refused += 1,
            Ok((Ok(_), Asked::Stalled)) => {
                c.fail(format!(
                    "a connection opened with {} open was neither answered nor closed within {} ms: left waiting instead of closed",
                    held.len(),
                    PROMPT.as_millis()
                ));
                return Step::Ended(Unfilled::LeftWaiting(held.len() + 1));
            }
            Ok((Err(e), _)) => first_error = first_error.or(Some(e)),
            Err(e) => first_error = first_error.or(Some(ProbeError::Panicked(e))),
        }
    }
    if let Some(e) = first_error {
        c.fail(format!("a connection opened with {} open: {e}", held.len()));
        return Step::Ended(Unfilled::CannotOpen(held.len() + 1));
    }
    if refused == 0 {
        return Step::Next;
    }
    let open_now = held.iter().filter(|h| !h.closed.is_finished()).count();
    room.closed_below_cap(
        c,
        format!("{refused} connection(s) were"),
        open_now,
        retry_until,
    )
    .await
}

/// What one more connection showed while filling the cap.
enum Step {
    /// Served and kept open, or closed below the cap while a place may still be freeing: go on.
    Next,
    /// Closed unanswered with the cap open: the number of that connection.
    Refused(usize),
    /// The fill cannot go on (its failure already recorded).
    Ended(Unfilled),
}

/// Opens one more connection and asks the health path on it: kept in `held` when served below the
/// cap; closed below the cap, it is retried until `retry_until` (set at the first such close).
async fn one_more(
    c: &mut Ctx,
    at: &Endpoint,
    room: Room,
    held: &mut Vec<Held>,
    retry_until: &mut Option<Instant>,
) -> Step {
    let cap = room.cap;
    let alive = |held: &[Held]| held.iter().filter(|h| !h.closed.is_finished()).count();
    let mut next = match open(at.addr).await {
        Ok(next) => next,
        Err(e) => {
            c.fail(format!(
                "connection {} (with {} open): {e}",
                held.len() + 1,
                alive(held)
            ));
            return Step::Ended(Unfilled::CannotOpen(held.len() + 1));
        }
    };
    match ask(&mut next.sender, at).await {
        Asked::Answered(_) if alive(held) >= cap => {
            // A close of ours still in flight would make this one legitimate: look again.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let open_now = alive(held);
            if open_now >= cap {
                c.fail(format!(
                    "connection {} was served with {open_now} already open: the cap of {cap} connections is not enforced",
                    open_now + 1
                ));
                return Step::Ended(Unfilled::Uncapped(open_now + 1));
            }
            held.push(next);
        }
        Asked::Answered(_) => held.push(next),
        Asked::Stalled => {
            let open_now = alive(held);
            c.fail(format!(
                "connection {} (with {open_now} open) was neither answered nor closed within {} ms: left waiting instead of closed",
                open_now + 1,
                PROMPT.as_millis()
            ));
            return Step::Ended(Unfilled::LeftWaiting(open_now + 1));
        }
        Asked::Closed => {
            let open_now = alive(held);
            if open_now >= cap {
                return Step::Refused(open_now + 1);
            }
            let who = format!("connection {} was", open_now + 1);
            return room.closed_below_cap(c, who, open_now, retry_until).await;
        }
    }
    Step::Next
}

/// Whether, at the cap, a request on the first connection still open is answered with the
/// probe's status.
async fn still_served(held: &mut [Held], at: &Endpoint) -> bool {
    match held.iter_mut().find(|h| !h.closed.is_finished()) {
        Some(h) => {
            matches!(ask(&mut h.sender, at).await, Asked::Answered(s) if s == at.probe.status)
        }
        None => false,
    }
}

/// Once the cap's connections are closed, opens `n` fresh connections at once until all are
/// served (a close takes a moment to reach the server, and the next check needs the places
/// free): how long after the closes, or `None` if not within twice [`PROMPT`].
async fn places_freed(at: &Endpoint, n: usize) -> Option<Duration> {
    let closed = Instant::now();
    loop {
        let tasks: Vec<JoinHandle<Opened>> = (0..n)
            .map(|_| tokio::spawn(open_and_ask(at.clone())))
            .collect();
        let mut served = 0;
        for task in tasks {
            if let Ok((Ok(_), Asked::Answered(status))) = task.await
                && status == at.probe.status
            {
                served += 1;
            }
        }
        if served == n {
            return Some(closed.elapsed());
        }
        if closed.elapsed() >= PROMPT * 2 {
            return None;
        }
        tokio::time::sleep(RETRY_EVERY).await;
    }
}

/// Closes one open connection, then opens new ones until one is served (kept in `held`): how
/// long after the close, or `None` if none was within [`PROMPT`].
async fn served_again(held: &mut Vec<Held>, at: &Endpoint) -> Option<Duration> {
    held.retain(|h| !h.closed.is_finished());
    held.pop();
    let freed = Instant::now();
    loop {
        if let Ok(mut next) = open(at.addr).await
            && let Asked::Answered(status) = ask(&mut next.sender, at).await
            && status == at.probe.status
        {
            held.push(next);
            return Some(freed.elapsed());
        }
        if freed.elapsed() >= PROMPT {
            return None;
        }
        tokio::time::sleep(RETRY_EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Verdict;

    #[test]
    fn a_place_held_by_a_probe_the_server_never_closed_blames_the_head_timeout() {
        let blamed = Room {
            cap: 512,
            left_open: 1,
        }
        .below_cap("connection 512 was".into(), 511);
        assert!(blamed.contains("head-timeout probe left open"), "{blamed}");
        assert!(blamed.contains("not of the cap"), "{blamed}");
        let cap = Room {
            cap: 512,
            left_open: 1,
        }
        .below_cap("connection 300 was".into(), 299);
        assert_eq!(
            cap,
            "connection 300 was closed unanswered with only 299 open, below the cap of 512"
        );
    }

    /// A target without keep-alive: it answers every request and closes the connection, as
    /// Python's `http.server` and HTTP/1.0 stacks do.
    async fn closes_after_each_answer() -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    let _ = stream.read(&mut buf).await;
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        )
                        .await;
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn the_cap_scan_ends_against_a_target_without_keep_alive() {
        let addr = closes_after_each_answer().await;
        let head = Duration::from_millis(800);
        let mut c = Ctx::new(0.0);
        let started = Instant::now();
        let note = tokio::time::timeout(
            Duration::from_secs(10),
            connection_cap(
                &mut c,
                &Endpoint {
                    addr,
                    host: "127.0.0.1".into(),
                    probe: Recipe::get("/healthz"),
                    partial_head: b"POST /v1/digitize HTTP/1.1\r\n".to_vec(),
                },
                Room {
                    cap: 512,
                    left_open: 0,
                },
                head,
            ),
        )
        .await
        .expect("the scan ends by itself");
        let took = started.elapsed();
        assert!(took < head + PROMPT, "took {took:?}");
        assert!(note.contains("stayed open"), "{note}");
        match c.verdict() {
            Verdict::Fail(why) => assert!(why.contains("cannot be judged"), "{why}"),
            other => panic!("expected a failure, got {other:?}"),
        }
    }
}
