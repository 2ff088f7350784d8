//! What a run judges, by id: a check of `plimsoll check` ([`CheckId`]), and any result a report
//! renders ([`ResultId`]: a check's, or a load profile's verdict). Below the checks and the
//! reports alike, so both name results without depending on each other.

use std::fmt;
use std::str::FromStr;

use plimsoll_spec::ClauseId;
use serde::Serialize;
use serde::ser::SerializeMap as _;

/// A check's id: a contract clause, or one of the two checks that judge the run as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CheckId {
    /// The target's effective values against the contract (`contract`).
    Contract,
    /// One clause (`T1`, ..., `R6`).
    Clause(ClauseId),
    /// Every reply of the run against the OpenAPI document and problem schema (`API`).
    Api,
}

impl CheckId {
    /// Every id: the contract, each clause in id order, the API.
    pub fn all() -> impl Iterator<Item = CheckId> {
        std::iter::once(CheckId::Contract)
            .chain(ClauseId::ALL.into_iter().map(CheckId::Clause))
            .chain(std::iter::once(CheckId::Api))
    }

    /// The id as `--only`, `--skip` and the reports spell it (`contract`, `T1`, `API`).
    pub fn as_str(self) -> &'static str {
        match self {
            CheckId::Contract => "contract",
            CheckId::Clause(id) => id.as_str(),
            CheckId::Api => "API",
        }
    }
}

impl fmt::Display for CheckId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An id that names no check; the message lists the known ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a check id (known: {known})", known = CheckId::all().map(CheckId::as_str).collect::<Vec<_>>().join(", "))]
pub struct UnknownCheck(pub String);

/// Case-insensitive, as people type ids on the command line.
impl FromStr for CheckId {
    type Err = UnknownCheck;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CheckId::all()
            .find(|id| id.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownCheck(s.to_owned()))
    }
}

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

impl Serialize for ResultId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("id", &self.to_string())?;
        map.serialize_entry("clause", &self.clause())?;
        map.end()
    }
}
