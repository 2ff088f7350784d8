//! The broken variants' feature, read from `cargo metadata` rather than from manifest lines: the
//! variants are compiled only where something asks for the `mutants` feature, and only a
//! dev-dependency (a test build) may ask. A release build therefore holds none.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

/// The feature the broken variants are compiled behind.
pub const FEATURE: &str = "mutants";

/// The workspace's own packages as `cargo metadata --no-deps` describes them.
pub fn workspace_metadata() -> Value {
    metadata(&["--no-deps"])
}

/// `cargo metadata` of the workspace, with `extra` arguments.
fn metadata(extra: &[&str]) -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(extra)
        .current_dir(super::root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata writes JSON")
}

/// The workspace with its dependencies resolved (`cargo metadata`).
pub fn resolved_metadata() -> Value {
    metadata(&[])
}

/// The names of `package`'s own dependencies of every kind but dev, from its manifest as
/// `cargo metadata` reads it.
pub fn direct_dependencies(metadata: &Value, package: &str) -> BTreeSet<String> {
    metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["name"] == package)
        .flat_map(|p| p["dependencies"].as_array().into_iter().flatten())
        .filter(|d| d["kind"].as_str() != Some("dev"))
        .filter_map(|d| d["name"].as_str().map(str::to_owned))
        .collect()
}

/// The names of every package `package` reaches through normal dependencies, as resolved.
pub fn normal_closure(metadata: &Value, package: &str) -> BTreeSet<String> {
    let nodes = metadata["resolve"]["nodes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let name_of = |id: &str| id_name(metadata, id);
    let start = nodes
        .iter()
        .find(|n| name_of(n["id"].as_str().unwrap_or("")) == package)
        .and_then(|n| n["id"].as_str())
        .map(str::to_owned);
    let mut seen = BTreeSet::new();
    let mut todo: Vec<String> = start.into_iter().collect();
    while let Some(id) = todo.pop() {
        let Some(node) = nodes.iter().find(|n| n["id"] == id.as_str()) else {
            continue;
        };
        for dep in node["deps"].as_array().into_iter().flatten() {
            let normal = dep["dep_kinds"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|k| k["kind"].is_null());
            let Some(dep_id) = dep["pkg"].as_str() else {
                continue;
            };
            if normal && seen.insert(name_of(dep_id)) {
                todo.push(dep_id.to_owned());
            }
        }
    }
    seen
}

/// A resolved package id's name.
fn id_name(metadata: &Value, id: &str) -> String {
    metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["id"] == id)
        .and_then(|p| p["name"].as_str())
        .unwrap_or(id)
        .to_owned()
}

/// Where the feature would reach a build that is not a test's: a default feature that enables it
/// (in the package or in a dependency), or a normal or build dependency that asks for it. Each as
/// `package: why`.
pub fn leaks(metadata: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or("?");
        for reached in defaults(package) {
            if reached == FEATURE || reached.ends_with(&format!("/{FEATURE}")) {
                out.push(format!("{name}: its default features enable `{reached}`"));
            }
        }
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            if dep["kind"].as_str() == Some("dev") {
                continue;
            }
            let asks = dep["features"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|f| f.as_str() == Some(FEATURE));
            if asks {
                out.push(format!(
                    "{name}: its {} dependency on {} asks for `{FEATURE}`",
                    dep["kind"].as_str().unwrap_or("normal"),
                    dep["name"].as_str().unwrap_or("?")
                ));
            }
        }
    }
    out
}

/// Every feature entry `default` reaches within its package (`a` → `a`'s entries, and so on).
fn defaults(package: &Value) -> BTreeSet<String> {
    let features = &package["features"];
    let mut reached = BTreeSet::new();
    let mut todo = vec!["default".to_owned()];
    while let Some(next) = todo.pop() {
        for entry in features[&next].as_array().into_iter().flatten() {
            let Some(entry) = entry.as_str() else {
                continue;
            };
            if reached.insert(entry.to_owned()) && features.get(entry).is_some() {
                todo.push(entry.to_owned());
            }
        }
    }
    reached
}

/// The packages that declare the feature.
pub fn declaring(metadata: &Value) -> Vec<String> {
    metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["features"].get(FEATURE).is_some())
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect()
}

/// The items of a crate root (`source`) that name the variants' module (`mod mutant`, a `use` of
/// it, an item with `Mutant` in its signature is the module's own) without being compiled
/// behind the feature: each would fail a build without it.
pub fn ungated(source: &str) -> Result<Vec<String>, syn::Error> {
    let file = syn::parse_file(source)?;
    let gated = |attrs: &[syn::Attribute]| {
        attrs.iter().any(|a| {
            a.path().is_ident("cfg")
                && a.parse_args::<syn::MetaNameValue>().is_ok_and(|m| {
                    m.path.is_ident("feature")
                        && matches!(&m.value, syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) if s.value() == FEATURE)
                })
        })
    };
    let mut out = Vec::new();
    for item in &file.items {
        let (attrs, names_it, what) = match item {
            syn::Item::Mod(m) => (&m.attrs, m.ident == "mutant", format!("mod {}", m.ident)),
            syn::Item::Use(u) => {
                let names = use_names(&u.tree);
                let names_it = names.iter().any(|n| n == "mutant");
                (&u.attrs, names_it, format!("use {}", names.join("::")))
            }
            _ => continue,
        };
        if names_it && !gated(attrs) {
            out.push(what);
        }
    }
    Ok(out)
}

/// The identifiers of a `use` tree, in order (`mutant::{A, B}` → `mutant`, `A`, `B`).
fn use_names(tree: &syn::UseTree) -> Vec<String> {
    match tree {
        syn::UseTree::Path(p) => std::iter::once(p.ident.to_string())
            .chain(use_names(&p.tree))
            .collect(),
        syn::UseTree::Name(n) => vec![n.ident.to_string()],
        syn::UseTree::Rename(r) => vec![r.ident.to_string()],
        syn::UseTree::Group(g) => g.items.iter().flat_map(use_names).collect(),
        syn::UseTree::Glob(_) => vec!["*".to_owned()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_default_or_a_normal_dependency_that_enables_the_variants_is_caught() {
        let metadata = json!({"packages": [
            {"name": "server", "features": {"mutants": [], "default": ["extra"], "extra": ["mutants"]},
             "dependencies": []},
            {"name": "cli", "features": {},
             "dependencies": [
                 {"name": "server", "kind": null, "features": ["mutants"]},
                 {"name": "server", "kind": "dev", "features": ["mutants"]}
             ]},
            {"name": "other", "features": {"default": ["server/mutants"]}, "dependencies": []}
        ]});
        assert_eq!(
            leaks(&metadata),
            [
                "server: its default features enable `mutants`",
                "cli: its normal dependency on server asks for `mutants`",
                "other: its default features enable `server/mutants`"
            ]
        );
        assert_eq!(declaring(&metadata), ["server"]);
    }

    #[test]
    fn a_variant_module_outside_the_feature_is_caught() {
        let lib = "#[cfg(feature = \"mutants\")]\nmod mutant;\n\
                   #[cfg(feature = \"other\")]\npub use mutant::Mutant;\n\
                   #[cfg(feature = \"mutants\")]\npub use mutant::Other;\npub mod state;\n";
        assert_eq!(ungated(lib).unwrap(), ["use mutant::Mutant"]);
    }
}
