//! The string literals of the sources, macro arguments included (`format!`, `c.fail(format!(…))`
//! hold most of the messages a reader sees): none has a run of eight or more spaces after a
//! word, or opening a line after its first. Such a run is what a line break inside a literal leaves when the `\` that should end
//! the line is lost (by a hand, or a tool that joins the lines): the next line's indentation
//! becomes part of the text, and a verdict reads "the checker plays              (`hold…`)".
//! Doc comments, and runs shorter than two levels of indentation, are layout and pass.

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// Every literal in `source` with a gap between words, as `line: text` (the text cut short);
/// `Err` when the file does not parse.
pub fn gaps(source: &str) -> Result<Vec<String>, syn::Error> {
    let file = syn::parse_file(source)?;
    let mut walk = Walk(Vec::new());
    walk.visit_file(&file);
    Ok(walk.0)
}

/// The indentation a lost `\` leaks into a literal: a line of code's, at least two levels.
/// Shorter runs are layout (a fixed-width field, an aligned comment in a template).
const GAP: &str = "        ";

/// Whether `text` holds a run of [`GAP`] spaces after a word, or opens a line with one (a
/// line break kept in the text, the next line's indentation with it).
fn has_gap(text: &str) -> bool {
    text.lines()
        .enumerate()
        .any(|(i, line)| line.trim_start().contains(GAP) || (i > 0 && line.starts_with(GAP)))
}

/// The gaps found so far.
struct Walk(Vec<String>);

impl Walk {
    /// A cooked literal with a gap is found; a raw one (`r"…"`) has no `\` to lose, and its
    /// line breaks are meant.
    fn judge(&mut self, lit: &syn::LitStr) {
        if lit.token().to_string().starts_with('r') {
            return;
        }
        let text = lit.value();
        if has_gap(&text) {
            let shown: String = text.chars().take(100).collect();
            self.0
                .push(format!("{}: {shown:?}", lit.span().start().line));
        }
    }

    /// The string literals among a macro's tokens, at any depth of its groups.
    fn tokens(&mut self, tokens: TokenStream) {
        for tree in tokens {
            match tree {
                TokenTree::Group(group) => self.tokens(group.stream()),
                TokenTree::Literal(lit) => {
                    if let Ok(lit) = syn::parse2::<syn::LitStr>(TokenTree::Literal(lit).into()) {
                        self.judge(&lit);
                    }
                }
                _ => {}
            }
        }
    }
}

impl<'ast> Visit<'ast> for Walk {
    /// Doc comments are prose laid out by hand (examples, aligned columns): not read.
    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        if !attr.path().is_ident("doc") {
            visit::visit_attribute(self, attr);
        }
    }

    fn visit_lit_str(&mut self, lit: &'ast syn::LitStr) {
        self.judge(lit);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
        visit::visit_macro(self, mac);
    }
}
