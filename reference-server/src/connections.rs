//! Connection bounds (B4), the seam: how long a request head may take and how many connections
//! are served at once. The accept loop that enforces them is [`crate::accept`].

use std::fmt::Debug;
use std::time::Duration;

use plimsoll_spec::model::Connections;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// The bytes of one accepted connection, as hyper serves them.
pub trait ConnectionIo: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> ConnectionIo for T {}

/// The connection bounds a server enforces.
pub trait ConnectionPolicy: Debug + Send + Sync {
    /// How long a request head may take (`None`: for ever).
    fn head_timeout(&self, contract: &Connections) -> Option<Duration>;
    /// How many connections are served at once (`None`: no limit).
    fn max_connections(&self, contract: &Connections) -> Option<usize>;

    /// The accepted socket as the server reads and writes it: the socket itself. (A seam so a
    /// broken variant can put its own timer or its own reading of a reset between the two.)
    fn io(&self, stream: TcpStream, _contract: &Connections) -> Box<dyn ConnectionIo> {
        Box::new(stream)
    }
}

/// The contract's bounds.
#[derive(Debug)]
pub(crate) struct ContractConnections;

impl ConnectionPolicy for ContractConnections {
    // clause: B4 — a head within `head_timeout_ms` of opening or of the last response, at most
    // `max_connections` connections
    fn head_timeout(&self, contract: &Connections) -> Option<Duration> {
        Some(Duration::from_millis(contract.head_timeout_ms))
    }

    fn max_connections(&self, contract: &Connections) -> Option<usize> {
        contract.max_connections.map(|n| n as usize)
    }
}
