//! OpenAPI 3.1, contract-first: built from the contract model, never from the server's routes.

use std::collections::BTreeMap;

use schemars::{Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

use super::example_problem;
use crate::design::Design;
use crate::model::{Contract, Endpoint, ErrorSpec, ParamKind};
use crate::problem::{ErrorCode, PROBLEM_CONTENT_TYPE};
use crate::stage::Stage;
use crate::{Pool, Problem};

use super::images;

/// `X-Plimsoll-Hook` as a regular expression: the contract's `[hooks].grammar` (blanks around
/// tokens, empty directives, a `+` and leading zeros, at most 19 significant digits), which is
/// exactly what `parse_hooks` accepts, so a schema-valid hook is honoured and a schema-invalid one
/// refused (`spec/tests/openapi.rs`).
pub fn hook_pattern() -> String {
    let ws = "[ \\t]*";
    let stage = format!("(?:{})", Stage::ALL.map(Stage::as_str).join("|"));
    let number = "\\+?0*[0-9]{1,19}";
    let directive = format!(
        "(?:hold{ws}={ws}{stage}{ws}:{ws}{number}|(?:fail|panic){ws}={ws}{stage}|alloc{ws}={ws}{number})"
    );
    format!("^{ws}(?:{directive})?{ws}(?:;{ws}(?:{directive})?{ws})*$")
}

/// The OpenAPI 3.1 document of the contract's API.
pub fn openapi(contract: &Contract) -> Value {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "/components/schemas".into())
        .for_serialize()
        .into_generator();
    let parts = Parts::new(contract, &mut generator);
    let schemas = generator.take_definitions(true);
    json!({
        "openapi": "3.1.0",
        "info": info(contract),
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "servers": [{ "url": format!("http://127.0.0.1:{}", contract.api().default_port) }],
        // The contract's service has no authentication: every operation is public.
        "security": [],
        "paths": parts.paths(),
        "components": { "schemas": schemas },
        "x-plimsoll": {
            "contract": contract.contract.name,
            // B4's bounds hold for every connection, whatever operation it carries.
            "connections": contract.connections(),
            "clauses": contract.clause_list().iter().map(|c| json!({ "id": c.id, "title": c.title, "statement": contract.text(c, c.statement) })).collect::<Vec<_>>()
        }
    })
}

/// `info`: the contract's title, version and summary.
fn info(contract: &Contract) -> Value {
    json!({
        "title": contract.contract.title,
        "version": contract.contract.version,
        "summary": contract.contract.summary,
        "license": { "name": env!("CARGO_PKG_LICENSE"), "identifier": env!("CARGO_PKG_LICENSE") },
        "description": "Generated from spec/contract.toml by `plimsoll docs`; do not edit. Every operation carries its clause values in `x-plimsoll`."
    })
}

/// What the operations share: the contract, references to the component schemas, and the
/// headers and parameters more than one operation carries.
struct Parts<'a> {
    contract: &'a Contract,
    /// `$ref` to the error body's schema.
    problem: Schema,
    /// `$ref` to the design's schema (digitize's answer, export's body).
    design: Schema,
    /// `$ref` to the contract's schema (what `/v1/contract` serves).
    contract_schema: Schema,
    /// The request id response header (F4), on every response.
    request_id_header: Value,
    /// The test-hook request header, a parameter of both pipelines.
    hook_param: Value,
    /// The client-supplied request id, a parameter of every pipeline and the relay.
    request_id_param: Value,
}

impl<'a> Parts<'a> {
    /// Registers the component schemas with `generator` (in the order that names them) and
    /// builds the shared headers and parameters.
    fn new(contract: &'a Contract, generator: &mut SchemaGenerator) -> Self {
        let obs = contract.observability();
        let hooks = contract.hooks();
        Parts {
            contract,
            problem: generator.subschema_for::<Problem>(),
            design: generator.subschema_for::<Design>(),
            contract_schema: generator.subschema_for::<Contract>(),
            request_id_header: json!({
                "description": format!("F4: the request's id; a client-supplied id matching `{}` is kept.", contract.clauses().f4.value.pattern()),
                "schema": { "type": "string" }
            }),
            hook_param: json!({
                "name": hooks.header, "in": "header", "required": false,
                "description": format!("Test hooks, honoured only when the server runs with {}=1 (else 400 `{}`). Grammar (ABNF, RFC 5234 and 7405), the contract's `hooks.grammar`:\n\n{}", hooks.env, hooks.disabled_code, hooks.grammar),
                "schema": { "type": "string", "pattern": hook_pattern() }, "example": "hold=fill:500"
            }),
            request_id_param: json!({
                "name": obs.request_id_header, "in": "header", "required": false,
                "description": "Optional client-supplied request id (F4).", "schema": { "type": "string" }
            }),
        }
    }

