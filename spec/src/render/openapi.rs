//! OpenAPI 3.1, contract-first: built from the contract model, never from the server's routes.

use serde_json::{Map, Value, json};

use super::example_problem;
use crate::Problem;
use crate::design::Design;
use crate::model::{Contract, ErrorSpec, ParamKind};
use crate::problem::{ErrorCode, PROBLEM_CONTENT_TYPE};
use crate::relay::{RelayRequest, RelayResponse};
use crate::stage::Stage;

use super::images;

/// `X-Plimsoll-Hook` as a regular expression: exactly the ASCII values `parse_hooks` accepts, so
/// a schema-valid hook is honoured and a schema-invalid one refused. Beyond the grammar it allows
/// what the parser ignores (blanks around tokens, empty directives, an empty value) and numbers
/// as Rust reads a `u64` (a `+`, leading zeros), keeping to 19 significant digits so every
/// schema-valid number fits.
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
    let problem = generator.subschema_for::<Problem>();
    let design = generator.subschema_for::<Design>();
    let contract_schema = generator.subschema_for::<Contract>();
    let schemas = generator.take_definitions(true);
    // The relay's frames travel inside the WebSocket, not as an HTTP body, so they are inlined
    // in the operation's `x-plimsoll` rather than listed as (unreferenced) components.
    let frame_schema = |schema: schemars::Schema| {
        let mut v = serde_json::to_value(schema).expect("a schema serializes");
        if let Some(map) = v.as_object_mut() {
            map.remove("$schema");
        }
        v
    };
    let relay_request = frame_schema(schemars::schema_for!(RelayRequest));
    let relay_response = frame_schema(schemars::schema_for!(RelayResponse));

    let api = &contract.api;
    let obs = &contract.observability;
    let request_id_header = json!({
        "description": format!("F4: the request's id; a client-supplied id matching `{}` is kept.", contract.clauses.f4.value.pattern()),
        "schema": { "type": "string" }
    });
    let server_timing = json!({
        "description": format!("W3C Server-Timing with the `{}` durations in milliseconds.", obs.server_timing_metrics.join("` and `")),
        "schema": { "type": "string" },
        "example": "queue;dur=0.4, run;dur=412.9"
    });
    let retry_after = json!({
        "description": "T3: RFC 9110 delay-seconds: the p50 queue wait, rounded up, at least 1, at most the pool's timeout.",
        "schema": { "type": "integer", "minimum": contract.clauses.t3.value.min_seconds }
    });
    let upgrade = json!({
        "description": "RFC 9110: the protocol the endpoint needs (a WebSocket upgrade).",
        "schema": { "type": "string", "const": "websocket" }
    });
    let common_headers = |extra: &[(&str, &Value)]| {
        let mut headers = Map::new();
        headers.insert(obs.request_id_header.clone(), request_id_header.clone());
        for (name, h) in extra {
            headers.insert((*name).to_owned(), (*h).clone());
        }
        Value::Object(headers)
    };

    let error_responses = |endpoint: &str| {
        let mut by_status: std::collections::BTreeMap<u16, Vec<&ErrorSpec>> = Default::default();
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
                headers.push((
                    contract.clauses.t3.value.retry_after_header.as_str(),
                    &retry_after,
                ));
            }
            if errors.iter().any(|e| e.code == ErrorCode::UpgradeRequired) {
                headers.push(("Upgrade", &upgrade));
            }
            out.insert(
                status.to_string(),
                json!({
                    "description": format!("Codes: {}.", codes.join(", ")),
                    "headers": common_headers(&headers),
                    "content": { PROBLEM_CONTENT_TYPE: { "schema": problem, "examples": examples } }
                }),
            );
        }
        out
    };

    let hook_param = json!({
        "name": contract.hooks.header, "in": "header", "required": false,
        "description": format!("Test hooks, honoured only when the server runs with {}=1 (else 400 `{}`). Grammar: {}; blanks around tokens and empty directives are ignored, STAGE is a stage name, MS and MB are non-negative integers.", contract.hooks.env, contract.hooks.disabled_code, contract.hooks.grammar),
        "schema": { "type": "string", "pattern": hook_pattern() }, "example": "hold=fill:500"
    });
    let request_id_param = json!({
        "name": obs.request_id_header, "in": "header", "required": false,
        "description": "Optional client-supplied request id (F4).", "schema": { "type": "string" }
    });

    let c = &contract.clauses;
    let digitize_params: Vec<Value> = api
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
        .chain([hook_param.clone(), request_id_param.clone()])
        .collect();

    let pool_ext =
        |pool: &str, workers: u32, queue: u32, timeout_ms: u64, stages: &[crate::Stage]| {
            json!({
                "pool": pool,
                "T1": { "workers": workers },
                "T2": { "order": c.t2.value.order, "queue_capacity": queue },
                "T3": c.t3.value,
                "B1": { "timeout_ms": timeout_ms },
                "B2": c.b2.value,
                "B3": c.b3.value,
                "F1": c.f1.value,
                "F2": c.f2.value,
                "F3": c.f3.value,
                "F4": c.f4.value,
                "stages": stages
            })
        };

    let mut digitize_responses = error_responses("digitize");
    digitize_responses.insert(
        "200".into(),
        json!({
            "description": "The design: stitches in 0.1 mm with a command each.",
            "headers": common_headers(&[(obs.server_timing_header.as_str(), &server_timing)]),
            "content": { "application/json": { "schema": design } }
        }),
    );
    let mut export_responses = error_responses("export");
    let mut export_content = Map::new();
    for f in &api.export.formats {
        export_content.insert(
            f.media_type().to_owned(),
            json!({ "schema": { "type": "string" } }),
        );
    }
    export_responses.insert(
        "200".into(),
        json!({
            "description": "The machine file, as an attachment.",
            "headers": common_headers(&[
                (obs.server_timing_header.as_str(), &server_timing),
                ("Content-Disposition", &json!({ "schema": { "type": "string" }, "example": "attachment; filename=\"design.dst\"" })),
            ]),
            "content": export_content
        }),
    );

    let body_content = |types: &[String], schema: &schemars::Schema| {
        let mut m = Map::new();
        for t in types {
            m.insert(t.clone(), json!({ "schema": schema }));
        }
        Value::Object(m)
    };
    // The raw image: octets (`format: binary`), never empty, with a real image as the example.
    let image_content = |types: &[String]| {
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
    };

    let metrics_list: Vec<Value> = obs
        .metrics
        .iter()
        .map(|m| json!({ "name": m.name, "type": m.kind, "labels": m.labels }))
        .collect();
    let simple_ok = |description: &str, content: Value| json!({ "200": { "description": description, "headers": common_headers(&[]), "content": content } });

    let mut paths = Map::new();
    paths.insert(
        api.digitize.path.clone(),
        json!({ api.digitize.method.to_lowercase(): {
            "operationId": "digitize",
            "summary": api.digitize.summary,
            "description": format!(
                "The image is the raw body ({}), at most {} bytes and {} pixels. Stages: {}.",
                api.digitize.content_types.join(" or "), api.digitize.max_upload_bytes, api.digitize.max_pixels,
                contract.stages.digitize.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")),
            "parameters": digitize_params,
            "requestBody": { "required": true, "content": image_content(&api.digitize.content_types) },
            "responses": digitize_responses,
            "x-plimsoll": pool_ext("digitize", c.t1.value.digitize_workers, c.t2.value.digitize_queue_capacity, c.b1.value.digitize_timeout_ms, &contract.stages.digitize)
        }}),
    );
    paths.insert(
        api.export.path.clone(),
        json!({ api.export.method.to_lowercase(): {
            "operationId": "export",
            "summary": api.export.summary,
            "description": format!("The design JSON is the body, at most {} bytes. Stages: {}.", api.export.max_upload_bytes,
                contract.stages.export.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")),
            "parameters": [
                { "name": "format", "in": "query", "required": false, "description": "Machine file format.",
                  "schema": { "type": "string", "enum": api.export.formats, "default": api.export.default_format } },
                hook_param, request_id_param
            ],
            "requestBody": { "required": true, "content": body_content(&api.export.content_types, &design) },
            "responses": export_responses,
            "x-plimsoll": pool_ext("export", c.t1.value.export_workers, c.t2.value.export_queue_capacity, c.b1.value.export_timeout_ms, &contract.stages.export)
        }}),
    );
    let mut relay_responses = error_responses("relay");
    let switching = [
        (
            "Upgrade",
            json!({ "required": true, "schema": { "type": "string", "const": "websocket" } }),
        ),
        (
            "Connection",
            json!({ "required": true, "schema": { "type": "string", "const": "upgrade" } }),
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
    relay_responses.insert(
        "101".to_owned(),
        json!({
            "description": "Switching to the WebSocket protocol.",
            "headers": common_headers(&switching.iter().map(|(n, h)| (*n, h)).collect::<Vec<_>>())
        }),
    );
    // What the server checks of a WebSocket upgrade; any of them missing or different is 426.
    let upgrade_header = |name: &str, description: &str, schema: Value, example: &str| json!({ "name": name, "in": "header", "required": true, "description": description, "schema": schema, "example": example });
    let relay_params = json!([
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
        request_id_param
    ]);
    paths.insert(
        api.relay.path.clone(),
        json!({ "get": {
            "operationId": "relay",
            "summary": api.relay.summary,
            "description": format!(
                "A WebSocket upgrade. The client sends `RelayRequest` text frames; the server performs each against its own API on a pool of {} workers (overflow: {:?}) and answers with `RelayResponse` frames, bodies over {} bytes split into several frames, matched by `request_id`.",
                c.r1.value.relay_concurrency, c.r1.value.overflow, c.r5.value.max_frame_body_bytes),
            "parameters": relay_params,
            "responses": relay_responses,
            "x-plimsoll": {
                "R1": c.r1.value, "R2": c.r2.value, "R3": c.r3.value, "R4": c.r4.value, "R5": c.r5.value, "R6": c.r6.value,
                "frames": { "request": relay_request, "response": relay_response }
            }
        }}),
    );
    paths.insert(
        api.contract.path.clone(),
        json!({ "get": {
            "operationId": "contract",
            "summary": api.contract.summary,
            "responses": simple_ok("The contract with this deployment's overrides applied.", json!({ "application/json": { "schema": contract_schema } }))
        }}),
    );
    paths.insert(
        api.metrics.path.clone(),
        json!({ "get": {
            "operationId": "metrics",
            "summary": api.metrics.summary,
            "responses": simple_ok("Prometheus text exposition.", json!({ "text/plain": { "schema": { "type": "string" } } })),
            "x-plimsoll": { "metrics": metrics_list }
        }}),
    );
    paths.insert(
        api.healthz.path.clone(),
        json!({ "get": {
            "operationId": "healthz",
            "summary": api.healthz.summary,
            "responses": simple_ok("The server is up.", json!({ "text/plain": { "schema": { "type": "string" } } }))
        }}),
    );

    json!({
        "openapi": "3.1.0",
        "info": {
            "title": contract.contract.title,
            "version": contract.contract.version,
            "summary": contract.contract.summary,
            "license": { "name": env!("CARGO_PKG_LICENSE"), "identifier": env!("CARGO_PKG_LICENSE") },
            "description": "Generated from spec/contract.toml by `plimsoll docs`; do not edit. Every operation carries its clause values in `x-plimsoll`."
        },
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "servers": [{ "url": format!("http://127.0.0.1:{}", api.default_port) }],
        // The contract's service has no authentication: every operation is public.
        "security": [],
        "paths": paths,
        "components": { "schemas": schemas },
        "x-plimsoll": {
            "contract": contract.contract.name,
            "clauses": contract.clause_list().iter().map(|c| json!({ "id": c.id, "title": c.title, "statement": contract.text(c, c.statement) })).collect::<Vec<_>>()
        }
    })
}
