//! The test-hook grammar (`X-Plimsoll-Hook`), parsed in one place for the server and the checker.
//!
//! The grammar is the contract's `[hooks].grammar` (ABNF): this parser accepts exactly its
//! language, and the OpenAPI pattern ([`crate::render::hook_pattern`]) is the same language as a
//! regular expression (`spec/tests/openapi.rs` holds the three together).

use crate::Stage;

/// One directive of the hook header, its stages of type `S`: the reference pipeline's
/// [`Stage`] by default, or any service's own names ([`crate::StageName`], for a layer that
/// holds before its handler whatever the stage is called).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookDirective<S = Stage> {
    /// Hold the job at the start of `stage` for `ms` milliseconds (cancellation and the deadline
    /// still apply while holding).
    Hold {
        /// The stage whose start is held.
        stage: S,
        /// How long the hold lasts.
        ms: u64,
    },
    /// Make `stage` fail with an ordinary error.
    Fail {
        /// The stage that fails (`failed_stage` of the answer).
        stage: S,
    },
    /// Make `stage` panic.
    Panic {
        /// The stage that panics; the answer is a stage failure like [`HookDirective::Fail`]'s.
        stage: S,
    },
    /// Charge `mb` megabytes to the job's memory budget at its first stage.
    Alloc {
        /// Megabytes (1 MB = 1,048,576 bytes) added to the job's estimate.
        mb: u64,
    },
}

/// Why a hook header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid hook directive `{directive}`: {reason}")]
pub struct HookParseError {
    /// The directive as it stood in the header (trimmed), so the answer can quote it.
    pub directive: String,
    /// What the grammar expected instead.
    pub reason: String,
}

/// The grammar's `OWS`: blanks (space, horizontal tab) around tokens.
const OWS: [char; 2] = [' ', '\t'];

/// The largest `NUMBER` the grammar allows: at most 19 significant digits, so every number fits
/// a `u64`.
const MAX_NUMBER: u64 = 9_999_999_999_999_999_999;

/// Parses a whole header value by the contract's grammar; an empty value, and an empty
/// directive between two `;`, is no directive. A byte outside visible ASCII other than a blank
/// is refused.
pub fn parse_hooks(value: &str) -> Result<Vec<HookDirective>, HookParseError> {
    parse_hooks_as(value)
}

/// [`parse_hooks`] with the stages read as `S`: the grammar is the same but for which names
/// its STAGE token admits (`S`'s parser says, and its error is the reason given).
pub fn parse_hooks_as<S>(value: &str) -> Result<Vec<HookDirective<S>>, HookParseError>
where
    S: std::str::FromStr,
    S::Err: std::fmt::Display,
{
    if let Some(bad) = value
        .chars()
        .find(|c| !(c.is_ascii_graphic() || OWS.contains(c)))
    {
        return Err(HookParseError {
            directive: value.trim_matches(OWS).to_owned(),
            reason: format!(
                "{bad:?} is outside visible ASCII (only blanks may surround the tokens)"
            ),
        });
    }
    value
        .split(';')
        .map(|d| d.trim_matches(OWS))
        .filter(|d| !d.is_empty())
        .map(parse_directive)
        .collect()
}

fn parse_directive<S>(directive: &str) -> Result<HookDirective<S>, HookParseError>
where
    S: std::str::FromStr,
    S::Err: std::fmt::Display,
{
    let err = |reason: &str| HookParseError {
        directive: directive.to_owned(),
        reason: reason.to_owned(),
    };
    let (name, arg) = directive
        .split_once('=')
        .ok_or_else(|| err("expected NAME=VALUE"))?;
    let stage = |s: &str| {
        s.trim_matches(OWS)
            .parse::<S>()
            .map_err(|e| err(&e.to_string()))
    };
    let number = |s: &str| {
        s.trim_matches(OWS)
            .parse::<u64>()
            .ok()
            .filter(|n| *n <= MAX_NUMBER)
            .ok_or_else(|| err("expected a non-negative integer of at most 19 digits"))
    };
    match name.trim_matches(OWS) {
        "hold" => {
            let (s, ms) = arg
                .split_once(':')
                .ok_or_else(|| err("expected hold=STAGE:MS"))?;
            Ok(HookDirective::Hold {
                stage: stage(s)?,
                ms: number(ms)?,
            })
        }
        "fail" => Ok(HookDirective::Fail { stage: stage(arg)? }),
        "panic" => Ok(HookDirective::Panic { stage: stage(arg)? }),
        "alloc" => Ok(HookDirective::Alloc { mb: number(arg)? }),
        _ => Err(err(
            "unknown directive; expected hold, fail, panic or alloc",
        )),
    }
}

