//! The checker as a service's dependency (a pool's `hold.dependency`): the service calls it
//! while it serves a request, and the checker answers each call as late as the held requests in
//! flight ask, so a worker is held without a hook or anything else in the service knowing of
//! Plimsoll. The server is the bridge checks' upstream ([`Upstream::dependency`]); every call is
//! a visit on the checker's clock, so the checks also see, from this end, how many of the
//! pool's requests ran at once.
//!
//! A call carries nothing of the checker's (the service sends what it sends), so the hold cannot
//! be chosen per request: each call is held for the longest hold of the held requests the
//! checker has in flight when it arrives ([`HoldBook`]). A request held longer than it asked is
//! still held at least as long, which is all a check needs of it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::model::DependencyHold;

pub use super::upstream::{FailTicket, HoldBook, HoldTicket};
use super::upstream::{Upstream, Visit};

/// A dependency the checker plays: listening where the contract says, holding calls by its
/// book.
pub struct Dependency {
    /// What the contract declares of it.
    pub declared: DependencyHold,
    book: Arc<HoldBook>,
    server: Upstream,
}

impl Dependency {
    /// Opens a hold of `hold` for the calls that arrive while the ticket lives.
    pub fn hold(&self, hold: Duration) -> HoldTicket {
        self.book.hold(hold)
    }

    /// Fails every call, at once with `500`, while the ticket lives (F1 provoking a pool's
    /// failure).
    pub fn fail(&self) -> FailTicket {
        self.book.fail()
    }

    /// The service's calls that arrived at or after `origin`, in arrival order.
    pub fn calls_since(&self, origin: Instant) -> Vec<Visit> {
        self.server.visits_since(origin)
    }

    /// Waits until the number of the service's calls in flight satisfies `ok`, at most
    /// `limit`; how long it took.
    pub async fn wait_calls(
        &self,
        limit: Duration,
        ok: impl Fn(usize) -> bool,
    ) -> Result<Duration, super::WaitError> {
        self.server.wait_in_flight(limit, ok).await
    }

    /// `LOOKUP_URL at 127.0.0.1:18093`, for messages.
    pub fn name(&self) -> String {
        format!("{} at {}", self.declared.env, self.declared.listen)
    }
}

/// Why the checker cannot play a declared dependency.
#[derive(Debug, thiserror::Error)]
#[error(
    "the checker cannot play the dependency {env} at {listen}: {reason} (the contract's \
     `hold.dependency.listen` must be an address the checker can listen on)"
)]
pub struct DependencyError {
    /// The variable the service reads its URL from.
    pub env: String,
    /// Where the checker tried to listen.
    pub listen: String,
    /// Why it could not.
    pub reason: String,
}

/// The dependencies of a run, each bound on first use and kept for the run: the service was
/// started pointing at them, so they stay where it calls.
#[derive(Default)]
pub struct Dependencies {
    bound: tokio::sync::Mutex<BTreeMap<String, Arc<Dependency>>>,
}

impl Dependencies {
    /// The dependency `declared` names, listening (bound now if it was not yet).
    pub async fn get(&self, declared: &DependencyHold) -> Result<Arc<Dependency>, DependencyError> {
        let mut bound = self.bound.lock().await;
        if let Some(d) = bound.get(&declared.listen) {
            return Ok(d.clone());
        }
        let failed = |reason: String| DependencyError {
            env: declared.env.clone(),
            listen: declared.listen.clone(),
            reason,
        };
        let addr: SocketAddr = declared
            .listen
            .parse()
            .map_err(|e| failed(format!("{e}")))?;
        let book = Arc::new(HoldBook::default());
        let server = Upstream::dependency(addr, book.clone())
            .await
            .map_err(|e| failed(e.to_string()))?;
        let d = Arc::new(Dependency {
            declared: declared.clone(),
            book,
            server,
        });
        bound.insert(declared.listen.clone(), d.clone());
        Ok(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_held_for_the_longest_hold_open() {
        let book = Arc::new(HoldBook::default());
        assert_eq!(book.longest(), Duration::ZERO);
        let short = book.hold(Duration::from_millis(100));
        let long = book.hold(Duration::from_millis(400));
        let again = book.hold(Duration::from_millis(400));
        assert_eq!(book.longest(), Duration::from_millis(400));
        drop(long);
        assert_eq!(book.longest(), Duration::from_millis(400));
        drop(again);
        assert_eq!(book.longest(), Duration::from_millis(100));
        drop(short);
        assert_eq!(book.longest(), Duration::ZERO);
    }

    /// A service's call on a path of its own is held while a hold is open, answered at once
    /// when none is, and recorded; a second declaration of the same address is the same server.
    #[tokio::test]
    async fn the_dependency_holds_the_services_calls_while_a_hold_is_open() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let listen = free.local_addr().unwrap().to_string();
        drop(free);
        let declared = DependencyHold {
            env: "LOOKUP_URL".into(),
            listen,
        };
        let deps = Dependencies::default();
        let d = deps.get(&declared).await.unwrap();
        assert!(Arc::ptr_eq(&d, &deps.get(&declared).await.unwrap()));
        let client = reqwest::Client::new();
        let url = format!("{}/entries?id=7", declared.url());
        let origin = Instant::now();
        let at_once = client.get(&url).send().await.unwrap();
        assert_eq!(at_once.status(), 200);
        // Well under the hold below, whatever the machine: a first call on a new connection on
        // a crowded machine can take a good part of 150 ms.
        let hold = Duration::from_millis(1500);
        assert!(origin.elapsed() < hold / 2, "{:?}", origin.elapsed());
        let ticket = d.hold(hold);
        let started = Instant::now();
        let held = client.get(&url).send().await.unwrap();
        assert_eq!(held.status(), 200);
        assert!(started.elapsed() >= hold);
        drop(ticket);
        assert_eq!(d.calls_since(origin).len(), 2);
    }
}
