//! Recipe bodies read from files beside the contract (`body_file`): a binary body (an image,
//! an archive) that TOML cannot hold as text. They are read once, when the contract is loaded
//! from its file, each bounded in size and confined to the contract's folder: a contract is user
//! input, and what a body file holds is sent to the target.

use std::io::Read as _;
use std::path::Path;
use std::sync::Arc;

use crate::model::{Contract, Recipe};

/// The largest body file: a large upload's worth, far below what would strain the checker.
pub const MAX_BODY_FILE_BYTES: u64 = 16 << 20;
/// The most all of a contract's body files may hold together.
pub const MAX_BODY_FILES_BYTES: u64 = 64 << 20;

impl Contract {
    /// Every request the contract has the checker send, by its dotted path: each pool's hold
    /// request, bad requests and over-cap requests, and each rate limit's request.
    pub fn recipes_mut(&mut self) -> Vec<(String, &mut Recipe)> {
        let mut out = Vec::new();
        for (name, pool) in &mut self.pools {
            if let Some(hold) = &mut pool.hold {
                out.push((format!("pools.{name}.hold.request"), &mut hold.request));
            }
            for (list, requests) in [
                ("bad_requests", &mut pool.bad_requests),
                ("over_cap", &mut pool.over_cap),
            ] {
                for (i, r) in requests.iter_mut().enumerate() {
                    out.push((format!("pools.{name}.{list}.{i}.request"), &mut r.request));
                }
            }
        }
        for (name, limit) in &mut self.rate_limits {
            out.push((format!("rate_limits.{name}.request"), &mut limit.request));
        }
        out
    }
}

/// Reads every recipe's `body_file` from `folder` (the contract's), or says for each one that
/// cannot be read why: its field's dotted path, and the reason.
pub(crate) fn read_body_files(
    contract: &mut Contract,
    folder: &Path,
) -> Result<(), Vec<(String, String)>> {
    let mut problems = Vec::new();
    let mut total = 0u64;
    for (at, recipe) in contract.recipes_mut() {
        let Some(file) = recipe.body_file.clone() else {
            continue;
        };
        let field = format!("{at}.body_file");
        match read_one(folder, &file, MAX_BODY_FILES_BYTES.saturating_sub(total)) {
            Ok(bytes) => {
                total += bytes.len() as u64;
                recipe.body_bytes = Some(Arc::from(bytes));
            }
            Err(message) => problems.push((field, message)),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// The bytes of `file` in `folder`, if it is a file inside the folder (its links resolved) of
/// at most [`MAX_BODY_FILE_BYTES`] and `room`.
fn read_one(folder: &Path, file: &str, room: u64) -> Result<Vec<u8>, String> {
    let cant = |e: std::io::Error| format!("`{file}` cannot be read: {e}");
    let root = folder.canonicalize().map_err(cant)?;
    let path = root.join(file).canonicalize().map_err(cant)?;
    if !path.starts_with(&root) {
        return Err(format!("`{file}` leads out of the contract's folder"));
    }
    let limit = MAX_BODY_FILE_BYTES.min(room);
    let mut bytes = Vec::new();
    std::fs::File::open(&path)
        .map_err(cant)?
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(cant)?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "`{file}` is larger than {limit} bytes (a body file is at most {MAX_BODY_FILE_BYTES}, \
             all of them together at most {MAX_BODY_FILES_BYTES})"
        ));
    }
    Ok(bytes)
}