    /// `paths`: every route of the contract's API.
    fn paths(&self) -> Map<String, Value> {
        let api = self.contract.api();
        let text = json!({ "text/plain": { "schema": { "type": "string" } } });
        let metrics_list: Vec<Value> = self
            .contract
            .observability()
            .metrics
            .iter()
            .map(|m| json!({ "name": m.name, "type": m.kind, "labels": m.labels }))
            .collect();
        let mut paths = Map::new();
        paths.insert(api.digitize.path.clone(), self.digitize_path());
        paths.insert(api.export.path.clone(), self.export_path());
        paths.insert(api.relay.path.clone(), self.relay_path());
        paths.insert(
            api.contract.path.clone(),
            self.plain_get(
                "contract",
                &api.contract,
                "The contract with this deployment's overrides applied.",
                json!({ "application/json": { "schema": self.contract_schema } }),
                None,
            ),
        );
        paths.insert(
            api.metrics.path.clone(),
            self.plain_get(
                "metrics",
                &api.metrics,
                "Prometheus text exposition.",
                text.clone(),
                Some(json!({ "metrics": metrics_list })),
            ),
        );
        paths.insert(
            api.healthz.path.clone(),
            self.plain_get("healthz", &api.healthz, "The server is up.", text, None),
        );
        paths
    }

