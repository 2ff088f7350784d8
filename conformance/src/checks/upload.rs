//! Another service's `[upload]`: the request its bodies go to, grown to the size a trial needs
//! (the recipe's body followed by spaces, trailing whitespace that JSON and text ignore), sent
//! with a `Content-Length` or chunked, whole or stalled after a prefix. F2 sends bodies at and
//! over the largest size; B1 stalls one. The bytes are streamed: a gigabyte's limit costs the
//! checker a piece of a megabyte at a time, never the body in memory.

use std::time::Duration;

use futures_util::{Stream, StreamExt as _};
use hyper::body::Bytes;
use plimsoll_spec::Contract;
use plimsoll_spec::model::{Recipe, Refusal, Upload};
use reqwest::header::CONTENT_LENGTH;

use crate::remote::{RequestError, Target};

/// The pieces a grown body is streamed in.
const PIECE: u64 = 1 << 20;

/// Another service's declared uploads: the section, its request and the answers it names.
pub(crate) struct Uploads<'c> {
    /// The section as declared.
    pub upload: &'c Upload,
    /// The request the bodies go to.
    pub request: &'c Recipe,
    /// What a body over the largest size gets, with that size; none when no size is declared.
    pub too_large: Option<(u64, &'c Refusal)>,
    /// What a stalled body gets; none: its connection closed unanswered.
    pub stalled: Option<&'c Refusal>,
}

/// The contract's `[upload]` when it is another service's (the reference's uploads are judged
/// with its own routes).
pub(crate) fn declared(contract: &Contract) -> Option<Uploads<'_>> {
    let upload = contract
        .upload
        .as_ref()
        .filter(|_| !contract.is_reference())?;
    let answer = |key: &Option<String>| key.as_ref().and_then(|k| contract.refusals.get(k));
    Some(Uploads {
        upload,
        request: upload.request.as_ref()?,
        too_large: upload.max_body_bytes.zip(answer(&upload.too_large)),
        stalled: answer(&upload.read_timeout_answer),
    })
}

/// How a body says its length.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Framing {
    /// A `Content-Length` of the whole body, sent first.
    Declared,
    /// `Transfer-Encoding: chunked`: the server counts as it reads.
    Chunked,
}

impl Uploads<'_> {
    /// The request with a body of `len` bytes framed as `framing`; of which only the first
    /// `stall.0` are sent before the body waits `stall.1` and gives up, when `stall` is given.
    pub(crate) fn sized(
        &self,
        t: &Target,
        (len, framing): (u64, Framing),
        stall: Option<(u64, Duration)>,
        limit: Duration,
    ) -> Result<reqwest::RequestBuilder, RequestError> {
        let base = Bytes::from(
            self.request
                .body()
                .map_err(RequestError::Recipe)?
                .into_owned(),
        );
        let sent = stall.map_or(len, |(prefix, _)| prefix.min(len));
        let mut body = grown(base, sent).boxed();
        if let Some((_, wait)) = stall {
            let gave_up = futures_util::stream::once(async move {
                tokio::time::sleep(wait).await;
                Err(std::io::Error::other("the checker's stalled body gave up"))
            });
            body = body.chain(gave_up).boxed();
        }
        let request = t.recipe_head(&t.client, self.request, limit)?;
        let request = match framing {
            Framing::Declared => request.header(CONTENT_LENGTH, len),
            Framing::Chunked => request,
        };
        Ok(request.body(reqwest::Body::wrap_stream(body)))
    }
}

/// `base` followed by spaces, `len` bytes in all (`base` cut short when it is longer), in
/// pieces of at most [`PIECE`].
fn grown(base: Bytes, len: u64) -> impl Stream<Item = Result<Bytes, std::io::Error>> {
    let head = base.slice(..(len.min(base.len() as u64) as usize));
    let rest = len - head.len() as u64;
    let spaces = Bytes::from(vec![b' '; rest.min(PIECE) as usize]);
    let pieces = super::pieces(rest, PIECE)
        .into_iter()
        .map(move |n| Ok(spaces.slice(..n as usize)));
    futures_util::stream::iter(std::iter::once(Ok(head)).chain(pieces))
        .filter(|piece| std::future::ready(piece.as_ref().map_or(true, |b| !b.is_empty())))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn collected(base: &'static [u8], len: u64) -> Vec<u8> {
        let pieces: Vec<_> = grown(Bytes::from_static(base), len).collect().await;
        pieces
            .into_iter()
            .flat_map(|p| p.unwrap().to_vec())
            .collect()
    }

    #[tokio::test]
    async fn a_body_is_grown_with_spaces_and_cut_to_its_length() {
        assert_eq!(collected(b"{}", 5).await, b"{}   ");
        assert_eq!(collected(b"{\"a\":1}", 3).await, b"{\"a");
        assert_eq!(collected(b"", 0).await, b"");
        let long = collected(b"x", 3 * PIECE + 2).await;
        assert_eq!(long.len() as u64, 3 * PIECE + 2);
        assert!(long[1..].iter().all(|b| *b == b' '));
    }
}
