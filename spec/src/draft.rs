//! A draft contract's placeholders: the values `plimsoll init` could not know (how many workers,
//! the refusal's status, how slow the slow request is), each written as a TOML string that
//! starts with [`PLACEHOLDER`] and says what to measure or decide:
//!
//! ```toml
//! workers = "TODO: how many requests of this pool run at once (a number, T1)"
//! ```
//!
//! A string, so that a draft is still TOML an editor and the schema can read; and a string where
//! the field wants a number, a status or a table, so that a draft cannot be judged by accident.
//! The loader ([`crate::Contract::from_toml`]) refuses any document that still holds one, naming
//! each with its field and line, before it reads the document's types: where a placeholder stands
//! in for a text (a title), its type is right, and only this look finds it.

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// How every placeholder string begins; the rest of the string says what to fill in.
pub const PLACEHOLDER: &str = "TODO:";

/// The most placeholders one look reports: a document of more is no draft `init` wrote, and a
/// thousand of them are enough to say so (a hostile file of a million is reported in bounded
/// time).
const MAX_REPORTED: usize = 1000;

/// A value still to fill in: where it is and what it asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    /// The dotted path of the field (`pools.get_slow.workers`; an array's entries by index).
    pub field: String,
    /// The 1-based line of the value.
    pub line: usize,
    /// What to measure or decide: the string after [`PLACEHOLDER`], trimmed.
    pub todo: String,
}

impl std::fmt::Display for Placeholder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}: `{}`: placeholder left by `plimsoll init`: {}",
            self.line, self.field, self.todo
        )
    }
}

/// Every placeholder of a TOML document, in the order they appear (at most [`MAX_REPORTED`] of
/// them); the TOML parser's error when the text is not TOML at all.
pub fn placeholders(text: &str) -> Result<Vec<Placeholder>, toml::de::Error> {
    let table = DeTable::parse(text)?;
    let mut found = Vec::new();
    walk_table(table.get_ref(), "", &mut found);
    let mut found: Vec<(usize, String, String)> = found;
    found.sort_by_key(|(offset, _, _)| *offset);
    Ok(found
        .into_iter()
        .map(|(offset, field, todo)| Placeholder {
            field,
            line: text[..offset.min(text.len())].matches('\n').count() + 1,
            todo,
        })
        .collect())
}

/// Whether a string value is a placeholder (and then what it asks for).
fn todo_of(value: &str) -> Option<&str> {
    value.strip_prefix(PLACEHOLDER).map(str::trim)
}

fn walk_table(table: &DeTable<'_>, at: &str, found: &mut Vec<(usize, String, String)>) {
    for (key, value) in table {
        let field = if at.is_empty() {
            key.get_ref().to_string()
        } else {
            format!("{at}.{}", key.get_ref())
        };
        walk(value, &field, found);
    }
}

fn walk(value: &Spanned<DeValue<'_>>, field: &str, found: &mut Vec<(usize, String, String)>) {
    if found.len() >= MAX_REPORTED {
        return;
    }
    match value.get_ref() {
        DeValue::String(s) => {
            if let Some(todo) = todo_of(s) {
                found.push((value.span().start, field.to_owned(), todo.to_owned()));
            }
        }
        DeValue::Table(t) => walk_table(t, field, found),
        DeValue::Array(a) => {
            for (i, entry) in a.iter().enumerate() {
                walk(entry, &format!("{field}.{i}"), found);
            }
        }
        DeValue::Integer(_) | DeValue::Float(_) | DeValue::Boolean(_) | DeValue::Datetime(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_is_found_with_its_field_and_line() {
        let text = "language = 2\n[pools.a]\nworkers = \"TODO: how many\"\nqueue = { capacity = \"TODO: places\", order = \"fifo\" }\nroutes = [{ method = \"GET\", path = \"TODO: a path\" }]\n";
        let found = placeholders(text).unwrap();
        let got: Vec<(&str, usize, &str)> = found
            .iter()
            .map(|p| (p.field.as_str(), p.line, p.todo.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("pools.a.workers", 3, "how many"),
                ("pools.a.queue.capacity", 4, "places"),
                ("pools.a.routes.0.path", 5, "a path"),
            ]
        );
    }

    #[test]
    fn a_filled_draft_has_none_and_a_text_that_is_no_toml_is_an_error() {
        assert!(
            placeholders("workers = 2\ntitle = \"a TODO: inside\"\n")
                .unwrap()
                .is_empty()
        );
        assert!(placeholders("this is = = not toml").is_err());
    }

    #[test]
    fn a_document_of_countless_placeholders_is_reported_by_a_thousand() {
        let text: String = (0..100_000)
            .map(|i| format!("k{i} = \"TODO: x\"\n"))
            .collect();
        let started = std::time::Instant::now();
        let found = placeholders(&text).unwrap();
        assert_eq!(found.len(), MAX_REPORTED);
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
    }

    /// A placeholder in a text field is of the field's type: only the loader's look refuses it.
    #[test]
    fn the_loader_refuses_a_draft_naming_each_placeholder_and_its_line() {
        let text: String = crate::EMBEDDED_TOML
            .lines()
            .map(|l| match l.starts_with("summary = ") {
                true => "summary = \"TODO: one sentence\"\n".to_owned(),
                false => format!("{l}\n"),
            })
            .collect();
        let line = text
            .lines()
            .position(|l| l.starts_with("summary = \"TODO:"))
            .unwrap()
            + 1;
        match crate::Contract::from_toml(&text, "draft.toml") {
            Err(crate::ContractError::Draft { placeholders, .. }) => {
                let every = text.lines().filter(|l| l.starts_with("summary = ")).count();
                assert_eq!(placeholders.len(), every, "{placeholders:?}");
                assert_eq!(placeholders[0].field, "contract.summary");
                assert_eq!(placeholders[0].line, line);
                assert_eq!(placeholders[0].todo, "one sentence");
            }
            other => panic!("{other:?}"),
        }
    }
}
