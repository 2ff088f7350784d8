//! Everything derived from the contract, deterministic byte for byte so the checked-in copies
//! can be compared with a fresh rendering.

mod images;
mod language;
mod markdown;
mod openapi;

use std::path::Path;

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;

use crate::model::Contract;
use crate::{ErrorCode, Pool, Problem, Stage};

pub use language::language_md;
pub use markdown::{changelog_md, concurrency_md, service_md};
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
            path: "docs/changelog.md",
            contents: changelog_md(crate::Changelog::embedded()),
        },
        Output {
            path: "docs/language.md",
            contents: language_md(&contract_schema(), contract),
        },
        Output {
            path: "spec/openapi.json",
            contents: pretty(&openapi(contract)),
        },
        Output {
            path: "spec/schemas/contract.schema.json",
            contents: pretty(&contract_schema()),
        },
        Output {
            path: "spec/schemas/problem.schema.json",
            contents: pretty(&root_schema::<Problem>()),
        },
        Output {
            path: "spec/schemas/relay-request.schema.json",
            contents: pretty(&relay_request_schema()),
        },
        Output {
            path: "spec/schemas/relay-response.schema.json",
            contents: pretty(&relay_response_schema()),
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

/// The language's schema, `spec/schemas/contract.schema.json`: what a contract *document* may
/// say, so a field the loader defaults (a pool's `counts`, an error's `retry_after`, `load`) is
/// optional in it as it is in the rules; a document valid against it is one the loader parses.
pub fn contract_schema() -> serde_json::Value {
    received_schema::<Contract>()
}

/// The relay request envelope's schema: `spec/schemas/relay-request.schema.json` and the OpenAPI
/// document's `x-plimsoll.frames.request` alike (what a server receives: `headers` and `body` may
/// be left out).
pub fn relay_request_schema() -> serde_json::Value {
    received_schema::<crate::relay::RelayRequest>()
}

/// The relay response frame's schema: `spec/schemas/relay-response.schema.json` and the OpenAPI
/// document's `x-plimsoll.frames.response` alike.
pub fn relay_response_schema() -> serde_json::Value {
    root_schema::<crate::relay::RelayResponse>()
}

/// The schema of what a server *receives* (a relay envelope): fields with a serde default may be
/// left out, as the OpenAPI document's frame schemas (schemars' deserialize view) say too.
pub fn received_schema<T: JsonSchema>() -> serde_json::Value {
    SchemaSettings::draft2020_12()
        .for_deserialize()
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
    let ExampleFailure {
        detail,
        failed_stage,
        completed_stages,
    } = example_failure(contract, code);
    Problem {
        type_uri: code.type_uri(),
        title: spec.title.clone(),
        status: spec.status,
        detail: detail.clone(),
        error: detail,
        code,
        failed_stage,
        completed_stages,
        request_id: "01JDQ3V8K2M6Z9X4T7R5N0B1C8".into(),
    }
}

/// What an example body says went wrong, and where in the pipeline.
struct ExampleFailure {
    detail: String,
    failed_stage: Option<Stage>,
    completed_stages: Option<Vec<Stage>>,
}

impl ExampleFailure {
    /// A request answered before any stage ran: the body names no stage.
    fn unstaged(detail: String) -> Self {
        ExampleFailure {
            detail,
            failed_stage: None,
            completed_stages: None,
        }
    }

    /// A request stopped in `stage`, after the stages `completed`.
    fn staged(detail: String, stage: Stage, completed: &[Stage]) -> Self {
        ExampleFailure {
            detail,
            failed_stage: Some(stage),
            completed_stages: Some(completed.to_vec()),
        }
    }
}

/// The failure each code's example describes, told with the contract's own numbers.
fn example_failure(contract: &Contract, code: ErrorCode) -> ExampleFailure {
    let api = contract.api();
    let pool = contract.pool(Pool::Digitize);
    let digitize = pool.stages;
    let density = &api.digitize.params.density_mm;
    match code {
        ErrorCode::Overloaded => ExampleFailure::unstaged(format!(
            "all {} digitize workers are busy and the queue is full; retry after 2 s",
            pool.workers
        )),
        ErrorCode::Timeout => ExampleFailure::staged(
            format!(
                "digitize exceeded its {} ms timeout during {}",
                pool.deadline.unwrap_or_default().as_millis(),
                digitize[3]
            ),
            digitize[3],
            &digitize[..3],
        ),
        ErrorCode::UploadTimeout => ExampleFailure::unstaged(format!(
            "the request body did not arrive within {} ms",
            contract.upload().read_timeout_ms
        )),
        ErrorCode::MemoryCapExceeded => ExampleFailure::staged(
            format!(
                "the image needs an estimated 1536 MB, over the {} MB cap",
                pool.memory_cap_mb.unwrap_or_default()
            ),
            Stage::Decode,
            &[],
        ),
        ErrorCode::StageFailed => ExampleFailure::staged(
            format!("{} failed: region table overflow", digitize[2]),
            digitize[2],
            &digitize[..2],
        ),
        ErrorCode::MalformedImage => {
            ExampleFailure::staged("the PNG data is truncated".into(), Stage::Decode, &[])
        }
        ErrorCode::UnsupportedFormat => {
            ExampleFailure::staged("expected PNG or JPEG, found GIF".into(), Stage::Decode, &[])
        }
        ErrorCode::PayloadTooLarge => ExampleFailure::unstaged(format!(
            "the upload is larger than {} bytes",
            api.digitize.max_upload_bytes
        )),
        ErrorCode::EmptyBody => ExampleFailure::unstaged("the request body is empty".into()),
        ErrorCode::InvalidParameter => ExampleFailure::unstaged(format!(
            "`density_mm` must be between {} and {} mm, got 5",
            density.min, density.max
        )),
        ErrorCode::MalformedDesign => ExampleFailure::staged(
            "stitches[3].cmd: unknown variant `sew`".into(),
            Stage::Parse,
            &[],
        ),
        ErrorCode::HooksDisabled => ExampleFailure::unstaged(format!(
            "{} is only honoured when {}=1",
            contract.hooks().header,
            contract.hooks().env
        )),
        ErrorCode::NotFound => ExampleFailure::unstaged("no route for GET /v2/digitize".into()),
        ErrorCode::UpgradeRequired => ExampleFailure::unstaged(format!(
            "{} is a WebSocket endpoint: send a WebSocket upgrade request",
            api.relay.path
        )),
    }
}
