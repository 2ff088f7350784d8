//! Reading a reply's body with a bound: a target that answers gigabytes (an endless chunked
//! body, a 50 MB `/metrics`) costs the checker at most the bound, and the check says why.

/// The most of any reply body the checker keeps: far above the largest honest reply of the
/// checks (a design of the checker's small images, a DST/EXP export, `/metrics`, the contract).
pub const MAX_REPLY_BYTES: usize = 16 << 20;

/// Why a reply's body was not read whole.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The connection failed while the body was read (the message has the causes).
    #[error("reading the body failed: {}", with_causes(.0))]
    Read(reqwest::Error),
    /// The body passed the cap, and the rest was left unread.
    #[error(
        "the body passed {} MB, more than any reply of the contract holds; the checker stopped reading it",
        .cap >> 20
    )]
    TooLarge {
        /// The cap, bytes.
        cap: usize,
    },
}

/// The whole body, or an error once it passes `cap` bytes (nothing more is read).
pub async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
) -> Result<Vec<u8>, BodyError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Read)? {
        if body.len() + chunk.len() > cap {
            return Err(BodyError::TooLarge { cap });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// An error with its causes, outermost first: reqwest's own text ("error sending request")
/// says where it failed, its sources say why (`invalid HTTP version`, `message head is too
/// large`, `operation timed out`).
pub fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}