    /// The digitize operation: the raw image in, the design out.
    fn digitize_path(&self) -> Value {
        let api = self.contract.api();
        let stages = self.contract.pool(Pool::Digitize).stages;
        let mut responses = self.error_responses("digitize");
        responses.insert(
            "200".into(),
            json!({
                "description": "The design: stitches in 0.1 mm with a command each.",
                "headers": self.headers(&[(self.contract.observability().server_timing_header.as_str(), &self.server_timing())]),
                "content": { "application/json": { "schema": self.design } }
            }),
        );
        json!({ api.digitize.method.to_lowercase(): {
            "operationId": "digitize",
            "summary": api.digitize.summary,
            "description": format!(
                "The image is the raw body ({}), at most {} bytes and {} pixels. Stages: {}.",
                api.digitize.content_types.join(" or "), api.digitize.max_upload_bytes, api.digitize.max_pixels,
                stages.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")),
            "parameters": self.digitize_params(),
            "requestBody": { "required": true, "content": image_content(&api.digitize.content_types) },
            "responses": responses,
            "x-plimsoll": self.pool_extension(Pool::Digitize)
        }})
    }

    /// Digitize's query parameters with their ranges, then the two header parameters.
    fn digitize_params(&self) -> Vec<Value> {
        self.contract
            .api()
            .digitize
            .params
            .iter()
            .into_iter()
            .map(|(name, p)| {
                let ty = match p.kind {
                    ParamKind::Number => "number",
                    ParamKind::Integer => "integer",
                };
                let num = |x: f64| match p.kind {
                    ParamKind::Integer => json!(x as i64),
                    ParamKind::Number => json!(x),
                };
                json!({
                    "name": name, "in": "query", "required": false,
                    "description": format!("{} ({})", p.description, p.unit),
                    "schema": { "type": ty, "minimum": num(p.min), "maximum": num(p.max), "default": num(p.default) }
                })
            })
            .chain([self.hook_param.clone(), self.request_id_param.clone()])
            .collect()
    }

    /// The export operation: the design in, a machine file out.
    fn export_path(&self) -> Value {
        let api = self.contract.api();
        let stages = self.contract.pool(Pool::Export).stages;
        let mut responses = self.error_responses("export");
        let mut content = Map::new();
        for f in &api.export.formats {
            content.insert(
                f.media_type().to_owned(),
                json!({ "schema": { "type": "string" } }),
            );
        }
        responses.insert(
            "200".into(),
            json!({
                "description": "The machine file, as an attachment.",
                "headers": self.headers(&[
                    (self.contract.observability().server_timing_header.as_str(), &self.server_timing()),
                    ("Content-Disposition", &json!({ "schema": { "type": "string" }, "example": "attachment; filename=\"design.dst\"" })),
                ]),
                "content": content
            }),
        );
        json!({ api.export.method.to_lowercase(): {
            "operationId": "export",
            "summary": api.export.summary,
            "description": format!("The design JSON is the body, at most {} bytes. Stages: {}.", api.export.max_upload_bytes,
                stages.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")),
            "parameters": [
                { "name": "format", "in": "query", "required": false, "description": "Machine file format.",
                  "schema": { "type": "string", "enum": api.export.formats, "default": api.export.default_format } },
                self.hook_param, self.request_id_param
            ],
            "requestBody": { "required": true, "content": body_content(&api.export.content_types, &self.design) },
            "responses": responses,
            "x-plimsoll": self.pool_extension(Pool::Export)
        }})
    }

    /// A pipeline's `x-plimsoll`: its pool's declaration (workers, queue, deadline, memory cap,
    /// cancellation, stages), the refusal a full pool answers with, the upload bounds, and the
    /// values of the failure clauses that apply to it.
    fn pool_extension(&self, pool: Pool) -> Value {
        let contract = self.contract;
        let c = contract.clauses();
        json!({
            "pool": pool.as_str(),
            "declaration": contract.pool_spec(pool),
            "refusal": contract.refusal(pool),
            "upload": { "read_timeout_ms": contract.upload().read_timeout_ms, "budget_mb": contract.upload_budget_mb() },
            "F1": c.f1.value,
            "F2": c.f2.value,
            "F3": c.f3.value,
            "F4": c.f4.value
        })
    }

    /// The relay operation: a WebSocket upgrade, with the frames it carries in `x-plimsoll`.
    fn relay_path(&self) -> Value {
        let (api, c) = (self.contract.api(), self.contract.clauses());
        // The relay's frames travel inside the WebSocket, not as an HTTP body, so they are
        // inlined in the operation's `x-plimsoll` rather than listed as (unreferenced) components.
        // They are the very schemas of `spec/schemas/relay-*.schema.json` (one function makes
        // both), less the `$schema` a nested schema does not carry.
        let frame_schema = |mut v: Value| {
            if let Some(map) = v.as_object_mut() {
                map.remove("$schema");
            }
            v
        };
        json!({ "get": {
            "operationId": "relay",
            "summary": api.relay.summary,
            "description": format!(
                "A WebSocket upgrade. The client sends `RelayRequest` text frames; the server performs each against its own API on a pool of {} workers (the rest wait their turn) and answers with `RelayResponse` frames, bodies over {} bytes split into several frames, matched by `request_id`.",
                self.contract.pool(Pool::Relay).workers, c.r5.value.max_frame_body_bytes),
            "parameters": self.relay_params(),
            "responses": self.relay_responses(),
            "x-plimsoll": {
                "pool": Pool::Relay.as_str(), "declaration": self.contract.pool_spec(Pool::Relay),
                "R2": c.r2.value, "R3": c.r3.value, "R4": c.r4.value, "R5": c.r5.value, "R6": c.r6.value,
                "frames": {
                    "request": frame_schema(super::relay_request_schema()),
                    "response": frame_schema(super::relay_response_schema())
                }
            }
        }})
    }

    /// What the server checks of a WebSocket upgrade (any of them missing or different is 426),
    /// and the request id.
    fn relay_params(&self) -> Value {
        let upgrade_header = |name: &str, description: &str, schema: Value, example: &str| json!({ "name": name, "in": "header", "required": true, "description": description, "schema": schema, "example": example });
        json!([
            upgrade_header(
                "Connection",
                "RFC 9110: names the `upgrade` connection option (any letter case).",
                json!({ "type": "string", "pattern": "[Uu][Pp][Gg][Rr][Aa][Dd][Ee]" }),
                "Upgrade"
            ),
            upgrade_header(
                "Upgrade",
                "RFC 6455: the WebSocket protocol (any letter case).",
                json!({ "type": "string", "pattern": "^[Ww][Ee][Bb][Ss][Oo][Cc][Kk][Ee][Tt]$" }),
                "websocket"
            ),
            upgrade_header(
                "Sec-WebSocket-Version",
                "RFC 6455: the protocol version; only 13 exists.",
                json!({ "type": "string", "const": "13" }),
                "13"
            ),
            upgrade_header(
                "Sec-WebSocket-Key",
                "RFC 6455: the client's nonce (base64 of 16 random bytes), hashed into `Sec-WebSocket-Accept`.",
                json!({ "type": "string" }),
                "dGhlIHNhbXBsZSBub25jZQ=="
            ),
            self.request_id_param
        ])
    }

    /// The relay's errors and its `101 Switching Protocols` with the handshake's headers.
    fn relay_responses(&self) -> Map<String, Value> {
        let mut responses = self.error_responses("relay");
        let switching = [
            (
                "Upgrade",
                json!({
                    "required": true,
                    "description": "RFC 6455: `websocket`, in any letter case (rule `routes`).",
                    "schema": { "type": "string", "pattern": "^[Ww][Ee][Bb][Ss][Oo][Cc][Kk][Ee][Tt]$" }
                }),
            ),
            (
                "Connection",
                json!({
                    "required": true,
                    "description": "RFC 9110: a list of tokens holding `upgrade`, in any letter case (rule `routes`).",
                    "schema": { "type": "string", "pattern": "[Uu][Pp][Gg][Rr][Aa][Dd][Ee]" }
                }),
            ),
            (
                "Sec-WebSocket-Accept",
                json!({
                    "required": true,
                    "description": "RFC 6455: base64 of the SHA-1 of the client's key and the protocol's GUID.",
                    "schema": { "type": "string", "pattern": "^[A-Za-z0-9+/]{27}=$" }
                }),
            ),
        ];
        responses.insert(
            "101".to_owned(),
            json!({
                "description": "Switching to the WebSocket protocol.",
                "headers": self.headers(&switching.iter().map(|(n, h)| (*n, h)).collect::<Vec<_>>())
            }),
        );
        responses
    }

    /// A `GET` route answered `200` with `content`, and no errors of its own.
    fn plain_get(
        &self,
        operation_id: &str,
        endpoint: &Endpoint,
        description: &str,
        content: Value,
        extension: Option<Value>,
    ) -> Value {
        let mut operation = json!({
            "operationId": operation_id,
            "summary": endpoint.summary,
            "responses": { "200": { "description": description, "headers": self.headers(&[]), "content": content } }
        });
        if let Some(extension) = extension {
            operation["x-plimsoll"] = extension;
        }
        json!({ "get": operation })
    }

    /// The responses of every error code `endpoint` can answer, one per status, each code an
    /// example body.
    fn error_responses(&self, endpoint: &str) -> Map<String, Value> {
        let contract = self.contract;
        let t3 = contract.retry_after();
        let retry_after = json!({
            "description": format!(
                "T3: RFC 9110 {}: the {} queue wait, rounded up, at least {}, at most the pool's timeout.",
                t3.format, t3.estimator, t3.min_seconds
            ),
            "schema": { "type": "integer", "minimum": t3.min_seconds }
        });
        let upgrade = json!({
            "description": "RFC 9110: the protocol the endpoint needs (a WebSocket upgrade).",
            "schema": { "type": "string", "const": "websocket" }
        });
        let mut by_status: BTreeMap<u16, Vec<&ErrorSpec>> = BTreeMap::new();
        for e in contract
            .errors
            .iter()
            .filter(|e| e.applies_to.iter().any(|a| a == endpoint))
        {
            by_status.entry(e.status).or_default().push(e);
        }
        let mut out = Map::new();
        for (status, errors) in by_status {
            let mut examples = Map::new();
            for e in &errors {
                examples.insert(
                    e.code.to_string(),
                    json!({ "summary": e.title, "value": example_problem(contract, e.code) }),
                );
            }
            let codes: Vec<String> = errors
                .iter()
                .map(|e| format!("`{}` ({})", e.code, e.clause))
                .collect();
            let mut headers = vec![];
            if errors.iter().any(|e| e.retry_after) {
                headers.push((contract.retry_after().header.as_str(), &retry_after));
            }
            if errors.iter().any(|e| e.code == ErrorCode::UpgradeRequired) {
                headers.push(("Upgrade", &upgrade));
            }
            out.insert(
                status.to_string(),
                json!({
                    "description": format!("Codes: {}.", codes.join(", ")),
                    "headers": self.headers(&headers),
                    "content": { PROBLEM_CONTENT_TYPE: { "schema": self.problem, "examples": examples } }
                }),
            );
        }
        out
    }

    /// A response's headers: the request id, then `extra`.
    fn headers(&self, extra: &[(&str, &Value)]) -> Value {
        let mut headers = Map::new();
        headers.insert(
            self.contract.observability().request_id_header.clone(),
            self.request_id_header.clone(),
        );
        for (name, h) in extra {
            headers.insert((*name).to_owned(), (*h).clone());
        }
        Value::Object(headers)
    }

    /// The Server-Timing response header of the two pipelines.
    fn server_timing(&self) -> Value {
        json!({
            "description": format!("W3C Server-Timing with the `{}` durations in milliseconds.", self.contract.observability().server_timing_metrics.join("` and `")),
            "schema": { "type": "string" },
            "example": "queue;dur=0.4, run;dur=412.9"
        })
    }
}

/// A request body of one of `types`, each with `schema`.
fn body_content(types: &[String], schema: &Schema) -> Value {
    let mut m = Map::new();
    for t in types {
        m.insert(t.clone(), json!({ "schema": schema }));
    }
    Value::Object(m)
}

/// The raw image body: octets (`format: binary`), never empty, with a real image as the example.
fn image_content(types: &[String]) -> Value {
    let mut m = Map::new();
    for t in types {
        let mut media = json!({
            "schema": { "type": "string", "format": "binary", "contentMediaType": t, "minLength": 1 }
        });
        if let Some(uri) = images::data_uri(t) {
            media["examples"] =
                json!({ "disc": { "summary": images::SUMMARY, "externalValue": uri } });
        }
        m.insert(t.clone(), media);
    }
    Value::Object(m)
}
