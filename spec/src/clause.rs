//! Clauses as a concept: [`ClauseId`], the one list of clause ids every crate derives its own
//! lists from (checks, mutants, docs, reports), [`CheckId`], what a check of the checker judges
//! (a clause, or the run as a whole), and [`ClauseRef`], a clause seen without its value type,
//! for renderers, validation and placeholder expansion.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ErrorCode;
use crate::model::{Clause, Contract, SourceRef};

/// Declares [`ClauseId`] from one list of ids: the enum (whose serde and schema names are the
/// variants' names), [`ClauseId::ALL`] in the list's order, [`ClauseId::as_str`] (and from it
/// the case-insensitive parsing), and the [`CheckId`] constant of each clause's check
/// (`CheckId::T1`), so a check id written in code is checked by the compiler.
macro_rules! clause_ids {
    ($($id:ident: $name:literal),* $(,)?) => {
        /// A clause's stable id. The contract's `[clauses]` table, the OpenAPI `x-plimsoll` extension,
        /// the server's `// clause: X` marks, the checks and the reports all carry it.
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
        )]
        #[expect(
            missing_docs,
            reason = "documented variants would change the published schemas"
        )]
        pub enum ClauseId {
            $($id,)*
        }

        impl ClauseId {
            /// Every clause in id order (T, B, F, R): the order of the contract and the docs.
            pub const ALL: [ClauseId; [$(ClauseId::$id),*].len()] = [$(ClauseId::$id),*];

            /// The id as the contract, the `// clause:` marks and the reports spell it (`T1`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ClauseId::$id => stringify!($id),)*
                }
            }

            /// What the clause judges, in the language's words, for any service (`Pool
            /// limit`): the title a report gives a clause the contract writes no prose for.
            pub fn name(self) -> &'static str {
                match self {
                    $(ClauseId::$id => $name,)*
                }
            }
        }

        impl CheckId {
            $(
                #[doc = concat!("The check of clause ", stringify!($id), ".")]
                pub const $id: CheckId = CheckId::Clause(ClauseId::$id);
            )*
        }
    };
}

clause_ids!(
    T1: "Pool limit",
    T2: "Queue order and capacity",
    T3: "Refusal and its hint",
    T4: "Rate limit",
    T5: "Queue timeout",
    T6: "Connection after a refusal",
    B1: "Deadline",
    B2: "Memory cap",
    B3: "Cancellation on disconnect",
    B4: "Connection bounds",
    B5: "Upload budget",
    F1: "Failure body",
    F2: "Input errors",
    F3: "Error log line",
    F4: "Request id",
    R1: "Relay pool",
    R2: "Relay: no head-of-line blocking",
    R3: "Relay: matched by request id",
    R4: "Relay: overflow queues",
    R5: "Relay: frame atomicity",
    R6: "Relay: reconnect",
);

impl fmt::Display for ClauseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An id that names no clause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a clause id (known: T1-T6, B1-B5, F1-F4, R1-R6)")]
pub struct UnknownClause(
    /// The text that was parsed, as given.
    pub String,
);

impl FromStr for ClauseId {
    type Err = UnknownClause;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ClauseId::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownClause(s.to_owned()))
    }
}

/// A check's id: a contract clause, or one of the two checks that judge the run as a whole.
/// What `plimsoll check --only` names, the checker's registry keys its checks by, and the broken
/// variants of the reference server declare they must fail (`CheckId::T1`, `CheckId::Api`), so
/// a wrong id is a compile error wherever one is written.
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
pub struct UnknownCheck(
    /// The text that was parsed, as given.
    pub String,
);

/// Case-insensitive, as people type ids on the command line.
impl FromStr for CheckId {
    type Err = UnknownCheck;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CheckId::all()
            .find(|id| id.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownCheck(s.to_owned()))
    }
}

