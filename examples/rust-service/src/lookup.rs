//! `GET /lookup`: a request served by calling a dependency, the service's `LOOKUP_URL`. The
//! worker is held for as long as the dependency takes to answer — which is how the checker,
//! playing that dependency, holds one without any hook in the service. A client that goes away
//! ends its request's call: the handler is dropped, and the call with it. The answer is spooled
//! to a temporary file in the service's temp folder (`TEMP_DIR`), removed when the lookup ends,
//! however it ends: answered, failed, cut by its deadline or left by its client.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use crate::admission::Pool;

/// The most of a dependency's answer the service reads: a lookup's answer is small, and a
/// dependency that sends more cannot grow the service's memory.
const MAX_ANSWER: usize = 64 * 1024;

/// How a lookup calls its dependency: as it should, or one of the broken ways the variants
/// use, each of which some clause must catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Calling {
    /// The handler awaits the call: a client that goes away ends it.
    #[default]
    Awaited,
    /// No call: every lookup is answered at once from a cache of the service's own (nothing
    /// holds a worker: T1).
    Cached,
    /// The call runs on a task of its own, which goes on when the client goes away: work
    /// nobody is waiting for (B3).
    Detached,
    /// The call is given up after this long and the lookup answered from the cache: a request
    /// whose work ends on its own, which a disconnect shortly after its call seems to stop
    /// (B3 must see it end before the client left, at a later leave).
    GivesUpAfter(Duration),
    /// No call: every lookup is answered `502` at once, as a failed call is, a failure made up
    /// without the dependency (F1 must see no call).
    FailsUncalled,
}

/// What a lookup whose call failed answers: as it should, or a broken variant's way, which
/// F1 must catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnFailure {
    /// `502` with a line of text saying the lookup failed.
    #[default]
    BadGateway,
    /// The cached answer, `200`, as if the lookup had succeeded: the failure hidden.
    Cached,
    /// `502` as contracted, but a worker of the pool taken for good: a failure path that never
    /// gives its worker back.
    LosesWorker,
}

/// Where a lookup goes: the dependency's base URL, if the service was given one, and where
/// its answer is spooled.
#[derive(Clone)]
pub(crate) struct Lookup {
    client: reqwest::Client,
    url: Option<String>,
    calling: Calling,
    on_failure: OnFailure,
    spool: Spool,
    /// The pool the lookups run in (a worker of which [`OnFailure::LosesWorker`] loses).
    pool: Pool,
}

impl Lookup {
    pub(crate) fn new(
        url: Option<String>,
        (calling, on_failure): (Calling, OnFailure),
        spool: Spool,
        pool: Pool,
    ) -> Lookup {
        Lookup {
            client: reqwest::Client::new(),
            url: url.map(|u| u.trim_end_matches('/').to_owned()),
            calling,
            on_failure,
            spool,
            pool,
        }
    }
}

/// The temp folder a lookup's answer is spooled in, and which files are kept (a broken
/// variant's leak, which F1 or B3 must catch).
#[derive(Debug, Clone)]
pub(crate) struct Spool {
    /// The folder (the service's `TEMP_DIR`, else the system's).
    pub(crate) dir: std::path::PathBuf,
    /// Which lookups' files are left behind.
    pub(crate) leak: TempLeak,
}

/// Which lookups leave their spooled file behind: none, unless a variant breaks the contract's
/// `[temp_files]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TempLeak {
    /// None: every file is removed when its lookup ends, however it ends.
    Never,
    /// A lookup whose call failed (F1 must catch it).
    OnFailure,
    /// A lookup dropped mid-call, its client gone (B3 must catch it).
    OnDisconnect,
}

/// A lookup answered without the dependency.
const CACHED: &str = "found (cached)\n";

/// Answers a lookup with what the dependency answered at `/entries`: `200` and its size, or
/// `502` when it failed or none is configured.
pub(crate) async fn lookup(State(lookup): State<Lookup>) -> Response {
    match lookup.calling {
        Calling::Cached => return CACHED.into_response(),
        Calling::FailsUncalled => {
            return (StatusCode::BAD_GATEWAY, "lookup failed: not called\n").into_response();
        }
        _ => {}
    }
    let Some(url) = &lookup.url else {
        return (StatusCode::BAD_GATEWAY, "no LOOKUP_URL configured\n").into_response();
    };
    let call = fetch(
        lookup.client.clone(),
        format!("{url}/entries"),
        lookup.spool.clone(),
    );
    let answer = match lookup.calling {
        Calling::Detached => tokio::spawn(call)
            .await
            .unwrap_or_else(|e| Err(e.to_string())),
        Calling::GivesUpAfter(patience) => match tokio::time::timeout(patience, call).await {
            Ok(answer) => answer,
            Err(_) => return CACHED.into_response(),
        },
        // Cached and FailsUncalled returned above.
        Calling::Awaited | Calling::Cached | Calling::FailsUncalled => call.await,
    };
    match (answer, lookup.on_failure) {
        (Ok(n), _) => format!("found ({n} bytes)\n").into_response(),
        (Err(e), on_failure @ (OnFailure::BadGateway | OnFailure::LosesWorker)) => {
            if on_failure == OnFailure::LosesWorker {
                lookup.pool.lose_worker();
            }
            (StatusCode::BAD_GATEWAY, format!("lookup failed: {e}\n")).into_response()
        }
        (Err(_), OnFailure::Cached) => CACHED.into_response(),
    }
}

/// B1: a lookup not answered `deadline` after it reached the pool (its wait for a worker
/// included: this sits outside the pool's admission) is answered `504`; its call, and its worker
/// or its place, are dropped with it. None: a lookup takes as long as its dependency does.
pub(crate) async fn deadline(
    State(deadline): State<Option<Duration>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(deadline) = deadline else {
        return next.run(request).await;
    };
    match tokio::time::timeout(deadline, next.run(request)).await {
        Ok(response) => response,
        Err(_) => (StatusCode::GATEWAY_TIMEOUT, "lookup timed out\n").into_response(),
    }
}

/// Spools the dependency's answer, at most [`MAX_ANSWER`] bytes of it, to a temporary file
/// removed when this ends (however it ends: its future dropped too); the answer's length.
async fn fetch(client: reqwest::Client, url: String, spool: Spool) -> Result<usize, String> {
    let mut file = tempfile::NamedTempFile::new_in(&spool.dir).map_err(|e| e.to_string())?;
    if spool.leak == TempLeak::OnDisconnect {
        // Removed by hand once the call ends: a lookup dropped mid-call never gets there.
        let (mut kept, path) = file.keep().map_err(|e| e.to_string())?;
        let read = spooled(&client, &url, &mut kept).await;
        let _ = std::fs::remove_file(path);
        return read;
    }
    let read = spooled(&client, &url, file.as_file_mut()).await;
    if read.is_err() && spool.leak == TempLeak::OnFailure {
        let _ = file.keep();
    }
    read
}

/// Reads the dependency's answer into `file`: its length.
async fn spooled(
    client: &reqwest::Client,
    url: &str,
    file: &mut std::fs::File,
) -> Result<usize, String> {
    use std::io::Write as _;
    let mut response = client.get(url).send().await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("the dependency answered {}", response.status()));
    }
    let mut n = 0;
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        n += chunk.len();
        file.write_all(&chunk).map_err(|e| e.to_string())?;
        if n > MAX_ANSWER {
            return Err(format!(
                "the dependency's answer exceeds {MAX_ANSWER} bytes"
            ));
        }
    }
    Ok(n)
}
