//! The disk rule on the syntax tree: which calls of the server's code touch the disk, and
//! whether each runs on a blocking thread. Read from the parsed source (syn), not from lines, so
//! an import (`use std::fs::read_dir;`), an alias or a call split over lines cannot hide one.

use std::collections::BTreeMap;

use syn::spanned::Spanned;
use syn::visit::{self, Visit};

/// Paths whose call touches the disk, as the tree spells them once every `use` is expanded: a
/// path matches when it ends with one of these (`std::fs::read_dir` ends with `fs::read_dir`,
/// whose `fs::` any function of `std::fs` or `tokio::fs` has).
const DISK_PATHS: &[&[&str]] = &[
    &["fs", "*"],
    &["OpenOptions", "*"],
    &["tempdir"],
    &["TempDir", "*"],
    &["temp", "count"],
    &["temp", "remove_stale"],
    &["JobContext", "new"],
];

/// Methods of `Path`/`PathBuf` that touch the disk, called as methods.
const DISK_METHODS: &[&str] = &[
    "exists",
    "try_exists",
    "metadata",
    "symlink_metadata",
    "read_dir",
    "is_file",
    "is_dir",
    "canonicalize",
];

/// The calls on a blocking thread: the closure handed to one of these runs there.
const BLOCKING: &[&str] = &["spawn_blocking", "block_in_place"];

/// Every call in `source` that touches the disk outside a blocking closure and outside items
/// marked `#[cfg(test)]`, as `line: path`; `Err` when the file does not parse.
pub fn on_async_threads(source: &str) -> Result<Vec<String>, syn::Error> {
    let file = syn::parse_file(source)?;
    let mut walk = Walk {
        aliases: aliases(&file.items),
        blocking: 0,
        found: Vec::new(),
    };
    walk.visit_file(&file);
    Ok(walk.found)
}

/// Every name a `use` of the file brings in, with the path it stands for (`read_dir` →
/// `std::fs::read_dir`, `fs` → `std::fs`, `tfs` in `use tokio::fs as tfs` → `tokio::fs`).
fn aliases(items: &[syn::Item]) -> BTreeMap<String, Vec<String>> {
    fn walk(tree: &syn::UseTree, prefix: &[String], out: &mut BTreeMap<String, Vec<String>>) {
        let with = |name: &syn::Ident| {
            let mut path = prefix.to_vec();
            path.push(name.to_string());
            path
        };
        match tree {
            syn::UseTree::Path(p) => walk(&p.tree, &with(&p.ident), out),
            syn::UseTree::Name(n) if n.ident == "self" => {
                if let Some(last) = prefix.last() {
                    out.insert(last.clone(), prefix.to_vec());
                }
            }
            syn::UseTree::Name(n) => {
                out.insert(n.ident.to_string(), with(&n.ident));
            }
            syn::UseTree::Rename(r) => {
                out.insert(r.rename.to_string(), with(&r.ident));
            }
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| walk(t, prefix, out)),
            syn::UseTree::Glob(_) => {}
        }
    }
    let mut out = BTreeMap::new();
    for item in items {
        if let syn::Item::Use(u) = item {
            walk(&u.tree, &[], &mut out);
        }
    }
    out
}

struct Walk {
    aliases: BTreeMap<String, Vec<String>>,
    /// How many blocking closures the walk is inside.
    blocking: usize,
    found: Vec<String>,
}

impl Walk {
    /// `path` with its first segment expanded through the file's `use`s.
    fn expand(&self, path: &syn::Path) -> Vec<String> {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        match segments.split_first() {
            Some((first, rest)) => match self.aliases.get(first) {
                Some(full) => full.iter().chain(rest).cloned().collect(),
                None => segments.clone(),
            },
            None => segments,
        }
    }

    fn note(&mut self, span: proc_macro2::Span, what: String) {
        if self.blocking == 0 {
            self.found.push(format!("{}: {what}", span.start().line));
        }
    }
}

/// Whether `path` ends with one of [`DISK_PATHS`] (`*` matching any one segment).
fn touches_disk(path: &[String]) -> bool {
    DISK_PATHS.iter().any(|pattern| {
        path.len() >= pattern.len()
            && path[path.len() - pattern.len()..]
                .iter()
                .zip(pattern.iter())
                .all(|(segment, want)| *want == "*" || segment == want)
    })
}

/// Whether an item is compiled for tests only.
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|cfg| cfg == "test")
    })
}

impl<'ast> Visit<'ast> for Walk {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            _ => return visit::visit_item(self, item),
        };
        if !test_only(attrs) {
            visit::visit_item(self, item);
        }
    }

    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        let blocking = matches!(&*call.func, syn::Expr::Path(p)
            if p.path.segments.last().is_some_and(|s| BLOCKING.iter().any(|b| s.ident == b)));
        self.visit_expr(&call.func);
        self.blocking += usize::from(blocking);
        for arg in &call.args {
            self.visit_expr(arg);
        }
        self.blocking -= usize::from(blocking);
    }

    fn visit_expr_path(&mut self, expr: &'ast syn::ExprPath) {
        let path = self.expand(&expr.path);
        if touches_disk(&path) {
            self.note(expr.span(), path.join("::"));
        }
        visit::visit_expr_path(self, expr);
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        if DISK_METHODS.iter().any(|m| call.method == m) {
            self.note(call.method.span(), format!(".{}()", call.method));
        }
        visit::visit_expr_method_call(self, call);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disk_call_hidden_by_an_import_or_a_line_break_is_caught() {
        let source = "use std::fs::read_dir;\n\
                      use tokio::fs as tfs;\n\
                      use plimsoll_engine::temp;\n\
                      async fn metrics(root: &Path) {\n\
                          let n = read_dir(root);\n\
                          let m = tfs::metadata(root).await;\n\
                          let c = temp::\n    count(root);\n\
                          let ok = tokio::task::spawn_blocking(move || temp::count(&root));\n\
                          let e = root.exists();\n\
                      }\n\
                      #[cfg(test)]\n\
                      mod tests { fn t() { std::fs::remove_dir(\"x\"); } }\n";
        assert_eq!(
            on_async_threads(source).unwrap(),
            [
                "5: std::fs::read_dir",
                "6: tokio::fs::metadata",
                "7: plimsoll_engine::temp::count",
                "10: .exists()"
            ]
        );
    }
}