/// A clause with its id, seen without its value type (for renderers and validation).
pub struct ClauseRef<'a> {
    /// Which clause this is; also the key of its table in the contract.
    pub id: ClauseId,
    /// The heading the docs give the clause (after its id).
    pub title: &'a str,
    /// The docs section the clause is listed under.
    pub category: crate::model::Category,
    /// The one-sentence promise, placeholders unfilled ([`Contract::text`] fills them).
    pub statement: &'a str,
    /// Why the value is what it is, placeholders unfilled.
    pub rationale: &'a str,
    /// How the conformance suite checks the clause, placeholders unfilled.
    pub verification: &'a str,
    /// The document and section the clause comes from.
    pub source: &'a crate::model::SourceRef,
    /// The environment variables a deployment may change the value's fields with.
    pub overrides: &'a [crate::model::Override],
    /// The clause's value as JSON (field name → value).
    pub value: serde_json::Map<String, serde_json::Value>,
}

/// Where an optional clause the contract does not write comes from: nowhere.
static UNWRITTEN: SourceRef = SourceRef {
    doc: String::new(),
    section: String::new(),
};

impl<'a> ClauseRef<'a> {
    /// An optional clause the contract writes no prose for: the language's name for it, and
    /// nothing else ([`Contract::clause_list`] leaves it out).
    fn unwritten(id: ClauseId) -> Self {
        ClauseRef {
            id,
            title: id.name(),
            category: crate::model::Category::Throughput,
            statement: "",
            rationale: "",
            verification: "",
            source: &UNWRITTEN,
            overrides: &[],
            value: serde_json::Map::new(),
        }
    }

    fn new<V: serde::Serialize>(id: ClauseId, c: &'a Clause<V>) -> Self {
        let value = match serde_json::to_value(&c.value) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        ClauseRef {
            id,
            title: &c.title,
            category: c.category,
            statement: &c.statement,
            rationale: &c.rationale,
            verification: &c.verification,
            source: &c.source,
            overrides: &c.overrides,
            value,
        }
    }
}

impl Contract {
    /// Every clause the contract writes out, in id order (T, B, F, R): those of `[clauses]`
    /// (every required one, and an optional one, T4 to T6, where written), none in a contract
    /// without.
    pub fn clause_list(&self) -> Vec<ClauseRef<'_>> {
        if self.clauses.is_none() {
            return Vec::new();
        }
        ClauseId::ALL
            .into_iter()
            .map(|id| self.clause(id))
            .filter(|c| !c.statement.is_empty())
            .collect()
    }

    /// The title a report gives clause `id`: the contract's own, or the language's name for
    /// what the clause judges ([`ClauseId::name`]) when the contract writes no clause prose.
    pub fn clause_title(&self, id: ClauseId) -> String {
        match &self.clauses {
            Some(_) => self.clause(id).title.to_owned(),
            None => id.name().to_owned(),
        }
    }

    /// One clause by id (an exhaustive match: a new id does not compile until it has a field).
    /// Only for a contract that writes its clauses out (every contract with `[api]` does).
    pub fn clause(&self, id: ClauseId) -> ClauseRef<'_> {
        let c = self.clauses();
        match id {
            ClauseId::T1 => ClauseRef::new(id, &c.t1),
            ClauseId::T2 => ClauseRef::new(id, &c.t2),
            ClauseId::T3 => ClauseRef::new(id, &c.t3),
            ClauseId::T4 => {
                c.t4.as_ref()
                    .map_or_else(|| ClauseRef::unwritten(id), |t4| ClauseRef::new(id, t4))
            }
            ClauseId::T5 => {
                c.t5.as_ref()
                    .map_or_else(|| ClauseRef::unwritten(id), |t5| ClauseRef::new(id, t5))
            }
            ClauseId::T6 => {
                c.t6.as_ref()
                    .map_or_else(|| ClauseRef::unwritten(id), |t6| ClauseRef::new(id, t6))
            }
            ClauseId::B1 => ClauseRef::new(id, &c.b1),
            ClauseId::B2 => ClauseRef::new(id, &c.b2),
            ClauseId::B3 => ClauseRef::new(id, &c.b3),
            ClauseId::B4 => ClauseRef::new(id, &c.b4),
            ClauseId::B5 => ClauseRef::new(id, &c.b5),
            ClauseId::F1 => ClauseRef::new(id, &c.f1),
            ClauseId::F2 => ClauseRef::new(id, &c.f2),
            ClauseId::F3 => ClauseRef::new(id, &c.f3),
            ClauseId::F4 => ClauseRef::new(id, &c.f4),
            ClauseId::R1 => ClauseRef::new(id, &c.r1),
            ClauseId::R2 => ClauseRef::new(id, &c.r2),
            ClauseId::R3 => ClauseRef::new(id, &c.r3),
            ClauseId::R4 => ClauseRef::new(id, &c.r4),
            ClauseId::R5 => ClauseRef::new(id, &c.r5),
            ClauseId::R6 => ClauseRef::new(id, &c.r6),
        }
    }

    /// The status and title of an error code.
    pub fn error(&self, code: ErrorCode) -> &crate::model::ErrorSpec {
        self.errors
            .iter()
            .find(|e| e.code == code)
            .expect("validation guarantees every code is in [[errors]]")
    }
}