/// Renders directives back to header syntax (the checker builds headers with this).
pub fn format_hooks<S: std::fmt::Display>(directives: &[HookDirective<S>]) -> String {
    directives
        .iter()
        .map(|d| match d {
            HookDirective::Hold { stage, ms } => format!("hold={stage}:{ms}"),
            HookDirective::Fail { stage } => format!("fail={stage}"),
            HookDirective::Panic { stage } => format!("panic={stage}"),
            HookDirective::Alloc { mb } => format!("alloc={mb}"),
        })
        .collect::<Vec<_>>()
        .join(";")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_directive() {
        let text = "hold=fill:250;fail=segment;panic=decode;alloc=2048";
        let parsed = parse_hooks(text).unwrap();
        assert_eq!(
            parsed,
            vec![
                HookDirective::Hold {
                    stage: Stage::Fill,
                    ms: 250
                },
                HookDirective::Fail {
                    stage: Stage::Segment
                },
                HookDirective::Panic {
                    stage: Stage::Decode
                },
                HookDirective::Alloc { mb: 2048 },
            ]
        );
        assert_eq!(format_hooks(&parsed), text);
    }

    /// A service's own stage names are the same grammar with another STAGE token: `search`
    /// passes as a [`crate::StageName`] and is no stage of the reference pipeline.
    #[test]
    fn any_services_stage_names_parse_as_stage_names_only() {
        let named = parse_hooks_as::<crate::StageName>("hold=search:300;fail=render-2").unwrap();
        assert_eq!(format_hooks(&named), "hold=search:300;fail=render-2");
        assert!(parse_hooks("hold=search:300").is_err());
        let e = parse_hooks_as::<crate::StageName>("hold=Search:300").unwrap_err();
        assert!(e.reason.contains("invalid stage name `Search`"), "{e}");
    }

    #[test]
    fn refuses_bad_directives_with_the_offending_text() {
        for bad in [
            "hold=fill",
            "fail=nowhere",
            "alloc=-1",
            "explode=now",
            "hold",
            "alloc=10000000000000000000",
        ] {
            let e = parse_hooks(bad).unwrap_err();
            assert_eq!(e.directive, bad);
        }
    }

    #[test]
    fn blanks_surround_tokens_and_nothing_else_outside_visible_ascii_passes() {
        assert_eq!(
            parse_hooks(" hold\t=fill: +0005 ;; ").unwrap(),
            vec![HookDirective::Hold {
                stage: Stage::Fill,
                ms: 5
            }]
        );
        assert!(parse_hooks("alloc=9999999999999999999").is_ok());
        for bad in [
            "hold=fill:5\u{b}",
            "\u{a0}alloc=1",
            "fail=d\u{e9}code",
            "alloc=1\n",
        ] {
            assert!(parse_hooks(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_contracts_grammar_names_every_stage_and_no_other() {
        let grammar = &crate::Contract::embedded().hooks().grammar;
        let line = grammar
            .lines()
            .find(|l| l.trim_start().starts_with("STAGE"))
            .expect("the grammar has a STAGE rule");
        let named: Vec<&str> = line.split('"').skip(1).step_by(2).collect();
        assert_eq!(named, Stage::ALL.map(Stage::as_str), "{line}");
    }
}
