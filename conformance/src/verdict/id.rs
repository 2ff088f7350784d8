//! What a result judges, by id ([`ResultId`]): a check's ([`CheckId`], declared in the spec
//! crate beside the clauses' ids) or a load profile's verdict. Part of the verdict model, which
//! the checks and the load profiles produce and the reports render.

use std::fmt;

use plimsoll_spec::CheckId;
use serde::Serialize;
use serde::ser::SerializeMap as _;

/// What a result judges, typed: a check of `plimsoll check` by its [`CheckId`], a load
/// profile's verdict by profile and name, either about one replica of a fleet. Reports print it
/// ([`fmt::Display`]); the clause is derived from it ([`ResultId::clause`]), never kept beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultId {
    /// A check of the suite: `T3`, `contract`, `API`.
    Check(CheckId),
    /// A verdict of a load profile: `L-{profile}`, or `L-{profile}.{verdict}` when `verdict` is
    /// not empty.
    Load {
        /// `burst`, `steady`, `overload` or `soak`.
        profile: &'static str,
        /// The verdict's name within the profile (`goodput`), empty for the profile's own.
        verdict: &'static str,
    },
    /// A result about one replica of a fleet: `L-overload.replica[URL].busy-limit`,
    /// `contract.replica[URL]`.
    Replica {
        /// The result as it reads for one server.
        of: Box<ResultId>,
        /// The replica's base URL.
        url: String,
    },
}

impl ResultId {
    /// The contract clause (or load profile, `load.{profile}`) the result judges: a JUnit
    /// classname, and the column the reports group by.
    pub fn clause(&self) -> String {
        match self {
            ResultId::Check(id) => id.as_str().to_owned(),
            ResultId::Load { profile, .. } => format!("load.{profile}"),
            ResultId::Replica { of, .. } => of.clause(),
        }
    }

    /// The check this result is of, when it is one of `plimsoll check`'s.
    pub fn check(&self) -> Option<CheckId> {
        match self {
            ResultId::Check(id) => Some(*id),
            ResultId::Load { .. } | ResultId::Replica { .. } => None,
        }
    }

    /// Whether the result judges a clause of the contract or a load profile, rather than the run
    /// as a whole (`contract`, `API`).
    pub fn clause_check(&self) -> bool {
        match self {
            ResultId::Check(id) => matches!(id, CheckId::Clause(_)),
            ResultId::Load { .. } => true,
            ResultId::Replica { of, .. } => of.clause_check(),
        }
    }

    /// This result as it reads about the replica at `url`.
    pub fn for_replica(self, url: &str) -> ResultId {
        ResultId::Replica {
            of: Box::new(self),
            url: url.to_owned(),
        }
    }
}

impl fmt::Display for ResultId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResultId::Check(id) => write!(f, "{id}"),
            ResultId::Load {
                profile,
                verdict: "",
            } => write!(f, "L-{profile}"),
            ResultId::Load { profile, verdict } => write!(f, "L-{profile}.{verdict}"),
            ResultId::Replica { of, url } => match of.as_ref() {
                ResultId::Load { profile, verdict } if !verdict.is_empty() => {
                    write!(f, "L-{profile}.replica[{url}].{verdict}")
                }
                other => write!(f, "{other}.replica[{url}]"),
            },
        }
    }
}

impl From<CheckId> for ResultId {
    fn from(id: CheckId) -> ResultId {
        ResultId::Check(id)
    }
}

/// In the JSON report's schema: the two members [`Serialize`] writes, inlined where a result
/// flattens them in.
impl schemars::JsonSchema for ResultId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ResultId".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "properties": {
                "id": {
                    "description": "The result's id: a check's (`T3`, `contract`, `API`) or a load verdict's (`L-overload.goodput`), with `@replica` for one replica of a fleet.",
                    "type": "string"
                },
                "clause": {
                    "description": "The clause it judges (`T3`), or `load.PROFILE` for a load verdict.",
                    "type": "string"
                }
            },
            "required": ["id", "clause"]
        })
    }
}

impl Serialize for ResultId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("id", &self.to_string())?;
        map.serialize_entry("clause", &self.clause())?;
        map.end()
    }
}