/// Why a text's placeholders could not be filled; the message names the placeholder.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// A `{` with no `}` after it.
    #[error("unclosed `{{` in {template:?}")]
    Unclosed {
        /// The whole text, as given.
        template: String,
    },
    /// `{status:CODE}` names no error code.
    #[error(transparent)]
    UnknownCode(#[from] crate::problem::UnknownErrorCode),
    /// `{status:CODE}` names a code the contract's `[[errors]]` lacks.
    #[error("`{0}` has no status in [[errors]]")]
    NoStatus(ErrorCode),
    /// A dotted path that leads to no scalar of the contract.
    #[error("placeholder `{{{name}}}` is not a scalar of the contract")]
    NotScalar {
        /// The placeholder, without its braces.
        name: String,
    },
    /// A plain name that is no scalar field of the clause's value.
    #[error("placeholder `{{{name}}}` is not a scalar field of {clause}'s value")]
    NotField {
        /// The placeholder, without its braces.
        name: String,
        /// The clause whose value lacks it.
        clause: ClauseId,
    },
    /// A plain name in a text that belongs to no clause.
    #[error("placeholder `{{{name}}}` needs a clause; use a dotted path")]
    NeedsClause {
        /// The placeholder, without its braces.
        name: String,
    },
}

impl Contract {
    /// Fills a clause text's placeholders so prose never repeats a value: `{field}` is a field of
    /// the clause's value, `{status:CODE}` the HTTP status of an error code, and `{a.b.c}` (a
    /// dotted path) any scalar of the contract, e.g. `{api.digitize.max_pixels}`.
    pub fn expand(&self, clause: &ClauseRef<'_>, template: &str) -> Result<String, ExpandError> {
        self.expand_in(Some(clause), template)
    }

