//! `plimsoll init` → edit → `plimsoll contract lint` → `plimsoll check`, as a person would run
//! them: a draft names each value still to decide with its line and is refused until each is
//! filled in; filled in, it lints clean and judges a service that knows nothing of Plimsoll.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::head::read_head;

/// Runs `plimsoll ARGS`, killed after `limit` (a hung run fails the test instead of hanging it).
fn plimsoll(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_plimsoll"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the plimsoll binary runs");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("plimsoll {args:?} ran longer than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

const QUICK: Duration = Duration::from_secs(20);

fn path_arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The 1-based lines of the draft holding a placeholder, read from its text.
fn placeholder_lines(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains("= \"TODO:") || l.contains("= 'TODO:"))
        .map(|(i, _)| i + 1)
        .collect()
}

/// The draft with each placeholder line `KEY = "TODO: …"` replaced by `KEY = VALUE`, `values`
/// by key; a placeholder the test gives no value for fails it (it would not know them all).
fn fill(text: &str, values: &[(&str, &str)]) -> String {
    text.lines()
        .map(|line| {
            let Some((key, value)) = line.split_once(" = ") else {
                return format!("{line}\n");
            };
            if !value.starts_with("\"TODO:") && !value.starts_with("'TODO:") {
                return format!("{line}\n");
            }
            let filled = values
                .iter()
                .find(|(k, _)| *k == key)
                .unwrap_or_else(|| panic!("no value for the placeholder `{line}`"))
                .1;
            format!("{key} = {filled}\n")
        })
        .collect()
}

/// The values a person decides for one pool of a slow service: 2 at once, no queue, 503.
const SLOW_SERVICE: [(&str, &str); 8] = [
    ("name", "\"slow\""),
    ("title", "\"A slow service\""),
    (
        "summary",
        "\"At most 2 requests at once; the next is refused with 503.\"",
    ),
    ("workers", "2"),
    ("queue.capacity", "0"),
    ("queue.order", "\"unordered\""),
    ("at_least_ms", "500"),
    ("status", "503"),
];

#[test]
fn a_draft_from_a_route_names_each_placeholder_and_lints_clean_once_filled() {
    let dir = tempfile::tempdir().unwrap();
    let draft = dir.path().join("draft.toml");
    let out = plimsoll(
        &["init", "--route", "GET /slow", "-o", path_arg(&draft)],
        QUICK,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = std::fs::read_to_string(&draft).unwrap();
    assert!(text.starts_with("#:schema "), "{text}");
    let lines = placeholder_lines(&text);
    assert_eq!(lines.len(), SLOW_SERVICE.len(), "{text}");

    let out = plimsoll(&["contract", "lint", path_arg(&draft)], QUICK);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let named: Vec<usize> = stdout
        .lines()
        .map(|l| {
            let rest = l.strip_prefix(&format!("{}:", draft.display())).unwrap();
            rest.split(':').next().unwrap().parse().unwrap()
        })
        .collect();
    assert_eq!(named, lines, "{stdout}");
    for field in ["pools.get_slow.workers", "refusals.get_slow.status"] {
        assert!(stdout.contains(&format!("`{field}`")), "{stdout}");
    }

    // `check` refuses the draft too, naming the same lines, before it reaches any target.
    let out = plimsoll(
        &[
            "check",
            "--contract",
            path_arg(&draft),
            "--target",
            "http://127.0.0.1:9",
        ],
        QUICK,
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("line {}: `contract.name`", lines[0])),
        "{stderr}"
    );

    // Another init over it is refused without --force.
    let out = plimsoll(
        &["init", "--route", "GET /slow", "-o", path_arg(&draft)],
        QUICK,
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));

    let filled = dir.path().join("filled.toml");
    std::fs::write(&filled, fill(&text, &SLOW_SERVICE)).unwrap();
    let out = plimsoll(&["contract", "lint", path_arg(&filled)], QUICK);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn lint_names_the_line_of_a_value_out_of_range_and_refuses_a_file_that_is_not_toml() {
    let dir = tempfile::tempdir().unwrap();
    let out = plimsoll(&["init", "--route", "GET /slow"], QUICK);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let mut values = SLOW_SERVICE;
    values[3] = ("workers", "0");
    let text = fill(&String::from_utf8(out.stdout).unwrap(), &values);
    let line = text.lines().position(|l| l == "workers = 0").unwrap() + 1;
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, &text).unwrap();
    let out = plimsoll(&["contract", "lint", path_arg(&bad)], QUICK);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains(&format!(
            "{}:{line}: `pools.get_slow.workers`: 0 is out of range",
            bad.display()
        )),
        "{stdout}"
    );

    // The contracts of the repository are clean.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for contract in ["spec/contract.toml", "examples/nginx/contract.toml"] {
        let out = plimsoll(&["contract", "lint", path_arg(&root.join(contract))], QUICK);
        assert_eq!(out.status.code(), Some(0), "{contract}: {out:?}");
    }

    let prose = dir.path().join("notes.toml");
    std::fs::write(&prose, "workers: two, maybe three\n").unwrap();
    let out = plimsoll(&["contract", "lint", path_arg(&prose)], QUICK);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is not TOML") && stderr.contains("line 1"),
        "{stderr}"
    );

    let out = plimsoll(
        &[
            "contract",
            "lint",
            path_arg(&dir.path().join("missing.toml")),
        ],
        QUICK,
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
}

