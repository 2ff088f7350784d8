//! The contract's own rules: the embedded document is valid, and each kind of broken document is
//! refused with a message naming the field and its line.

use plimsoll_spec::{Contract, ContractError, EMBEDDED_TOML, ErrorCode};

fn refused(text: &str) -> String {
    match Contract::from_toml(text, "test.toml") {
        Ok(_) => panic!("contract was accepted"),
        Err(e) => e.to_string(),
    }
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .expect("needle in contract")
        + 1
}

#[test]
fn embedded_contract_is_valid_and_carries_the_seed_values() {
    let c = Contract::from_toml(EMBEDDED_TOML, "spec/contract.toml").unwrap();
    assert_eq!(c.language, plimsoll_spec::model::LANGUAGE);
    let (digitize, export) = (&c.pools["digitize"], &c.pools["export"]);
    assert_eq!(digitize.workers, 4);
    assert_eq!(digitize.queue.capacity.places(), Some(0));
    assert_eq!(digitize.deadline_ms, Some(60_000));
    assert_eq!(export.deadline_ms, Some(30_000));
    assert_eq!(digitize.memory_cap_mb, Some(1024));
    assert_eq!(c.cancellation().stop_within_ms, 1000);
    assert_eq!(c.connections().head_timeout_ms, 10_000);
    assert_eq!(c.connections().max_connections, Some(512));
    assert_eq!(c.upload_budget_mb(), 1024);
    assert_eq!(c.pools["relay"].workers, 8);
    assert_eq!(c.pools["relay"].queue.capacity.places(), None);
    assert_eq!(c.retry_after().header, "Retry-After");
    assert_eq!(c.error(ErrorCode::Overloaded).status, 503);
    assert_eq!(c.error(ErrorCode::Timeout).status, 504);
    assert_eq!(c.error(ErrorCode::MalformedImage).status, 400);
    let ids: Vec<_> = c.clause_list().iter().map(|c| c.id).collect();
    assert_eq!(ids.len(), 18);
}

