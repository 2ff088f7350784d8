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

/// A stage as a contract names it in a hook hold (`hold.hook.stage`): one of the reference
/// pipeline's, or any service's own (`search`, `render`), since a service with no stages of its
/// own holds before its handler whatever the stage is called. The hook grammar's STAGE token:
/// lowercase letters, digits, `_` and `-`, starting with a letter, at most
/// [`StageName::MAX_LEN`] bytes (the ASGI middleware reads the same token).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct StageName(String);

/// A stage name outside the grammar's STAGE token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid stage name `{0}`: lowercase letters, digits, `_` and `-`, starting with a letter, \
     at most 64 bytes"
)]
pub struct InvalidStageName(
    /// The text that was parsed, as given.
    pub String,
);

impl StageName {
    /// The longest name: a header's value stays short whatever a contract declares.
    pub const MAX_LEN: usize = 64;
    /// The token as a regular expression, for the published schema (the parser below is the
    /// same language: a letter, then up to 63 of the others).
    const PATTERN: &'static str = "^[a-z][a-z0-9_-]{0,63}$";

    /// The name as the hook header carries it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for StageName {
    type Err = InvalidStageName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut chars = s.chars();
        let first = chars.next().is_some_and(|c| c.is_ascii_lowercase());
        let rest = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-".contains(c));
        if first && rest && s.len() <= Self::MAX_LEN {
            Ok(StageName(s.to_owned()))
        } else {
            Err(InvalidStageName(s.chars().take(80).collect()))
        }
    }
}

impl TryFrom<String> for StageName {
    type Error = InvalidStageName;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<StageName> for String {
    fn from(name: StageName) -> String {
        name.0
    }
}

impl From<Stage> for StageName {
    fn from(stage: Stage) -> StageName {
        StageName(stage.as_str().to_owned())
    }
}

impl std::fmt::Display for StageName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl JsonSchema for StageName {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "StageName".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": Self::PATTERN,
            "maxLength": Self::MAX_LEN,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any service's stage names pass; what the hook header could not carry as one token, or
    /// a name past the bound, is refused naming it.
    #[test]
    fn a_stage_name_is_one_short_lowercase_token() {
        for good in ["search", "decode", "render-2", "a", "fetch_page"] {
            assert_eq!(good.parse::<StageName>().unwrap().as_str(), good);
        }
        let long = "a".repeat(StageName::MAX_LEN + 1);
        for bad in ["", "Search", "2fast", "hold:1", "a b", "é", long.as_str()] {
            let e = bad.parse::<StageName>().unwrap_err();
            assert!(e.to_string().contains("invalid stage name"), "{e}");
        }
        assert_eq!(StageName::from(Stage::Decode).as_str(), "decode");
    }
}