    /// [`Contract::expand`] for a text that may belong to no clause (then `{field}` names
    /// nothing; `{status:CODE}` and dotted paths still work).
    pub fn expand_in(
        &self,
        clause: Option<&ClauseRef<'_>>,
        template: &str,
    ) -> Result<String, ExpandError> {
        let mut doc: Option<serde_json::Value> = None;
        let mut out = String::with_capacity(template.len());
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let close = rest[open..]
                .find('}')
                .ok_or_else(|| ExpandError::Unclosed {
                    template: template.to_owned(),
                })?;
            let name = &rest[open + 1..open + close];
            let text = if let Some(code) = name.strip_prefix("status:") {
                let code: ErrorCode = code.parse()?;
                self.errors
                    .iter()
                    .find(|e| e.code == code)
                    .map(|e| e.status.to_string())
                    .ok_or(ExpandError::NoStatus(code))?
            } else if name.contains('.') {
                let doc = doc.get_or_insert_with(|| {
                    serde_json::to_value(self).expect("a contract serializes")
                });
                name.split('.')
                    .try_fold(&*doc, |v, part| match v {
                        serde_json::Value::Object(m) => m.get(part),
                        serde_json::Value::Array(a) => a.get(part.parse::<usize>().ok()?),
                        _ => None,
                    })
                    .and_then(scalar)
                    .ok_or_else(|| ExpandError::NotScalar {
                        name: name.to_owned(),
                    })?
            } else {
                field(clause, name)?
            };
            out.push_str(&text);
            rest = &rest[open + close + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// [`Contract::expand`] for texts already validated.
    pub fn text(&self, clause: &ClauseRef<'_>, template: &str) -> String {
        self.expand(clause, template)
            .unwrap_or_else(|_| template.to_owned())
    }

    /// An implementation rule's text with its placeholders filled (its clause's value first).
    pub fn rule_text(
        &self,
        rule: &crate::model::ImplementationRule,
    ) -> Result<String, ExpandError> {
        let clause = rule.clause.map(|id| self.clause(id));
        self.expand_in(clause.as_ref(), &rule.rule)
    }
}

/// The placeholder `{name}` as a scalar field of `clause`'s value.
fn field(clause: Option<&ClauseRef<'_>>, name: &str) -> Result<String, ExpandError> {
    match clause {
        Some(c) => c
            .value
            .get(name)
            .and_then(scalar)
            .ok_or_else(|| ExpandError::NotField {
                name: name.to_owned(),
                clause: c.id,
            }),
        None => Err(ExpandError::NeedsClause {
            name: name.to_owned(),
        }),
    }
}

/// A JSON scalar as prose shows it (strings without quotes); None for objects and arrays.
fn scalar(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Object(_) | serde_json::Value::Array(_) => None,
        other => Some(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion_errors_say_which_placeholder() {
        let contract = Contract::embedded();
        let b1 = contract.clause(ClauseId::B1);
        let err = |template: &str| contract.expand(&b1, template).unwrap_err().to_string();
        assert_eq!(err("a {b"), r#"unclosed `{` in "a {b""#);
        assert_eq!(err("{status:nope}"), "unknown error code `nope`");
        assert_eq!(
            err("{api.digitize}"),
            "placeholder `{api.digitize}` is not a scalar of the contract"
        );
        assert_eq!(
            err("{nope}"),
            "placeholder `{nope}` is not a scalar field of B1's value"
        );
        assert_eq!(
            contract.expand_in(None, "{nope}").unwrap_err().to_string(),
            "placeholder `{nope}` needs a clause; use a dotted path"
        );
        let mut without = contract.clone();
        without.errors.retain(|e| e.code != ErrorCode::Timeout);
        assert_eq!(
            without.expand(&b1, "{status:timeout}").unwrap_err(),
            ExpandError::NoStatus(ErrorCode::Timeout)
        );
        assert_eq!(
            ExpandError::NoStatus(ErrorCode::Timeout).to_string(),
            "`timeout` has no status in [[errors]]"
        );
        assert_eq!(
            contract.expand(
                &b1,
                "{pools.digitize.deadline_ms} ms, {headroom_factor}x, {status:timeout}"
            ),
            Ok("60000 ms, 12x, 504".to_owned())
        );
    }

    #[test]
    fn ids_round_trip_in_any_case() {
        for id in CheckId::all() {
            assert_eq!(id.as_str().parse::<CheckId>(), Ok(id));
            assert_eq!(id.as_str().to_lowercase().parse::<CheckId>(), Ok(id));
        }
    }

    #[test]
    fn an_unknown_id_names_itself_and_the_known_ones() {
        let e = "T9".parse::<CheckId>().unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("`T9` is not a check id"), "{text}");
        for id in CheckId::all() {
            assert!(text.contains(id.as_str()), "{text} lacks {id}");
        }
    }
}