#[test]
fn a_draft_from_openapi_has_a_pool_per_operation_its_requests_from_the_examples() {
    let dir = tempfile::tempdir().unwrap();
    let openapi = dir.path().join("openapi.json");
    let doc = serde_json::json!({
        "openapi": "3.1.0",
        "info": { "title": "Orders API", "version": "1" },
        "paths": {
            "/orders/{id}": {
                "parameters": [
                    { "name": "id", "in": "path", "required": true,
                      "schema": { "type": "integer", "example": 42 } }
                ],
                "get": { "summary": "One order", "responses": { "200": { "description": "it" } } }
            },
            "/orders": {
                "post": {
                    "operationId": "createOrder",
                    "requestBody": { "$ref": "#/components/requestBodies/Order" },
                    "responses": { "201": { "description": "made" } }
                }
            }
        },
        "components": { "requestBodies": { "Order": { "content": {
            "application/json": { "example": { "item": "tea", "count": 2 } }
        } } } }
    });
    std::fs::write(&openapi, doc.to_string()).unwrap();
    let out = plimsoll(&["init", "--openapi", path_arg(&openapi)], QUICK);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let draft: toml::Value = toml::from_str(&text).unwrap();
    let pools = draft["pools"].as_table().unwrap();
    assert_eq!(
        pools.keys().collect::<Vec<_>>(),
        ["get_orders_id", "post_orders"],
        "{text}"
    );
    assert_eq!(draft["contract"]["name"].as_str(), Some("orders-api"));
    let get = &pools["get_orders_id"];
    assert_eq!(get["routes"][0]["path"].as_str(), Some("/orders/{id}"));
    assert_eq!(get["hold"]["request"]["path"].as_str(), Some("/orders/42"));
    let post = &pools["post_orders"]["hold"]["request"];
    let body: Value = serde_json::from_str(post["body"].as_str().unwrap()).unwrap();
    assert_eq!(body, serde_json::json!({ "item": "tea", "count": 2 }));
    assert_eq!(
        post["headers"]["Content-Type"].as_str(),
        Some("application/json")
    );
    assert_eq!(post["status"].as_integer(), Some(201));

    // Filled in, the OpenAPI draft is a contract.
    let filled = dir.path().join("orders.toml");
    std::fs::write(&filled, fill(&text, &SLOW_SERVICE)).unwrap();
    let out = plimsoll(&["contract", "lint", path_arg(&filled)], QUICK);
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    // Grouped, the two operations share one pool.
    let out = plimsoll(
        &["init", "--openapi", path_arg(&openapi), "--group", "orders"],
        QUICK,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let draft: toml::Value = toml::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let pools = draft["pools"].as_table().unwrap();
    assert_eq!(pools.keys().collect::<Vec<_>>(), ["orders"]);
    assert_eq!(pools["orders"]["routes"].as_array().unwrap().len(), 2);

    // Not JSON: refused, saying why.
    std::fs::write(&openapi, "openapi: 3.1.0\n").unwrap();
    let out = plimsoll(&["init", "--openapi", path_arg(&openapi)], QUICK);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("JSON only"));
}

