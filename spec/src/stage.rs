//! Pipeline stage names. They appear verbatim in `failed_stage` / `completed_stages`, in logs and
//! in hook directives, so they are one enum shared by the contract, the server and the checker.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A named step of a pipeline. `Queue` is the pseudo-stage a request is in before a worker picks
/// it up, so a deadline while queued still names where the request was.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[expect(
    missing_docs,
    reason = "documented variants would change the published schemas"
)]
pub enum Stage {
    Queue,
    Decode,
    Quantize,
    Segment,
    Fill,
    Sequence,
    Serialize,
    Parse,
    Encode,
    Write,
    /// A relay worker handling one envelope (seed 003); `hold=relay:MS` delays it.
    Relay,
}

impl Stage {
    /// Every stage, in declaration order.
    pub const ALL: [Stage; 11] = [
        Stage::Queue,
        Stage::Decode,
        Stage::Quantize,
        Stage::Segment,
        Stage::Fill,
        Stage::Sequence,
        Stage::Serialize,
        Stage::Parse,
        Stage::Encode,
        Stage::Write,
        Stage::Relay,
    ];

    /// The name in `failed_stage`, logs and hook directives (`decode`).
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Queue => "queue",
            Stage::Decode => "decode",
            Stage::Quantize => "quantize",
            Stage::Segment => "segment",
            Stage::Fill => "fill",
            Stage::Sequence => "sequence",
            Stage::Serialize => "serialize",
            Stage::Parse => "parse",
            Stage::Encode => "encode",
            Stage::Write => "write",
            Stage::Relay => "relay",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is no stage.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown stage `{0}`")]
pub struct UnknownStage(
    /// The text that was parsed, as given.
    pub String,
);

impl std::str::FromStr for Stage {
    type Err = UnknownStage;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Stage::ALL
            .into_iter()
            .find(|stage| stage.as_str() == s)
            .ok_or_else(|| UnknownStage(s.to_owned()))
    }
}
