//! The relay protocol (seed 003) as the server speaks it, with no server state: request envelopes
//! parsed into HTTP requests ([`envelope`]), HTTP responses cut into `relay-http-response` frames
//! ([`frames`]), an envelope's hook header
//! ([`hooks`], R1), the socket whichever end dialled ([`socket`]), its one writer ([`writer`], R5)
//! how an envelope's job is run ([`dispatch`], R2), when a dialling bridge dials again
//! ([`redial`], R6) and how long its work may run once the server stops ([`stop`], R6). The endpoint that puts them to work on the relay pool is
//! [`crate::bridge`].

pub(crate) mod dispatch;
pub(crate) mod envelope;
pub(crate) mod frames;
pub(crate) mod hooks;
pub(crate) mod redial;
pub(crate) mod socket;
pub(crate) mod stop;
pub(crate) mod writer;
