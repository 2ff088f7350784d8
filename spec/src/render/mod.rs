//! Everything derived from the contract, deterministic byte for byte so the checked-in copies
//! can be compared with a fresh rendering.

mod images;
mod markdown;
mod openapi;

use std::path::Path;

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;

use crate::model::Contract;
use crate::{ErrorCode, Problem, Stage};

pub use markdown::concurrency_md;
pub use openapi::{hook_pattern, openapi};

/// A generated file: its path relative to the repository root and its contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// Where the file is checked in, relative to the repository root.
    pub path: &'static str,
    /// What the file must hold, byte for byte.
    pub contents: String,
}

/// Every generated file of the repository.
pub fn outputs(contract: &Contract) -> Vec<Output> {
    vec![
        Output {
            path: "docs/concurrency.md",
            contents: concurrency_md(contract),
        },
        Output {
            path: "spec/openapi.json",
            contents: pretty(&openapi(contract)),
        },
        Output {
            path: "spec/schemas/contract.schema.json",
            contents: pretty(&root_schema::<Contract>()),
        },
        Output {
            path: "spec/schemas/problem.schema.json",
            contents: pretty(&root_schema::<Problem>()),
        },
        Output {
            path: "spec/schemas/relay-request.schema.json",
            contents: pretty(&root_schema::<crate::relay::RelayRequest>()),
        },
        Output {
            path: "spec/schemas/relay-response.schema.json",
            contents: pretty(&root_schema::<crate::relay::RelayResponse>()),
        },
    ]
}

/// The generated files under `root` that differ from a fresh rendering (missing counts).
pub fn stale(contract: &Contract, root: &Path) -> Vec<&'static str> {
    outputs(contract)
        .into_iter()
        .filter(|o| std::fs::read_to_string(root.join(o.path)).ok().as_deref() != Some(&o.contents))
        .map(|o| o.path)
        .collect()
}

/// Writes every generated file under `root`; returns the paths that changed.
pub fn write_all(contract: &Contract, root: &Path) -> std::io::Result<Vec<&'static str>> {
    let mut changed = Vec::new();
    for o in outputs(contract) {
        let path = root.join(o.path);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(&o.contents) {
            continue;
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, &o.contents)?;
        changed.push(o.path);
    }
    Ok(changed)
}

/// A JSON Schema (draft 2020-12) document for `T`, as serialized.
pub fn root_schema<T: JsonSchema>() -> serde_json::Value {
    SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value()
}

fn pretty(value: &serde_json::Value) -> String {
    let mut s = serde_json::to_string_pretty(value).expect("JSON values serialize");
    s.push('\n');
    s
}

/// The example body for an error code: what docs and OpenAPI show, and what the schema test
/// validates.
pub fn example_problem(contract: &Contract, code: ErrorCode) -> Problem {
    let spec = contract.error(code);
    let digitize = &contract.stages.digitize;
    let api = &contract.api;
    let density = &api.digitize.params.density_mm;
    let (detail, failed, completed) = match code {
        ErrorCode::Overloaded => (
            format!(
                "all {} digitize workers are busy and the queue is full; retry after 2 s",
                contract.clauses.t1.value.digitize_workers
            ),
            None,
            None,
        ),
        ErrorCode::Timeout => (
            format!(
                "digitize exceeded its {} ms timeout during {}",
                contract.clauses.b1.value.digitize_timeout_ms, digitize[3]
            ),
            Some(digitize[3]),
            Some(digitize[..3].to_vec()),
        ),
        ErrorCode::UploadTimeout => (
            format!(
                "the request body did not arrive within {} ms",
                contract.clauses.b1.value.upload_read_timeout_ms
            ),
            None,
            None,
        ),
        ErrorCode::MemoryCapExceeded => (
            format!(
                "the image needs an estimated 1536 MB, over the {} MB cap",
                contract.clauses.b2.value.memory_cap_mb
            ),
            Some(Stage::Decode),
            Some(vec![]),
        ),
        ErrorCode::StageFailed => (
            format!("{} failed: region table overflow", digitize[2]),
            Some(digitize[2]),
            Some(digitize[..2].to_vec()),
        ),
        ErrorCode::MalformedImage => (
            "the PNG data is truncated".into(),
            Some(Stage::Decode),
            Some(vec![]),
        ),
        ErrorCode::UnsupportedFormat => (
            "expected PNG or JPEG, found GIF".into(),
            Some(Stage::Decode),
            Some(vec![]),
        ),
        ErrorCode::PayloadTooLarge => (
            format!(
                "the upload is larger than {} bytes",
                api.digitize.max_upload_bytes
            ),
            None,
            None,
        ),
        ErrorCode::EmptyBody => ("the request body is empty".into(), None, None),
        ErrorCode::InvalidParameter => (
            format!(
                "`density_mm` must be between {} and {} mm, got 5",
                density.min, density.max
            ),
            None,
            None,
        ),
        ErrorCode::MalformedDesign => (
            "stitches[3].cmd: unknown variant `sew`".into(),
            Some(Stage::Parse),
            Some(vec![]),
        ),
        ErrorCode::HooksDisabled => (
            format!(
                "{} is only honoured when {}=1",
                contract.hooks.header, contract.hooks.env
            ),
            None,
            None,
        ),
        ErrorCode::NotFound => ("no route for GET /v2/digitize".into(), None, None),
        ErrorCode::UpgradeRequired => (
            format!(
                "{} is a WebSocket endpoint: send a WebSocket upgrade request",
                api.relay.path
            ),
            None,
            None,
        ),
    };
    Problem {
        type_uri: code.type_uri(),
        title: spec.title.clone(),
        status: spec.status,
        detail: detail.clone(),
        error: detail,
        code,
        failed_stage: failed,
        completed_stages: completed,
        request_id: "01JDQ3V8K2M6Z9X4T7R5N0B1C8".into(),
    }
}
