//! Parsing a contract: TOML → [`Contract`], then the rules of [`Contract::violations`]. Every
//! refusal names the field and, when the contract came from text, its line.

use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

use toml::de::{DeTable, DeValue};

use crate::model::Contract;

/// The largest contract document read, in bytes: the digitize contract is a few tens of KB, and a
/// file built to hurt (a million pools, gigabytes of prose) is refused before it is parsed.
pub const MAX_CONTRACT_BYTES: u64 = 4 << 20;

/// The contract shipped with this build.
pub const EMBEDDED_TOML: &str = include_str!("../contract.toml");

/// Why a contract was refused.
#[derive(Debug, thiserror::Error)]
pub enum ContractError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file, as given.
        path: String,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// The text is not TOML, or not of the contract's shape (a missing, unknown or mistyped
    /// field); the message has the line.
    #[error("{origin}: {message}")]
    Syntax {
        /// Where the text came from.
        origin: String,
        /// The TOML parser's message, with its line and a caret.
        message: String,
    },
    /// The document is larger than [`MAX_CONTRACT_BYTES`]; it was not parsed.
    #[error(
        "{origin}: the document is larger than {limit} bytes; a contract is refused unread past that"
    )]
    TooLarge {
        /// Where the text came from.
        origin: String,
        /// [`MAX_CONTRACT_BYTES`].
        limit: u64,
    },
    /// The document is written in contract language 1 (contracts 1.x), which this build no
    /// longer reads: `plimsoll contract upgrade FILE` rewrites it.
    #[error(
        "{origin}: written in contract language 1 (no top-level `language`); this build reads language {}: run `plimsoll contract upgrade {origin}` to rewrite it",
        crate::model::LANGUAGE
    )]
    Language1 {
        /// Where the text came from.
        origin: String,
    },
    /// The document is a draft of `plimsoll init` with values still to fill in
    /// ([`crate::draft`]); each is named with its line. Nothing else of it was read.
    #[error(
        "{origin}: a draft with {} value(s) still to fill in (`plimsoll contract lint {origin}` lists them):\n{}",
        .placeholders.len(),
        list(.placeholders)
    )]
    Draft {
        /// Where the text came from.
        origin: String,
        /// Every placeholder left, in document order.
        placeholders: Vec<crate::draft::Placeholder>,
    },
    /// The contract parses but breaks validation rules.
    #[error("{origin}: invalid contract:\n{}", list(.violations))]
    Invalid {
        /// Where the text came from.
        origin: String,
        /// Every broken rule, each with its line where it could be found.
        violations: Vec<Violation>,
    },
}

fn list(entries: &[impl fmt::Display]) -> String {
    entries
        .iter()
        .map(|v| format!("  - {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One broken rule: the dotted field path, the line it is on, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The dotted path of the field, e.g. `clauses.B1.value.digitize_timeout_ms`.
    pub field: String,
    /// The 1-based line of the field (or its nearest ancestor) when the contract came from
    /// text; `None` for a contract built in memory, e.g. after overrides.
    pub line: Option<usize>,
    /// What is wrong, with the offending value.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: `{}`: {}", self.field, self.message),
            None => write!(f, "`{}`: {}", self.field, self.message),
        }
    }
}

impl Contract {
    /// The embedded contract, parsed and validated once.
    pub fn embedded() -> &'static Contract {
        static EMBEDDED: OnceLock<Contract> = OnceLock::new();
        EMBEDDED.get_or_init(|| {
            Contract::from_toml(EMBEDDED_TOML, "spec/contract.toml")
                .expect("the embedded contract is validated by the spec crate's tests")
        })
    }

    /// Reads and validates a contract file.
    pub fn from_file(path: &Path) -> Result<Contract, ContractError> {
        Contract::read(path).map(|(contract, _)| contract)
    }

    /// Reads and validates a contract file, its recipes' body files read beside it: the
    /// contract, and its text as read (at most [`MAX_CONTRACT_BYTES`] of it, for a report's
    /// fingerprint).
    pub fn read(path: &Path) -> Result<(Contract, String), ContractError> {
        use std::io::Read as _;
        let origin = path.display().to_string();
        let io = |source| ContractError::Io {
            path: origin.clone(),
            source,
        };
        let mut text = String::new();
        std::fs::File::open(path)
            .map_err(io)?
            .take(MAX_CONTRACT_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(io)?;
        let mut contract = Contract::from_toml(&text, &origin)?;
        let folder = path.parent().unwrap_or(Path::new("."));
        let folder = if folder.as_os_str().is_empty() {
            Path::new(".")
        } else {
            folder
        };
        if let Err(problems) = crate::bodies::read_body_files(&mut contract, folder) {
            let mut violations: Vec<Violation> = (problems.into_iter())
                .map(|(field, message)| Violation {
                    field,
                    line: None,
                    message,
                })
                .collect();
            if let Ok(table) = DeTable::parse(&text) {
                for v in &mut violations {
                    v.line = locate(&text, table.get_ref(), &v.field);
                }
            }
            return Err(ContractError::Invalid { origin, violations });
        }
        Ok((contract, text))
    }

    /// Parses and validates contract text; `origin` names it in messages.
    pub fn from_toml(text: &str, origin: &str) -> Result<Contract, ContractError> {
        if text.len() as u64 > MAX_CONTRACT_BYTES {
            return Err(ContractError::TooLarge {
                origin: origin.to_owned(),
                limit: MAX_CONTRACT_BYTES,
            });
        }
        // A text that is no TOML falls through to the parser below, which says where.
        if let Ok(placeholders) = crate::draft::placeholders(text)
            && !placeholders.is_empty()
        {
            return Err(ContractError::Draft {
                origin: origin.to_owned(),
                placeholders,
            });
        }
        let contract: Contract = toml::from_str(text).map_err(|e| {
            let language_1 = DeTable::parse(text).is_ok_and(|t| {
                !t.get_ref().contains_key("language") && t.get_ref().contains_key("clauses")
            });
            if language_1 {
                ContractError::Language1 {
                    origin: origin.to_owned(),
                }
            } else {
                ContractError::Syntax {
                    origin: origin.to_owned(),
                    message: e.to_string().trim_end().to_owned(),
                }
            }
        })?;
        let mut violations = contract.violations();
        if violations.is_empty() {
            return Ok(contract);
        }
        if let Ok(table) = DeTable::parse(text) {
            for v in &mut violations {
                v.line = locate(text, table.get_ref(), &v.field);
            }
        }
        Err(ContractError::Invalid {
            origin: origin.to_owned(),
            violations,
        })
    }
}

/// Line (1-based) of a dotted field path in the TOML text; falls back to the nearest ancestor.
fn locate(text: &str, root: &DeTable<'_>, field: &str) -> Option<usize> {
    let mut best = None;
    let mut table = Some(root);
    let mut array: Option<&[toml::Spanned<DeValue<'_>>]> = None;
    for part in field.split('.') {
        let spanned = if let Some(t) = table {
            t.get(part)
        } else if let Some(a) = array {
            part.parse::<usize>().ok().and_then(|i| a.get(i))
        } else {
            None
        };
        let Some(spanned) = spanned else { break };
        best = Some(spanned.span().start);
        (table, array) = match spanned.get_ref() {
            DeValue::Table(t) => (Some(t), None),
            DeValue::Array(a) => (None, Some(&a[..])),
            _ => (None, None),
        };
    }
    best.map(|offset| text[..offset.min(text.len())].matches('\n').count() + 1)
}