#[test]
fn a_body_file_is_the_requests_body_and_one_too_large_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.json");
    std::fs::write(&body, "{\"q\": \"tea\"}\n").unwrap();
    let out = plimsoll(
        &[
            "init",
            "--route",
            "POST /v1/search",
            "--body",
            path_arg(&body),
        ],
        QUICK,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let draft: toml::Value = toml::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let request = &draft["pools"]["post_v1_search"]["hold"]["request"];
    assert_eq!(request["body"].as_str(), Some("{\"q\": \"tea\"}\n"));
    assert_eq!(request["method"].as_str(), Some("POST"));

    std::fs::write(&body, "x".repeat(64 * 1024 + 1)).unwrap();
    let out = plimsoll(
        &[
            "init",
            "--route",
            "POST /v1/search",
            "--body",
            path_arg(&body),
        ],
        QUICK,
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("at most 65536 bytes"));

    let out = plimsoll(&["init", "--route", "search"], QUICK);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not 'METHOD PATH'"));
}

/// A service that knows nothing of Plimsoll: each request to `/slow` is answered after 500 ms,
/// at most 2 at once; one more is refused at once with 503 (a `std::sync` counter of slots).
fn limited_slow_service() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let busy = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let busy = Arc::clone(&busy);
            std::thread::spawn(move || answer(stream, &busy));
        }
    });
    addr
}

fn answer(mut stream: TcpStream, busy: &AtomicUsize) {
    let Some(head) = read_head(&mut stream) else {
        return;
    };
    if !head.starts_with(b"GET /slow ") {
        let _ = stream
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return;
    }
    let taken = busy
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n < 2).then_some(n + 1)
        })
        .is_ok();
    if !taken {
        let _ = stream.write_all(
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbusy",
        );
        return;
    }
    std::thread::sleep(Duration::from_millis(500));
    busy.fetch_sub(1, Ordering::SeqCst);
    let _ =
        stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
}

#[test]
fn init_then_lint_then_check_passes_t1_on_a_service_that_knows_nothing_of_plimsoll() {
    let dir = tempfile::tempdir().unwrap();
    let draft = dir.path().join("draft.toml");
    let out = plimsoll(
        &["init", "--route", "GET /slow", "-o", path_arg(&draft)],
        QUICK,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = std::fs::read_to_string(&draft).unwrap();
    std::fs::write(&draft, fill(&text, &SLOW_SERVICE)).unwrap();
    let out = plimsoll(&["contract", "lint", path_arg(&draft)], QUICK);
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    let url = format!("http://{}", limited_slow_service());
    let report = dir.path().join("report.json");
    let out = plimsoll(
        &[
            "check",
            "--quiet",
            "--contract",
            path_arg(&draft),
            "--target",
            &url,
            "--json",
            path_arg(&report),
        ],
        Duration::from_secs(90),
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let t1 = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "T1")
        .unwrap();
    assert_eq!(t1["verdict"], "pass", "{t1}");
    assert!(
        t1["observed"]
            .as_str()
            .unwrap()
            .contains("2 ran at once, 0 queued"),
        "{t1}"
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}
