//! A known deviation as a result carries it (`--waivers`, read and applied by
//! [`crate::waivers`]): the waiver as written and what it came to in the run.

use std::fmt;

use plimsoll_spec::CheckId;
use serde::{Deserialize, Serialize};
use time::Date;

/// One known deviation.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Waiver {
    /// The check it waives (`T3`, `B4`, `API`).
    #[serde(with = "check_id")]
    #[schemars(with = "String")]
    pub check: CheckId,
    /// Why the deviation is accepted for now.
    pub reason: String,
    /// Where the work to remove it is tracked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// The last day the waiver holds.
    #[serde(with = "day")]
    #[schemars(with = "String")]
    pub expires: Date,
}

/// `check = "T3"` read and written as the id `--only` takes.
mod check_id {
    use plimsoll_spec::CheckId;
    use serde::{Deserialize as _, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(id: &CheckId, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(id.as_str())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<CheckId, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// `expires = 2027-01-31`: a TOML date, written back as the same text.
mod day {
    use serde::{Deserialize as _, Deserializer, Serializer};
    use time::{Date, Month};

    pub(super) fn serialize<S: Serializer>(day: &Date, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(day)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Date, D::Error> {
        let at = toml::value::Datetime::deserialize(d)?;
        let date = match (at.date, at.time) {
            (Some(date), None) => date,
            _ => {
                return Err(serde::de::Error::custom(
                    "`expires` must be a date without a time, e.g. 2027-01-31",
                ));
            }
        };
        Month::try_from(date.month)
            .and_then(|month| Date::from_calendar_date(i32::from(date.year), month, date.day))
            .map_err(serde::de::Error::custom)
    }
}

/// What a waiver came to in this run; every report shows it beside the check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WaiverState {
    /// The check failed and the waiver holds: reported as waived, the run does not fail.
    Applied,
    /// The waiver's date has passed: the check fails, whatever it found.
    Expired,
    /// The check passed or skipped: the waiver can go (a failure under `--strict`).
    Unneeded,
}

/// A waiver as a result carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct WaiverNote {
    /// The waiver as written.
    #[serde(flatten)]
    pub waiver: Waiver,
    /// What it came to.
    pub state: WaiverState,
}

/// What it came to, its date, reason and link, as every report words it.
impl fmt::Display for WaiverNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = &self.waiver;
        let state = match self.state {
            WaiverState::Applied => "applied",
            WaiverState::Expired => "expired",
            WaiverState::Unneeded => "no longer needed",
        };
        write!(f, "{state}: until {}, {}", w.expires, w.reason)?;
        match &w.link {
            Some(link) => write!(f, " ({link})"),
            None => Ok(()),
        }
    }
}
