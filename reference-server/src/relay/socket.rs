//! The relay's WebSocket as the bridge uses it, whichever end dialled: a stream of
//! [`Incoming`] messages and a sink of [`Outgoing`] ones. The relay endpoint (`GET /v1/relay`,
//! axum's socket) and the bridge that dials its relay (tokio-tungstenite's client) both become a
//! [`Socket`], so the receive loop, the workers and the frame writer are one code path.

use std::pin::Pin;

use futures_util::{Sink, SinkExt, Stream, StreamExt, future};

/// The socket is gone: the message was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gone;

/// A message read from the relay, reduced to what the bridge tells apart.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// A text message: an envelope, or something to answer with a `relay-error`.
    Text(String),
    /// A binary message (never an envelope).
    Binary,
    /// Ping or pong: the WebSocket library answers pings itself.
    Control,
    /// The relay closed the socket, or it failed.
    End(Ending),
}

/// How a socket ended, as its reader saw it: a bridge that dials its relay dials again either
/// way (R6), but a reset is the way a relay that vanished ends one, so the two are told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// A close frame, the end of the stream (a FIN), or a failure other than a reset.
    Closed,
    /// The connection was reset (an RST).
    Reset,
}

impl Ending {
    /// How a read that failed with `error` ended the socket: a reset anywhere in its sources
    /// (the WebSocket libraries wrap the I/O error) is a reset.
    fn of(error: &(dyn std::error::Error + 'static)) -> Ending {
        let mut cause = Some(error);
        while let Some(e) = cause {
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionReset)
            {
                return Ending::Reset;
            }
            cause = e.source();
        }
        Ending::Closed
    }
}

/// A message the bridge writes.
#[derive(Debug)]
pub enum Outgoing {
    /// One frame, as JSON text.
    Text(String),
    /// Goodbye (the bridge is stopping).
    Close,
}

/// Where the bridge writes.
pub(crate) type OutgoingSink = Pin<Box<dyn Sink<Outgoing, Error = Gone> + Send>>;
/// What the bridge reads.
pub(crate) type IncomingStream = Pin<Box<dyn Stream<Item = Incoming> + Send>>;

/// One relay socket, split.
pub(crate) struct Socket {
    pub sink: OutgoingSink,
    pub stream: IncomingStream,
}

impl Socket {
    /// The relay endpoint's socket (the relay dialled the server).
    pub(crate) fn accepted(ws: axum::extract::ws::WebSocket) -> Socket {
        use axum::extract::ws::Message;
        let (sink, stream) = ws.split();
        let sink = sink
            .with(|out: Outgoing| {
                future::ready(Ok::<_, axum::Error>(match out {
                    Outgoing::Text(text) => Message::Text(text.into()),
                    Outgoing::Close => Message::Close(None),
                }))
            })
            .sink_map_err(|_| Gone);
        let stream = stream.map(|message| match message {
            Ok(Message::Text(text)) => Incoming::Text(text.as_str().to_owned()),
            Ok(Message::Binary(_)) => Incoming::Binary,
            Ok(Message::Ping(_) | Message::Pong(_)) => Incoming::Control,
            Ok(Message::Close(_)) => Incoming::End(Ending::Closed),
            Err(e) => Incoming::End(Ending::of(&e)),
        });
        Socket {
            sink: Box::pin(sink),
            stream: Box::pin(stream),
        }
    }

    /// The socket of a bridge that dialled its relay (seed 003's direction).
    pub(crate) fn dialled<S>(ws: tokio_tungstenite::WebSocketStream<S>) -> Socket
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        use tokio_tungstenite::tungstenite::Message;
        let (sink, stream) = ws.split();
        let sink = sink
            .with(|out: Outgoing| {
                future::ready(Ok::<_, tokio_tungstenite::tungstenite::Error>(match out {
                    Outgoing::Text(text) => Message::Text(text.into()),
                    Outgoing::Close => Message::Close(None),
                }))
            })
            .sink_map_err(|_| Gone);
        let stream = stream.map(|message| match message {
            Ok(Message::Text(text)) => Incoming::Text(text.as_str().to_owned()),
            Ok(Message::Binary(_)) => Incoming::Binary,
            Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => Incoming::Control,
            Ok(Message::Close(_)) => Incoming::End(Ending::Closed),
            Err(e) => Incoming::End(Ending::of(&e)),
        });
        Socket {
            sink: Box::pin(sink),
            stream: Box::pin(stream),
        }
    }
}