#[test]
fn an_upload_budget_below_what_the_pools_hold_is_refused() {
    let c = Contract::embedded();
    let floor_mb = c.upload_budget_floor_bytes().div_ceil(1 << 20);
    let at_floor = floor_mb.to_string();
    assert!(
        c.with_overrides(|k| (k == "UPLOAD_BUDGET_MB").then(|| at_floor.clone()))
            .is_ok(),
        "a budget of exactly the floor ({floor_mb} MB) is valid"
    );
    let below = (floor_mb - 1).to_string();
    let err = c
        .with_overrides(|k| (k == "UPLOAD_BUDGET_MB").then(|| below.clone()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("upload.budget_mb"), "{err}");
    assert!(err.contains(&format!("{floor_mb} MB")), "{err}");
    // A larger queue raises the floor: the same budget no longer fits.
    let err = c
        .with_overrides(|k| match k {
            "UPLOAD_BUDGET_MB" => Some(at_floor.clone()),
            "QUEUE_CAPACITY" => Some("4".into()),
            _ => None,
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("upload.budget_mb"), "{err}");
}

#[test]
fn missing_rationale_is_refused_naming_the_field_and_line() {
    let text = EMBEDDED_TOML;
    let start = text.find("[clauses.T1]").unwrap();
    let r = start + text[start..].find("rationale = \"").unwrap();
    let end = r + text[r..].find('\n').unwrap();
    let text = format!("{}rationale = \"\"{}", &text[..r], &text[end..]);
    let msg = refused(&text);
    let line = line_of(&text, "rationale = \"\"");
    assert!(msg.contains("clauses.T1.rationale"), "{msg}");
    assert!(msg.contains(&format!("line {line}")), "{msg}");
}

#[test]
fn a_field_missing_entirely_is_a_syntax_error_with_its_line() {
    let start = EMBEDDED_TOML.find("[clauses.T2]").unwrap();
    let r = start + EMBEDDED_TOML[start..].find("rationale = ").unwrap();
    let end = r + EMBEDDED_TOML[r..].find('\n').unwrap() + 1;
    let text = format!("{}{}", &EMBEDDED_TOML[..r], &EMBEDDED_TOML[end..]);
    let msg = refused(&text);
    assert!(msg.contains("rationale"), "{msg}");
    assert!(msg.contains("line"), "{msg}");
}

#[test]
fn duplicate_clause_id_is_refused_with_its_line() {
    let text = format!("{EMBEDDED_TOML}\n[clauses.T1]\ntitle = \"again\"\n");
    let msg = refused(&text);
    assert!(matches!(
        Contract::from_toml(&text, "t"),
        Err(ContractError::Syntax { .. })
    ));
    let line = text.lines().count() - 1;
    assert!(msg.contains("T1"), "{msg}");
    assert!(msg.contains(&format!("line {line}")), "{msg}");
}

#[test]
fn timeout_below_headroom_rule_is_refused() {
    let text = EMBEDDED_TOML.replacen("deadline_ms = 60000", "deadline_ms = 59999", 1);
    let msg = refused(&text);
    assert!(msg.contains("pools.digitize.deadline_ms"), "{msg}");
    assert!(msg.contains("headroom"), "{msg}");
    assert!(
        msg.contains(&format!("line {}", line_of(&text, "deadline_ms = 59999"))),
        "{msg}"
    );
}

#[test]
fn memory_cap_not_above_documented_peak_is_refused() {
    let text = EMBEDDED_TOML.replacen("memory_cap_mb = 1024", "memory_cap_mb = 800", 1);
    let msg = refused(&text);
    assert!(msg.contains("pools.digitize.memory_cap_mb"), "{msg}");
}

#[test]
fn unknown_source_and_unknown_field_are_refused() {
    let text = EMBEDDED_TOML.replacen(
        "doc = \"seed-003\", section = \"Decision\"",
        "doc = \"seed-999\", section = \"Decision\"",
        1,
    );
    assert!(refused(&text).contains("clauses.R1.source.doc"));
    let text = EMBEDDED_TOML.replacen("workers = 4\n", "workers = 4\nworkerz = 4\n", 1);
    assert!(refused(&text).contains("workerz"));
}

#[test]
fn an_error_code_without_status_is_refused() {
    let start = EMBEDDED_TOML.find("code = \"empty_body\"").unwrap();
    let text = EMBEDDED_TOML.replacen(&EMBEDDED_TOML[start..start + 19], "code = \"not_found\"", 1);
    let msg = refused(&text);
    assert!(
        msg.contains("`empty_body` must appear exactly once"),
        "{msg}"
    );
    assert!(
        msg.contains("`not_found` must appear exactly once"),
        "{msg}"
    );
}

#[test]
fn overrides_are_typed_and_named_in_errors() {
    let base = Contract::embedded();
    let (c, applied) = base
        .with_overrides(|k| match k {
            "WORKER_POOL_SIZE" => Some("2".into()),
            "DIGITIZE_TIMEOUT_MS" => Some("2000".into()),
            "LOG_STACK" => Some("0".into()),
            _ => None,
        })
        .unwrap();
    assert_eq!(c.pools["digitize"].workers, 2);
    assert_eq!(c.pools["digitize"].deadline_ms, Some(2000));
    assert!(!c.clauses().f3.value.stack);
    assert_eq!(applied.len(), 3);

    for (env, raw, expect) in [
        ("WORKER_POOL_SIZE", "four", "WORKER_POOL_SIZE=four"),
        ("WORKER_POOL_SIZE", "0", "pools.digitize.workers"),
        ("LOG_STACK", "maybe", "LOG_STACK=maybe"),
        ("QUEUE_CAPACITY", "-1", "QUEUE_CAPACITY=-1"),
    ] {
        let err = base
            .with_overrides(|k| (k == env).then(|| raw.to_owned()))
            .unwrap_err()
            .to_string();
        assert!(err.contains(expect), "{env}={raw}: {err}");
    }
}

#[test]
fn client_request_ids_follow_the_documented_rule() {
    let f4 = &Contract::embedded().clauses().f4.value;
    assert!(f4.accepts("build-42.step:7_a"));
    assert!(!f4.accepts(""));
    assert!(!f4.accepts("has space"));
    assert!(!f4.accepts(&"x".repeat(129)));
    assert_eq!(f4.pattern(), "^[A-Za-z0-9._:\\-]{1,128}$");
}

#[test]
fn prose_placeholders_follow_the_values() {
    let c = Contract::embedded();
    let (scaled, _) = c
        .with_overrides(|k| (k == "WORKER_POOL_SIZE").then(|| "7".to_owned()))
        .unwrap();
    let t1 = &scaled.clause_list()[0];
    assert_eq!(
        scaled.text(t1, t1.statement),
        "At most 7 digitize jobs run at once (export: 4)."
    );
    let text = EMBEDDED_TOML.replacen(
        "{pools.digitize.workers} digitize jobs",
        "{pools.digitize.workerz} digitize jobs",
        1,
    );
    assert!(refused(&text).contains("clauses.T1.statement"));
}

#[test]
fn implementation_rules_fill_dotted_paths_and_follow_overrides() {
    let c = Contract::embedded();
    let rule = |id: &str| {
        let r = c.implementation.iter().find(|r| r.id == id).unwrap();
        c.rule_text(r).unwrap()
    };
    let max_pixels = c.api().digitize.max_pixels.to_string();
    assert!(rule("memory-before-pixels").contains(&max_pixels));
    assert!(rule("alloc-hook").contains("`decode` for digitize, `parse` for export"));
    let (scaled, _) = c
        .with_overrides(|k| (k == "REQUEST_MEMORY_CAP_MB").then(|| "2048".to_owned()))
        .unwrap();
    let r = scaled
        .implementation
        .iter()
        .find(|r| r.id == "memory-estimate")
        .unwrap();
    assert!(scaled.rule_text(r).unwrap().contains("over 2048 MB"));
}

#[test]
fn a_broken_implementation_rule_is_refused_with_its_line() {
    let text = EMBEDDED_TOML.replacen("{api.contract.path}", "{api.contract.pathz}", 1);
    let msg = refused(&text);
    assert!(msg.contains("implementation.0.rule"), "{msg}");
    assert!(msg.contains("api.contract.pathz"), "{msg}");
    assert!(
        msg.contains(&format!("line {}", line_of(&text, "{api.contract.pathz}"))),
        "{msg}"
    );
    // `{field}` needs a clause: the contract endpoint's rule has none.
    let text = EMBEDDED_TOML.replacen("{api.contract.path}", "{path}", 1);
    assert!(refused(&text).contains("needs a clause"));
    // Ids are unique and well formed.
    let text = EMBEDDED_TOML.replacen("id = \"routes\"", "id = \"contract-endpoint\"", 1);
    assert!(refused(&text).contains("names two rules"));
    let text = EMBEDDED_TOML.replacen("id = \"routes\"", "id = \"Routes\"", 1);
    assert!(refused(&text).contains("implementation.1.id"));
}

#[test]
fn a_language_1_document_is_refused_with_the_upgrade_command() {
    let text = include_str!("../history/contract-1.7.0.toml");
    let msg = refused(text);
    assert!(msg.contains("contract language 1"), "{msg}");
    assert!(msg.contains("plimsoll contract upgrade test.toml"), "{msg}");
}

#[test]
fn a_pool_is_refused_for_a_queue_without_its_refusal_or_an_unknown_one() {
    let text = EMBEDDED_TOML.replacen("refusal = \"overloaded\"\n", "", 1);
    let msg = refused(&text);
    assert!(msg.contains("pools.digitize.refusal"), "{msg}");
    assert!(msg.contains("bounded queue"), "{msg}");
    let text = EMBEDDED_TOML.replacen("refusal = \"overloaded\"", "refusal = \"full\"", 1);
    assert!(refused(&text).contains("`full` is not a key of [refusals]"));
    let text = EMBEDDED_TOML.replacen(
        "queue = { capacity = \"unbounded\", order = \"fifo\" }",
        "queue = { capacity = \"unbounded\", order = \"fifo\" }\nrefusal = \"overloaded\"",
        1,
    );
    assert!(refused(&text).contains("never refuses"));
    let text = EMBEDDED_TOML.replacen("[pools.export]", "[pools.exportz]", 1);
    let msg = refused(&text);
    assert!(msg.contains("[pools.export] missing"), "{msg}");
}

/// A contract file is user input: one built to hurt gets a clear error, never a panic or a hang.
/// A million pools is refused unread by its size; hundreds of pools within the size, by their
/// count; a path pattern that could backtrack in a regular expression is not a pattern at all.
#[test]
fn a_contract_built_to_hurt_is_refused_with_a_reason() {
    let pool = "[pools.p{}]\ntitle = \"P\"\nworkers = 1\nqueue = { capacity = \"unbounded\", order = \"fifo\" }\n";
    let million: String = (0..1_000_000)
        .map(|i| pool.replace("{}", &i.to_string()))
        .collect();
    let text = format!("{EMBEDDED_TOML}\n{million}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("million.toml");
    std::fs::write(&path, &text).unwrap();
    let err = Contract::from_file(&path).unwrap_err();
    assert!(matches!(err, ContractError::TooLarge { .. }), "{err}");
    assert!(err.to_string().contains("larger than"), "{err}");

    let many: String = (0..300)
        .map(|i| pool.replace("{}", &i.to_string()))
        .collect();
    let msg = refused(&format!("{EMBEDDED_TOML}\n{many}"));
    assert!(
        msg.contains("303 entries; a contract declares at most 256"),
        "{msg}"
    );

    for path in ["/v1/(a+)+$", "/v1/{a}{b}", "v1/x", "/v1/{}"] {
        let text = EMBEDDED_TOML.replacen(
            "path = \"/v1/digitize\" }",
            &format!("path = \"{path}\" }}"),
            1,
        );
        let msg = refused(&text);
        assert!(msg.contains("pools.digitize.routes.0"), "{path}: {msg}");
    }
}

/// A pool's bad requests (F2) are recipes the checker can send, each answered with a client
/// error: a success or server-error status, a pointer that is no JSON Pointer, an unnamed one
/// and more than the contract may declare are refused, each naming its field and line.
#[test]
fn a_bad_request_is_refused_unless_the_checker_can_send_and_judge_it() {
    let second = include_str!("../../examples/rust-service/contract.toml");
    let contract = Contract::from_toml(second, "second.toml").unwrap();
    let bad = &contract.pools["search"].bad_requests;
    assert_eq!(bad.len(), 3);
    assert_eq!(bad[0].request.status, 400);
    assert_eq!(bad[0].code.as_ref().unwrap().pointer, "/code");
    assert!(bad[2].code.is_none());

    let empty = "path = \"/search?q=\", status = 400 }";
    for (from, to, field, says) in [
        (
            empty,
            "path = \"/search?q=\" }",
            "request.status",
            "200 is not a client error status",
        ),
        (
            empty,
            "path = \"/search?q=\", status = 500 }",
            "request.status",
            "500 is not a client error",
        ),
        (
            "pointer = \"/code\"",
            "pointer = \"code\"",
            "code.pointer",
            "is not a JSON Pointer",
        ),
        (
            "what = \"an empty query\"",
            "what = \" \"",
            "what",
            "names what is wrong",
        ),
    ] {
        let text = second.replacen(from, to, 1);
        let msg = refused(&text);
        let at = format!("pools.search.bad_requests.0.{field}");
        assert!(msg.contains(&at), "{to}: {msg}");
        assert!(msg.contains(says), "{to}: {msg}");
        let line = line_of(&text, to);
        assert!(msg.contains(&format!("line {line}")), "{to}: {msg}");
    }

    let one = "\n[[pools.search.bad_requests]]\nwhat = \"x\"\nrequest = { method = \"GET\", path = \"/search?q=\", status = 400 }\n";
    let text = second.replacen(
        "\n[pools.reports]",
        &format!("{}\n[pools.reports]", one.repeat(300)),
        1,
    );
    let msg = refused(&text);
    assert!(msg.contains("304 bad and over-cap requests"), "{msg}");
}

/// A pool held by a dependency the checker plays declares an environment variable name and an
/// address the checker can listen on, and holds no other way besides; each mistake is refused
/// naming its field and line.
#[test]
fn a_dependency_hold_is_refused_unless_the_checker_can_play_it() {
    let second = include_str!("../../examples/rust-service/contract.toml");
    let contract = Contract::from_toml(second, "second.toml").unwrap();
    let d = contract.pools["lookup"].hold.as_ref().unwrap();
    let dependency = d.dependency.as_ref().unwrap();
    assert_eq!(dependency.env, "LOOKUP_URL");
    assert_eq!(dependency.url(), "http://127.0.0.1:18093");
    let declared = "dependency = { env = \"LOOKUP_URL\", listen = \"127.0.0.1:18093\" }";
    assert!(second.contains(declared));
    for (to, field, says) in [
        (
            "dependency = { env = \"lookup-url\", listen = \"127.0.0.1:18093\" }",
            "pools.lookup.hold.dependency.env",
            "is not an environment variable name",
        ),
        (
            "dependency = { env = \"LOOKUP_URL\", listen = \"localhost:18093\" }",
            "pools.lookup.hold.dependency.listen",
            "is not an IP address and a port",
        ),
        (
            "dependency = { env = \"LOOKUP_URL\", listen = \"127.0.0.1:0\" }",
            "pools.lookup.hold.dependency.listen",
            "a port other than 0",
        ),
        (
            "at_least_ms = 500, dependency = { env = \"LOOKUP_URL\", listen = \"127.0.0.1:1\" }",
            "pools.lookup.hold",
            "exactly one",
        ),
    ] {
        let text = second.replacen(declared, to, 1);
        let msg = refused(&text);
        assert!(msg.contains(field), "{to}: {msg}");
        assert!(msg.contains(says), "{to}: {msg}");
        let line = line_of(&text, to);
        assert!(msg.contains(&format!("line {line}")), "{to}: {msg}");
    }
}

/// A pool's declared series are ones the checker can read from a Prometheus exposition: a
/// metric name, label names, a path; a table declaring none is refused too, each naming its
/// field and line.
#[test]
fn a_pool_s_series_are_refused_unless_the_checker_can_read_them() {
    let second = include_str!("../../examples/rust-service/contract.toml");
    let contract = Contract::from_toml(second, "second.toml").unwrap();
    let metrics = contract.pools["reports"].metrics.as_ref().unwrap();
    assert_eq!(metrics.declared().count(), 4);
    assert_eq!(
        metrics.busy.as_ref().unwrap().to_string(),
        "pool_busy{pool=\"reports\"}"
    );
    let busy = "busy = { name = \"pool_busy\", labels = { pool = \"search\" } }";
    for (to, field, says) in [
        (
            "busy = { name = \"pool-busy\", labels = { pool = \"search\" } }",
            "pools.search.metrics.busy",
            "is not a metric name",
        ),
        (
            "busy = { name = \"pool_busy\", labels = { \"the pool\" = \"search\" } }",
            "pools.search.metrics.busy",
            "is not a label name",
        ),
    ] {
        let text = second.replacen(busy, to, 1);
        let msg = refused(&text);
        assert!(msg.contains(field), "{to}: {msg}");
        assert!(msg.contains(says), "{to}: {msg}");
        assert!(
            msg.contains(&format!("line {}", line_of(&text, to))),
            "{to}: {msg}"
        );
    }
    let block: String = ["busy", "queued", "limit", "refused"]
        .iter()
        .zip([
            "pool_busy",
            "pool_waiting",
            "pool_workers",
            "pool_refused_total",
        ])
        .map(|(what, name)| {
            format!("{what} = {{ name = \"{name}\", labels = {{ pool = \"search\" }} }}\n")
        })
        .collect();
    let table = format!("[pools.search.metrics]\npath = \"/metrics\"\n{block}");
    assert!(second.contains(&table));
    let bad_path = "[pools.search.metrics]\npath = \"metrics\"\nbusy = { name = \"b\" }\n";
    let msg = refused(&second.replacen(&table, bad_path, 1));
    assert!(msg.contains("pools.search.metrics.path"), "{msg}");
    let no_series = "[pools.search.metrics]\npath = \"/metrics\"\n";
    let msg = refused(&second.replacen(&table, no_series, 1));
    assert!(msg.contains("declares no series"), "{msg}");
}

/// A recipe's binary body comes from a file beside the contract, read when the contract is
/// loaded from its file: bounded in size, confined to the contract's folder (a contract is user
/// input, and its body files are sent to the target), and never together with `body`. Each
/// mistake is refused naming its field and line; a body file of a contract parsed from text is
/// an error when sent, not an empty body.
#[test]
fn a_body_file_is_read_from_the_contract_s_folder_and_nowhere_else() {
    let second = include_str!("../../examples/rust-service/contract.toml");
    let hold = "hold = { request = { method = \"GET\", path = \"/search\" }";
    assert!(second.contains(hold));
    let with = |file: &str| {
        second.replacen(
            hold,
            &format!(
                "hold = {{ request = {{ method = \"GET\", path = \"/search\", body_file = \"{file}\" }}"
            ),
            1,
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("contract");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("body.bin"), [0u8, 159, 146, 150]).unwrap();
    std::fs::write(dir.path().join("secret"), b"not for the target").unwrap();
    let load = |text: &str| {
        let path = folder.join("contract.toml");
        std::fs::write(&path, text).unwrap();
        Contract::from_file(&path)
    };

    let contract = load(&with("body.bin")).unwrap();
    let recipe = &contract.pools["search"].hold.as_ref().unwrap().request;
    assert_eq!(recipe.body().unwrap().as_ref(), &[0u8, 159, 146, 150]);
    let parsed = Contract::from_toml(&with("body.bin"), "text").unwrap();
    let unread = parsed.pools["search"].hold.as_ref().unwrap().request.body();
    assert!(unread.unwrap_err().contains("was not read"));

    let field = "pools.search.hold.request.body_file";
    for (file, says) in [
        (
            "../secret",
            "is not a relative path inside the contract's folder",
        ),
        (
            "/etc/hostname",
            "is not a relative path inside the contract's folder",
        ),
        ("missing.bin", "cannot be read"),
    ] {
        let text = with(file);
        let msg = load(&text).unwrap_err().to_string();
        assert!(msg.contains(field) && msg.contains(says), "{file}: {msg}");
        let line = text.lines().position(|l| l.contains(file)).unwrap() + 1;
        assert!(msg.contains(&format!("line {line}")), "{file}: {msg}");
    }
    std::os::unix::fs::symlink(dir.path().join("secret"), folder.join("link")).unwrap();
    let msg = load(&with("link")).unwrap_err().to_string();
    assert!(msg.contains("leads out of the contract's folder"), "{msg}");
    let big = std::fs::File::create(folder.join("big.bin")).unwrap();
    big.set_len(plimsoll_spec::bodies::MAX_BODY_FILE_BYTES + 1)
        .unwrap();
    let msg = load(&with("big.bin")).unwrap_err().to_string();
    assert!(msg.contains("is larger than"), "{msg}");
    let both = with("body.bin").replacen("body_file", "body = \"x\", body_file", 1);
    let msg = refused(&both);
    assert!(msg.contains("a `body` or a `body_file`, not both"), "{msg}");
}

/// A request over a memory cap needs the cap it is over, and an error status.
#[test]
fn an_over_cap_request_needs_its_pool_s_cap_and_an_error_status() {
    let second = include_str!("../../examples/rust-service/contract.toml");
    let cap = "memory_cap_mb = 256\n";
    assert!(second.contains(cap));
    let msg = refused(&second.replacen(cap, "", 1));
    assert!(msg.contains("pools.reports.over_cap"), "{msg}");
    assert!(msg.contains("needs the pool's `memory_cap_mb`"), "{msg}");
    let msg = refused(&second.replacen("status = 422", "status = 200", 1));
    assert!(
        msg.contains("pools.reports.over_cap.0.request.status"),
        "{msg}"
    );
    assert!(msg.contains("200 is not an error status"), "{msg}");
}

/// A hook hold names the service's own stage (`search`), any short lowercase token; one the
/// hook header could not carry is refused naming its line.
#[test]
fn a_hook_holds_stage_is_the_services_own_name() {
    let second = include_str!("../../examples/rust-service/contract.toml");
    let contract = Contract::from_toml(second, "second.toml").unwrap();
    let hook = contract.pools["search"]
        .hold
        .as_ref()
        .unwrap()
        .hook
        .as_ref();
    assert_eq!(hook.unwrap().stage.as_str(), "search");
    let declared = "stage = \"search\"";
    let text = second.replacen(declared, "stage = \"Search Stage\"", 1);
    let msg = refused(&text);
    assert!(msg.contains("invalid stage name `Search Stage`"), "{msg}");
    let line = line_of(&text, "stage = \"Search Stage\"");
    assert!(msg.contains(&format!("line {line}")), "{msg}");
}

/// A service's request id (`[request_id]`, F4) is one the checker can judge: a header name, a
/// kept length it can send, extra characters without the comma that joins two ids, a request it
/// can send; and it is another service's, the reference's being `clauses.f4`.
#[test]
fn a_request_id_is_refused_unless_the_checker_can_judge_it() {
    let second = include_str!("../../examples/rust-service/contract.toml");
    let contract = Contract::from_toml(second, "second.toml").unwrap();
    let ids = contract.request_id.as_ref().unwrap();
    assert_eq!(
        (ids.header.as_str(), ids.client_id_max_len),
        ("X-Request-Id", 64)
    );
    for (declared, planted, field, says) in [
        (
            "client_id_max_len = 64",
            "client_id_max_len = 0",
            "client_id_max_len",
            "within 1..=1024",
        ),
        (
            "client_id_extra_chars = \"._-\"",
            "client_id_extra_chars = \"._-,\"",
            "client_id_extra_chars",
            "but a comma",
        ),
        (
            "header = \"X-Request-Id\"",
            "header = \"X Request Id\"",
            "header",
            "not a header name",
        ),
    ] {
        assert!(second.contains(declared), "{declared}");
        let msg = refused(&second.replacen(declared, planted, 1));
        assert!(
            msg.contains(&format!("request_id.{field}")) && msg.contains(says),
            "{msg}"
        );
    }
    let reference = include_str!("../contract.toml");
    let with_ids = format!(
        "{reference}\n[request_id]\nheader = \"X-Request-Id\"\nclient_id_max_len = 8\nrequest = {{ method = \"GET\", path = \"/healthz\" }}\n"
    );
    let msg = refused(&with_ids);
    assert!(
        msg.contains("declares its request id in `clauses.f4`"),
        "{msg}"
    );
}

/// A service's Server-Timing (`[server_timing]`, T1) names two distinct entries, and is another
/// service's, the reference's being `[observability]`'s.
#[test]
fn a_server_timing_is_refused_unless_its_entries_are_two_tokens() {
    let second = include_str!("../../examples/rust-service/contract.toml");
    let declared = "queue = \"queue\"\nrun = \"run\"";
    assert!(second.contains(declared));
    let msg = refused(&second.replacen(declared, "queue = \"run\"\nrun = \"run\"", 1));
    assert!(
        msg.contains("server_timing.run") && msg.contains("the same entry"),
        "{msg}"
    );
    let msg = refused(&second.replacen(declared, "queue = \"wait time\"\nrun = \"run\"", 1));
    assert!(
        msg.contains("server_timing.queue") && msg.contains("not a token"),
        "{msg}"
    );
    let reference = include_str!("../contract.toml");
    let with_timing = format!(
        "{reference}\n[server_timing]\nheader = \"Server-Timing\"\nqueue = \"q\"\nrun = \"r\"\n"
    );
    let msg = refused(&with_timing);
    assert!(
        msg.contains("declares its Server-Timing in `[observability]`"),
        "{msg}"
    );
}

/// A service's error log (`[error_logs]`, F3) names `request_id` among its fields and comes with
/// the `[request_id]` its lines are joined by; the reference's is `clauses.f3`.
#[test]
fn an_error_log_is_refused_unless_its_lines_can_be_joined_to_their_answers() {
    let second = include_str!("../../examples/rust-service/contract.toml");
    let fields = "fields = [\"request_id\", \"error\"]";
    assert!(second.contains(fields));
    let msg = refused(&second.replacen(fields, "fields = [\"error\"]", 1));
    assert!(
        msg.contains("error_logs.fields") && msg.contains("names `request_id`"),
        "{msg}"
    );
    let ids = "[request_id]\nheader = \"X-Request-Id\"\nclient_id_max_len = 64\n\
               client_id_extra_chars = \"._-\"\nrequest = { method = \"GET\", path = \"/search\" }\n";
    assert!(second.contains(ids));
    let msg = refused(&second.replacen(ids, "", 1));
    assert!(msg.contains("declare `[request_id]` too"), "{msg}");
}

/// A service's served claim (`[claim]`) is at a path the checker can ask, and another
/// service's: the reference serves its claim at `api.contract`.
#[test]
fn a_claim_is_refused_unless_the_checker_can_ask_for_it() {
    let second = include_str!("../../examples/rust-service/contract.toml");
    let path = "path = \"/contract\"";
    assert!(second.contains(path));
    let msg = refused(&second.replacen(path, "path = \"contract\"", 1));
    assert!(msg.contains("claim.path"), "{msg}");
    let reference = include_str!("../contract.toml");
    let msg = refused(&format!("{reference}\n[claim]\npath = \"/claim\"\n"));
    assert!(msg.contains("serves its claim at `api.contract`"), "{msg}");
}

/// A service's connection bounds (`[connections]`, B4) name the request a connection the checker
/// keeps asks; the reference's asks `api.healthz` and declares its cap.
#[test]
fn connection_bounds_are_refused_unless_b4_can_judge_them() {
    let second = include_str!("../../examples/rust-service/contract.toml");
    let request = "max_connections = 256\nrequest = { method = \"GET\", path = \"/healthz\" }\n";
    assert!(second.contains(request));
    let msg = refused(&second.replacen(request, "max_connections = 256\n", 1));
    assert!(msg.contains("declare it as `request`"), "{msg}");
    let unaskable = "max_connections = 256\nrequest = { method = \"GET\", path = \"healthz\" }\n";
    let msg = refused(&second.replacen(request, unaskable, 1));
    assert!(msg.contains("connections.request.path"), "{msg}");
    let reference = include_str!("../contract.toml");
    let cap = "max_connections = 512\n";
    assert!(reference.contains(cap));
    let msg = refused(&reference.replacen(cap, "", 1));
    assert!(msg.contains("declare the cap"), "{msg}");
    let asked = "max_connections = 512\nrequest = { method = \"GET\", path = \"/healthz\" }\n";
    let msg = refused(&reference.replacen(cap, asked, 1));
    assert!(msg.contains("ask `api.healthz`"), "{msg}");
}

/// Another service's `[upload]` names the request its bodies go to, its answers by keys of
/// `[refusals]` and a largest body with its answer or neither; the budget (B5) and those fields
/// are each the reference's or the other's alone.
#[test]
fn an_upload_is_refused_unless_its_checks_can_judge_it() {
    let second = include_str!("../../examples/rust-service/contract.toml");
    let max = "max_body_bytes = 65536\n";
    assert!(second.contains(max));
    let msg = refused(&second.replacen(max, "max_body_bytes = 65536\nbudget_mb = 64\n", 1));
    assert!(
        msg.contains("upload.budget_mb") && msg.contains("B5 fills"),
        "{msg}"
    );
    let msg = refused(&second.replacen(max, "", 1));
    assert!(
        msg.contains("upload.max_body_bytes") && msg.contains("both or neither"),
        "{msg}"
    );
    let msg = refused(&second.replacen(max, "max_body_bytes = 4\n", 1));
    assert!(
        msg.contains("upload.request.body") && msg.contains("longer"),
        "{msg}"
    );
    let msg = refused(&second.replacen(max, "max_body_bytes = 1099511627776\n", 1));
    assert!(msg.contains("upload.max_body_bytes"), "{msg}");
    let answer = "read_timeout_answer = \"body_timeout\"\n";
    assert!(second.contains(answer));
    let msg = refused(&second.replacen(answer, "read_timeout_answer = \"slow\"\n", 1));
    assert!(msg.contains("`slow` is not a key of [refusals]"), "{msg}");
    let request = second
        .lines()
        .find(|l| {
            l.starts_with("request = { method = \"POST\", path = \"/reports\"")
                && !l.contains("status")
        })
        .unwrap();
    let msg = refused(&second.replacen(&format!("{request}\n"), "", 1));
    assert!(msg.contains("declare it as `request`"), "{msg}");
    let reference = include_str!("../contract.toml");
    let budget = "budget_mb = 1024\n";
    assert!(reference.contains(budget));
    let msg = refused(&reference.replacen(budget, "", 1));
    assert!(
        msg.contains("upload.budget_mb") && msg.contains("declare it"),
        "{msg}"
    );
    let msg = refused(&reference.replacen(budget, "budget_mb = 1024\nmax_body_bytes = 10\n", 1));
    assert!(
        msg.contains("upload.max_body_bytes") && msg.contains("another service"),
        "{msg}"
    );
}

/// A pool's `failure` (F1) is one the checker can provoke: the pool is held by a dependency the
/// checker plays, and the answer is a server error; the reference's failures are `clauses.F1`'s.
#[test]
fn a_failure_is_refused_unless_the_checker_can_provoke_it() {
    let second = include_str!("../../examples/rust-service/contract.toml");
    let failure = "[pools.lookup.failure]\nstatus = 502\n";
    assert!(second.contains(failure));
    let msg = refused(&second.replacen(failure, "[pools.lookup.failure]\nstatus = 404\n", 1));
    assert!(
        msg.contains("pools.lookup.failure.status") && msg.contains("not a server error"),
        "{msg}"
    );
    let on_search = format!("{second}\n[pools.search.failure]\nstatus = 502\n");
    let msg = refused(&on_search);
    assert!(msg.contains("declare `hold.dependency`"), "{msg}");
    let empty = "body = { contains = \"lookup failed\" }";
    assert!(second.contains(empty));
    let msg = refused(&second.replacen(empty, "body = { contains = \"\" }", 1));
    assert!(msg.contains("pools.lookup.failure.body.contains"), "{msg}");
}

/// Another service's deadline (B1) comes with its answer, a key of `[refusals]`; the
/// reference's deadlines are answered with its `timeout` error.
#[test]
fn a_deadline_is_refused_without_its_answer() {
    let second = include_str!("../../examples/rust-service/contract.toml");
    let answer = "deadline_answer = \"timed_out\"\n";
    assert!(second.contains(answer));
    let msg = refused(&second.replacen(answer, "", 1));
    assert!(
        msg.contains("pools.lookup.deadline_ms") && msg.contains("both or neither"),
        "{msg}"
    );
    let msg = refused(&second.replacen(answer, "deadline_answer = \"late\"\n", 1));
    assert!(msg.contains("`late` is not a key of [refusals]"), "{msg}");
    let reference = include_str!("../contract.toml");
    let deadline = "deadline_ms = 60000\n";
    assert!(reference.contains(deadline));
    let planted = "deadline_ms = 60000\ndeadline_answer = \"overloaded\"\n";
    let msg = refused(&reference.replacen(deadline, planted, 1));
    assert!(
        msg.contains("answers its deadlines with its `timeout` error"),
        "{msg}"
    );
}

/// A service's temp folder (`[temp_files]`) is named by an environment variable, and is another
/// service's: the reference keeps its own by its rule `temp-folder`.
#[test]
fn temp_files_are_refused_unless_named_by_a_variable_of_another_service() {
    let second = include_str!("../../examples/rust-service/contract.toml");
    let env = "env = \"TEMP_DIR\"";
    assert!(second.contains(env));
    let msg = refused(&second.replacen(env, "env = \"TEMP DIR\"", 1));
    assert!(msg.contains("temp_files.env"), "{msg}");
    let reference = include_str!("../contract.toml");
    let msg = refused(&format!("{reference}\n[temp_files]\nenv = \"TEMP_DIR\"\n"));
    assert!(msg.contains("rule `temp-folder`"), "{msg}");
}
