//! Services other than the reference one, gated unmodified by contracts of their own, each
//! passing with its contract (every clause it gives nothing to judge reported not applicable,
//! with the reason) and failing, clause by clause, when configured otherwise:
//! - nginx (Debian's package) with `limit_conn` in front of a slow upstream (`examples/nginx`),
//!   held by a slow request: one more connection than declared, or another refusal status;
//! - the second service (`examples/rust-service`, axum), held through `plimsoll-tower`'s hook:
//!   one more worker, another refusal status, a missing hint, a queue that starts the oldest
//!   first where the contract says newest, one more queue place, one tenant's workers shared
//!   with every other's, a bad query served or refused with another code, a client's request id
//!   kept whatever it is or none on an error answer, no Server-Timing or one without the wait,
//!   error lines in plain text or none for a refusal, a claim the contract does not allow.
//!
//! `plimsoll load` loads the second service's search pool from its contract alone (its hold
//! recipe and hook, its `429`, its own busy series): it passes `burst` and `overload`, and fails
//! with one more worker or a busy gauge that undercounts. These tests (`profile` in their names)
//! run in the `alone` half, as every load profile does (.config/nextest.toml).
//!
//! `plimsoll discover` measures the same services, and the reference server's export pool,
//! from outside: its drafts equal their hand-written contracts' measured values and `check`
//! passes them, and it never has more requests at once than its ceiling.
//!
//! Everything listens on loopback; every run is bounded in time. Without nginx the tests fail
//! saying how to get it (the test command, `bash ci/test.sh`, installs it).

#[allow(
    dead_code,
    reason = "the shared helpers judge in-process reports; these runs are processes"
)]
mod common;
#[path = "common/head.rs"]
mod head;
#[path = "common/nginx.rs"]
mod nginx;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Process;
use head::read_head;
use nginx::{SERVER_ADDRESS, free_port, start_nginx};
use serde_json::Value;

/// How long the upstream takes to answer: the contract's `hold.at_least_ms`.
const SLOW: Duration = Duration::from_millis(500);

/// The example's files, read from the repository.
fn example(file: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/nginx")
        .join(file)
}

/// A slow upstream on loopback: every request is answered `200 ok` after [`SLOW`], on a
/// thread of its own, and the connection closed. Returns its address.
fn slow_upstream() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer_slowly(stream));
        }
    });
    addr
}

fn answer_slowly(mut stream: TcpStream) {
    if read_head(&mut stream).is_none() {
        return;
    }
    std::thread::sleep(SLOW);
    let _ =
        stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
}

/// The values of the example's configuration (its `@PLACEHOLDERS@`): the contract's by
/// default, another in a variant that breaks it.
#[derive(Clone, Copy)]
struct Conf {
    /// `limit_conn` of /slow.
    connections: u32,
    /// `limit_conn_status`.
    status: u16,
    /// `limit_req_zone`'s rate of /api, a second.
    rate: u32,
    /// `limit_req`'s burst.
    burst: u32,
    /// `limit_req`'s `nodelay`.
    nodelay: bool,
    /// `limit_req_status`.
    req_status: u16,
    /// `keepalive_timeout`.
    keepalive: &'static str,
    /// `client_header_timeout`.
    header_timeout: &'static str,
    /// `limit_req_zone`'s key.
    req_key: &'static str,
    /// `limit_conn_zone`'s key.
    conn_key: &'static str,
    /// Directives of the server block in place of nginx's own error pages (empty: nginx's).
    error_page: &'static str,
    /// `client_max_body_size` of /upload.
    body_max: &'static str,
    /// `client_body_timeout` of /upload.
    body_timeout: &'static str,
}

/// What examples/nginx/contract.toml says.
const AS_CONTRACTED: Conf = Conf {
    connections: 2,
    status: 503,
    rate: 5,
    burst: 3,
    nodelay: false,
    req_status: 429,
    keepalive: "2s",
    header_timeout: "2s",
    req_key: "$binary_remote_addr",
    conn_key: "$server_name",
    error_page: "",
    body_max: "64k",
    body_timeout: "2s",
};

/// nginx from the example's configuration with `conf`'s values, in front of `upstream`.
/// Returns the process and its URL.
fn nginx(dir: &Path, conf: Conf, upstream: &str) -> (Process, String) {
    let template = std::fs::read_to_string(example("nginx.conf")).unwrap();
    let port = free_port();
    let listen = "listen 127.0.0.1:@PORT@;";
    assert!(
        template.contains(listen),
        "the example listens on 127.0.0.1"
    );
    let text = template
        .replace(listen, &format!("listen {SERVER_ADDRESS}:{port};"))
        .replace("@DIR@", &dir.display().to_string())
        .replace("@CONNECTIONS@", &conf.connections.to_string())
        .replace("@STATUS@", &conf.status.to_string())
        .replace("@RATE@", &conf.rate.to_string())
        .replace("@BURST@", &conf.burst.to_string())
        .replace("@NODELAY@", if conf.nodelay { "nodelay" } else { "" })
        .replace("@REQ_STATUS@", &conf.req_status.to_string())
        .replace("@KEEPALIVE@", conf.keepalive)
        .replace("@HEADER_TIMEOUT@", conf.header_timeout)
        .replace("@REQ_KEY@", conf.req_key)
        .replace("@CONN_KEY@", conf.conn_key)
        .replace("@ERROR_PAGE@", conf.error_page)
        .replace("@BODY_MAX@", conf.body_max)
        .replace("@BODY_TIMEOUT@", conf.body_timeout)
        .replace("@UPSTREAM@", upstream)
        .replace("@PORT@", &port.to_string());
    (
        start_nginx(dir, &text, port),
        format!("http://{SERVER_ADDRESS}:{port}"),
    )
}

/// `plimsoll check --contract examples/nginx/contract.toml --target URL`: its exit code and
/// JSON report.
fn check(dir: &Path, url: &str) -> (Option<i32>, Value) {
    check_with(dir, url, &example("contract.toml"), &[])
}

/// `plimsoll check --contract CONTRACT --target URL ARGS…`: its exit code and JSON report.
fn check_with(dir: &Path, url: &str, contract: &Path, args: &[&str]) -> (Option<i32>, Value) {
    let mut command = vec!["check", "--quiet", "--target", url];
    command.extend(args);
    plimsoll(dir, &command, contract)
}

/// `plimsoll load --contract CONTRACT --target URL --pool POOL --profile PROFILE ARGS…`: its
/// exit code and JSON report.
fn load_with(
    dir: &Path,
    (url, contract): (&str, &Path),
    (pool, profile): (&str, &str),
    args: &[&str],
) -> (Option<i32>, Value) {
    let mut command = vec!["load", "--quiet", "--target", url, "--pool", pool];
    command.extend(["--profile", profile]);
    command.extend(args);
    plimsoll(dir, &command, contract)
}

/// `plimsoll COMMAND… --contract CONTRACT --json REPORT`: its exit code and JSON report.
/// Killed after a minute (a hung run fails the test rather than hanging it).
fn plimsoll(dir: &Path, command: &[&str], contract: &Path) -> (Option<i32>, Value) {
    let report = dir.join("report.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_plimsoll"))
        .args(command)
        .arg("--contract")
        .arg(contract)
        .arg("--json")
        .arg(&report)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("plimsoll.err")).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("plimsoll {command:?} ran past a minute");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&report).unwrap_or_else(|e| {
        let stderr = std::fs::read_to_string(dir.join("plimsoll.err")).unwrap_or_default();
        panic!("plimsoll {command:?} wrote no report ({e}; {status}): {stderr}")
    });
    (status.code(), serde_json::from_str(&text).unwrap())
}

/// The second service with `config` (hooks on) on a loopback port of its own, served from a
/// thread with its own runtime for the rest of the test process. Returns its URL once the service
/// has opened its error log (if it keeps one).
fn second_service(config: plimsoll_example_service::Config) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    let config = plimsoll_example_service::Config {
        hooks: true,
        ..config
    };
    let error_log = config.error_log.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            plimsoll_example_service::serve(listener, &config)
                .await
                .unwrap();
        });
    });
    // Its error log is opened as it starts, on that thread; a check given `--server-log` reads
    // the file at once, and refuses to start without it.
    if let Some(log) = &error_log {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !log.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "the second service did not open {} in 10 s",
                log.display()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    url
}

/// The verdict of `id` in a report.
fn verdict<'r>(report: &'r Value, id: &str) -> &'r Value {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {report}"))
}

/// Every result that failed, whole (its expected, observed and reason), for an assertion's
/// message: a failure in CI says why without a rerun.
fn failing(report: &Value) -> String {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["verdict"] == "fail")
        .map(|r| format!("\n{r:#}"))
        .collect()
}

/// Each result's id and verdict, in run order.
fn verdicts(report: &Value) -> Vec<(String, String)> {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            (s("id"), s("verdict"))
        })
        .collect()
}

/// nginx as its contract says: T1 and T3 judged and passed by the client's clock (two ran at
/// once, the other two refused at once with 503), T4 too (four of six admitted at once and
/// spaced at the rate, the other two refused with 429, a request from 127.0.0.2 admitted
/// meanwhile), every other check not applicable with a
/// reason naming what the contract does not declare — none counted as a pass — and the run
/// exits 0.
#[test]
fn nginx_passes_its_own_contract_and_every_clause_it_does_not_declare_is_not_applicable() {
    let dir = tempfile::tempdir().unwrap();
    let (_nginx, url) = nginx(&dir.path().join("nginx"), AS_CONTRACTED, &slow_upstream());
    let (code, report) = check(dir.path(), &url);
    let verdicts = verdicts(&report);
    assert_eq!(code, Some(0), "{verdicts:?}{}", failing(&report));
    let t1 = &report["results"][1];
    assert_eq!(t1["id"], "T1");
    assert_eq!(t1["verdict"], "pass", "{t1}");
    assert!(
        t1["observed"]
            .as_str()
            .unwrap()
            .contains("2 ran at once, 0 queued, 2 refused"),
        "{t1}"
    );
    assert_eq!(verdict(&report, "T3")["verdict"], "pass");
    let t4 = verdict(&report, "T4");
    assert_eq!(t4["verdict"], "pass", "{t4}");
    assert_eq!(verdict(&report, "T6")["verdict"], "pass");
    assert!(
        t4["observed"]
            .as_str()
            .unwrap()
            .contains("4 of 6 sent at once admitted, 2 refused"),
        "{t4}"
    );
    assert!(
        t4["observed"]
            .as_str()
            .unwrap()
            .contains("another client address: 200"),
        "{t4}"
    );
    let b4 = verdict(&report, "B4");
    assert_eq!(b4["verdict"], "pass", "{b4}");
    assert!(
        b4["observed"]
            .as_str()
            .unwrap()
            .contains("no connection cap declared: not judged"),
        "{b4}"
    );
    let f2 = verdict(&report, "F2");
    assert_eq!(f2["verdict"], "pass", "{f2}");
    assert!(
        f2["observed"].as_str().unwrap().contains(
            "`POST /upload`: 65536 with its Content-Length 200, 65537 with its Content-Length 413, 65537 chunked 413"
        ),
        "{f2}"
    );
    let b1 = verdict(&report, "B1");
    assert_eq!(b1["verdict"], "pass", "{b1}");
    assert!(
        b1["observed"]
            .as_str()
            .unwrap()
            .contains("stalled body closed unanswered after"),
        "{b1}"
    );
    for result in report["results"].as_array().unwrap() {
        if ["T1", "T3", "T4", "T6", "B1", "B4", "F2"].contains(&result["id"].as_str().unwrap()) {
            continue;
        }
        assert_eq!(result["verdict"], "not_applicable", "{result}");
        let reason = result["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("no "), "{result}");
    }
}

/// nginx configured otherwise than its contract says fails T1 and T3, saying what the client
/// saw.
#[test]
fn nginx_configured_against_its_contract_fails_t1_and_t3() {
    let upstream = slow_upstream();
    // (limit_conn, limit_conn_status, what the client sees)
    for (connections, status, seen) in [
        (3, 503, "3 ran at once, 0 queued, 1 refused"),
        (2, 429, "2 otherwise answered"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let conf = Conf {
            connections,
            status,
            ..AS_CONTRACTED
        };
        let (_nginx, url) = nginx(&dir.path().join("nginx"), conf, &upstream);
        let (code, report) = check_with(
            dir.path(),
            &url,
            &example("contract.toml"),
            &["--only", "T1,T3"],
        );
        let t1 = &report["results"][1];
        assert_eq!(
            code,
            Some(1),
            "limit_conn {connections}, status {status}: {t1}"
        );
        assert_eq!(t1["verdict"], "fail", "{t1}");
        assert!(t1["observed"].as_str().unwrap().contains(seen), "{t1}");
        let t3 = verdict(&report, "T3");
        assert_eq!(t3["verdict"], "fail", "{t3}");
    }
}

/// nginx answering its `limit_conn` refusals with a page of its own (`error_page 503`): the
/// contract's 503 is nginx's own error page, so the burst's extra requests are otherwise
/// answered (T1) and the probes of the full pool not refused (T3), each failure quoting the page.
#[test]
fn nginx_with_its_own_error_page_fails_t1_and_t3() {
    let dir = tempfile::tempdir().unwrap();
    let conf = Conf {
        error_page: "error_page 503 @busy; location @busy { return 503 \"busy, try later\\n\"; }",
        ..AS_CONTRACTED
    };
    let (_nginx, url) = nginx(&dir.path().join("nginx"), conf, &slow_upstream());
    let (code, report) = check_with(
        dir.path(),
        &url,
        &example("contract.toml"),
        &["--only", "T1,T3"],
    );
    for id in ["T1", "T3"] {
        let said = verdict(&report, id);
        assert_eq!(code, Some(1), "{said}");
        assert_eq!(said["verdict"], "fail", "{said}");
        let said = said.to_string();
        assert!(
            said.contains(r#"the body is \"busy, try later\\n\""#),
            "{said}"
        );
        assert!(
            said.contains(r#"contains \"<title>503 Service Temporarily Unavailable</title>\""#),
            "{said}"
        );
    }
}

/// nginx whose `limit_req` is configured as `conf` fails T4 against the contract, the
/// client's observation containing `seen`; nothing else is run.
fn limit_req_fails_t4(conf: Conf, seen: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (_nginx, url) = nginx(&dir.path().join("nginx"), conf, &slow_upstream());
    let (code, report) = check_with(
        dir.path(),
        &url,
        &example("contract.toml"),
        &["--only", "T4"],
    );
    let t4 = verdict(&report, "T4");
    assert_eq!(code, Some(1), "{t4}");
    assert_eq!(t4["verdict"], "fail", "{t4}");
    assert!(t4.to_string().contains(seen), "{seen:?} not in {t4}");
}

/// `keepalive_timeout 0` where the contract says a refusal keeps its connection: nginx closes
/// every connection after its answer.
#[test]
fn nginx_closing_its_connections_fails_t6() {
    let dir = tempfile::tempdir().unwrap();
    let conf = Conf {
        keepalive: "0",
        ..AS_CONTRACTED
    };
    let (_nginx, url) = nginx(&dir.path().join("nginx"), conf, &slow_upstream());
    let (code, report) = check_with(
        dir.path(),
        &url,
        &example("contract.toml"),
        &["--only", "T6"],
    );
    let t6 = verdict(&report, "T6");
    assert_eq!(code, Some(1), "{t6}");
    assert_eq!(t6["verdict"], "fail", "{t6}");
    assert!(
        t6.to_string().contains("where the contract says `kept`"),
        "{t6}"
    );
}

/// nginx waiting twice the contract's head timeout for a new connection's request head
/// (`client_header_timeout 4s`) fails B4: a silent connection is still open when the checker
/// gives up on it, half a second past the contract's timeout and its tolerance.
#[test]
fn nginx_with_a_longer_header_timeout_fails_b4() {
    let conf = Conf {
        header_timeout: "4s",
        ..AS_CONTRACTED
    };
    nginx_variant_fails(
        conf,
        "B4",
        "a silent connection was still open 2800 ms later",
    );
}

/// nginx taking bodies twice the size its contract declares (`client_max_body_size 128k`) fails
/// F2: the body one byte over the declared largest is served.
#[test]
fn nginx_with_a_larger_body_size_fails_f2() {
    let conf = Conf {
        body_max: "128k",
        ..AS_CONTRACTED
    };
    nginx_variant_fails(
        conf,
        "F2",
        "a body of 65537 bytes, with its Content-Length, over the 65536-byte largest body: \
         answered 200, not the refusal's 413",
    );
}

/// nginx waiting twice as long for a stalled body (`client_body_timeout 4s`) fails B1: the
/// connection is closed later than the contract's timeout and its tolerance.
#[test]
fn nginx_with_a_longer_body_timeout_fails_b1() {
    let conf = Conf {
        body_timeout: "4s",
        ..AS_CONTRACTED
    };
    nginx_variant_fails(
        conf,
        "B1",
        "later than the 2000 ms read timeout and the 300 ms tolerance",
    );
}

/// nginx configured as `conf`, checked with its contract for `clause` alone: the run fails, and
/// so does the clause, saying `why`.
fn nginx_variant_fails(conf: Conf, clause: &str, why: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (_nginx, url) = nginx(&dir.path().join("nginx"), conf, &slow_upstream());
    let (code, report) = check_with(
        dir.path(),
        &url,
        &example("contract.toml"),
        &["--only", clause],
    );
    let result = verdict(&report, clause);
    assert_eq!(code, Some(1), "{result}");
    assert_eq!(result["verdict"], "fail", "{result}");
    let reason = result["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(why), "{result}");
}

/// The nginx contract with its `slow` pool limited per client address, as a team whose nginx
/// keys `limit_conn` by `$binary_remote_addr` would write it.
fn per_client_contract(dir: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(example("contract.toml")).unwrap();
    let keyed = text.replace(
        "refusal = \"limited\"\n",
        "refusal = \"limited\"\nkey = \"client_address\"\n",
    );
    assert_ne!(keyed, text, "the slow pool's refusal line moved");
    let path = dir.join("per-client.toml");
    std::fs::write(&path, keyed).unwrap();
    path
}

/// `limit_conn` per client address, as that contract says: T1's burst from 127.0.0.1 fills
/// it, and a request from 127.0.0.2 runs at once beside it; keyed by the server's name
/// instead, the other client is refused and T1 fails.
#[test]
fn nginx_limiting_connections_per_client_address_is_judged_from_a_second_address() {
    let upstream = slow_upstream();
    for (conn_key, verdict_is, seen) in [
        (
            "$binary_remote_addr",
            "pass",
            "from 127.0.0.2 sent while 127.0.0.1 filled the pool: 200",
        ),
        ("$server_name", "fail", "the keys share the limit"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let conf = Conf {
            conn_key,
            ..AS_CONTRACTED
        };
        let (_nginx, url) = nginx(&dir.path().join("nginx"), conf, &upstream);
        let contract = per_client_contract(dir.path());
        let (_, report) = check_with(dir.path(), &url, &contract, &["--only", "T1"]);
        let t1 = verdict(&report, "T1");
        assert_eq!(t1["verdict"], verdict_is, "{conn_key}: {t1}");
        assert!(
            t1.to_string().contains(seen),
            "{conn_key}: {seen:?} not in {t1}"
        );
    }
}

/// `burst=4` where the contract says 3: five of six requests sent at once are admitted.
#[test]
fn nginx_with_a_larger_burst_fails_t4() {
    let conf = Conf {
        burst: 4,
        ..AS_CONTRACTED
    };
    limit_req_fails_t4(conf, "5 of 6 requests sent at once were admitted");
}

/// `nodelay` where the contract says the burst is delayed: the admitted requests come back
/// together, not spaced at the rate.
#[test]
fn nginx_with_nodelay_where_the_contract_delays_fails_t4() {
    let conf = Conf {
        nodelay: true,
        ..AS_CONTRACTED
    };
    limit_req_fails_t4(conf, "`delay` spaces it to");
}

/// `rate=10r/s` where the contract says 5: the probes find tokens the declared bucket has not
/// refilled.
#[test]
fn nginx_with_a_higher_rate_fails_t4() {
    let conf = Conf {
        rate: 10,
        ..AS_CONTRACTED
    };
    limit_req_fails_t4(conf, "against the declared bucket");
}

/// One bucket for the whole server (`$server_name`) where the contract says one per client
/// address: a request from 127.0.0.2 is refused while 127.0.0.1's bucket is spent.
#[test]
fn nginx_sharing_its_rate_limit_across_clients_fails_t4() {
    let conf = Conf {
        req_key: "$server_name",
        ..AS_CONTRACTED
    };
    limit_req_fails_t4(conf, "one key's requests spent another's");
}

/// `limit_req_status 503` where the contract says 429.
#[test]
fn nginx_refusing_its_rate_limit_with_503_fails_t4() {
    let conf = Conf {
        req_status: 503,
        ..AS_CONTRACTED
    };
    limit_req_fails_t4(conf, "expected the refusal 429, got 503");
}

/// The second service's contract.
fn second_contract() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/rust-service/contract.toml")
}

/// Where the second service's contract has the checker play its lookup dependency.
const LOOKUP_LISTEN: &str = "127.0.0.1:18093";

/// The second service with `config`, its lookup dependency at a free port of the test's own
/// (tests run at once, each with its checker playing a dependency), and its contract with that
/// address, written in `dir`: the service's URL and the contract's path. The port is free on
/// 127.0.0.3, an address no client connection starts from (they start from 127.0.0.1, or
/// 127.0.0.2 for a second client), so an ephemeral port taken by some test's request between
/// the pick and the checker's listen cannot take it.
fn second(dir: &Path, config: plimsoll_example_service::Config) -> (String, std::path::PathBuf) {
    second_claiming(dir, config, |_| {})
}

/// [`second`], serving as its claim (`GET /contract`) its contract's JSON as `edit` leaves it:
/// the contract file converted as any TOML-to-JSON tool would.
fn second_claiming(
    dir: &Path,
    config: plimsoll_example_service::Config,
    edit: impl FnOnce(&mut Value),
) -> (String, std::path::PathBuf) {
    let free = std::net::TcpListener::bind("127.0.0.3:0").unwrap();
    let listen = free.local_addr().unwrap().to_string();
    drop(free);
    let text = std::fs::read_to_string(second_contract()).unwrap();
    assert!(text.contains(LOOKUP_LISTEN));
    let text = text.replace(LOOKUP_LISTEN, &listen);
    let contract = dir.join("second.toml");
    std::fs::write(&contract, &text).unwrap();
    let mut claim: Value = toml::from_str(&text).unwrap();
    edit(&mut claim);
    let temp = dir.join(SECOND_TEMP);
    std::fs::create_dir_all(&temp).unwrap();
    let url = second_service(plimsoll_example_service::Config {
        lookup_url: Some(format!("http://{listen}")),
        error_log: Some(dir.join(SECOND_LOG)),
        temp_dir: Some(temp),
        claim: Some(claim.to_string()),
        ..config
    });
    (url, contract)
}

/// The second service's error log, in the test's folder.
const SECOND_LOG: &str = "service.log";
/// The second service's temp folder (`TEMP_DIR`), in the test's folder.
const SECOND_TEMP: &str = "tmp";

/// [`check_with`] for the second service started by [`second`] in `dir`: its error log and its
/// temp folder read.
fn check_second(dir: &Path, url: &str, contract: &Path, args: &[&str]) -> (Option<i32>, Value) {
    let log = dir.join(SECOND_LOG);
    let temp = dir.join(SECOND_TEMP);
    let mut args = args.to_vec();
    args.extend(["--server-log", log.to_str().unwrap()]);
    args.extend(["--temp-dir", temp.to_str().unwrap()]);
    check_with(dir, url, contract, &args)
}

/// The second service as its contract says: T1, T2 (LIFO) and T3 judged by the client's clock
/// through the tower layer's hold and passed, T4 (its quota, `nodelay`, per API key) and T5
/// (a report waiting two seconds is refused), T6 (every refusal keeps its connection) and F2
/// (its three declared bad queries refused 400 with their code); nothing else applies, and the
/// run exits 0.
#[test]
fn the_second_service_passes_its_own_contract() {
    let dir = tempfile::tempdir().unwrap();
    let (url, contract) = second(dir.path(), plimsoll_example_service::Config::default());
    let (code, report) = check_second(dir.path(), &url, &contract, &[]);
    let verdicts = verdicts(&report);
    assert_eq!(code, Some(0), "{verdicts:?}{}", failing(&report));
    for id in [
        "T1", "T2", "T3", "T4", "T5", "T6", "F1", "F2", "F3", "F4", "B1", "B2", "B3", "B4",
    ] {
        assert_eq!(
            verdict(&report, id)["verdict"],
            "pass",
            "{}",
            verdict(&report, id)
        );
    }
    assert!(
        verdict(&report, "T2")["observed"]
            .as_str()
            .unwrap()
            .contains("in lifo order"),
        "{}",
        verdict(&report, "T2")
    );
    let t1 = verdict(&report, "T1").to_string();
    assert!(
        t1.contains("reports: its own series: pool_busy{pool=\\\"reports\\\"} peaked at 1, pool_waiting{pool=\\\"reports\\\"} peaked at 3, pool_refused_total{pool=\\\"reports\\\"} rose by 2"),
        "{t1}"
    );
    assert!(
        t1.contains("lookup: 7 copies of `GET /lookup` held 400 ms by its dependency LOOKUP_URL")
            && t1.contains("3 ran at once, 2 queued, 2 refused")
            && t1.contains("saw 5 calls, at most 3 at once"),
        "{t1}"
    );
    assert!(
        t1.contains("search: Server-Timing: at most 2 running at once")
            && t1.contains("reports: Server-Timing: at most 1 running at once"),
        "{t1}"
    );
    let judged = verdicts
        .iter()
        .filter(|(_, v)| v != "not_applicable")
        .count();
    assert_eq!(judged, 15, "{verdicts:?}");
    let b1 = verdict(&report, "B1")["observed"].to_string();
    assert!(
        b1.contains("lookup: answered 504 after")
            && b1.contains("temp folder empty; served again after: 200; 3 at once, all calling together, 3 served")
            && b1.contains("stalled body answered 408 after")
            && b1.contains("; served after: 200"),
        "{b1}"
    );
    let f1 = verdict(&report, "F1")["observed"].to_string();
    assert!(
        f1.contains("lookup: a failed call to LOOKUP_URL at ")
            && f1.contains(
                " answered 502 after 1 call(s), temp folder empty; served again after: 200; 3 at once, all calling together, 3 served"
            ),
        "{f1}"
    );
    let b4 = verdict(&report, "B4")["observed"].to_string();
    assert!(
        b4.contains("GET /healthz 200")
            && b4.contains("connection 257 closed unanswered after 256 filled"),
        "{b4}"
    );
    let claim = verdict(&report, "contract")["observed"].to_string();
    assert!(claim.contains("identical to the contract"), "{claim}");
    let f3 = verdict(&report, "F3")["observed"].to_string();
    assert!(f3.contains(" 0 not JSON;"), "{f3}");
    let f4 = verdict(&report, "F4")["observed"].to_string();
    assert!(
        f4.contains("carried X-Request-Id") && f4.contains("error bodies not judged"),
        "{f4}"
    );
    assert!(
        verdict(&report, "B3")["observed"]
            .as_str()
            .unwrap()
            .starts_with("lookup, leaving at once: the call closed after")
            && verdict(&report, "B3")["observed"]
                .as_str()
                .unwrap()
                .contains(" ms, temp folder empty; lookup, leaving "),
        "{}",
        verdict(&report, "B3")
    );
    assert!(
        verdict(&report, "B2")["observed"]
            .as_str()
            .unwrap()
            .contains("1 of 1 declared over-cap requests answered as declared, twice; 1 of 1 pools served their own request after"),
        "{}",
        verdict(&report, "B2")
    );
    assert!(
        verdict(&report, "F2")["observed"]
            .as_str()
            .unwrap()
            .contains("3 of 3 declared bad requests answered as declared; `POST /reports`: 65536 with its Content-Length 200, 65537 with its Content-Length 413, 65537 chunked 413"),
        "{}",
        verdict(&report, "F2")
    );
    assert!(
        verdict(&report, "T4")["observed"]
            .as_str()
            .unwrap()
            .contains("3 of 5 sent at once admitted, 2 refused"),
        "{}",
        verdict(&report, "T4")
    );
    assert!(
        verdict(&report, "T4")["observed"]
            .as_str()
            .unwrap()
            .contains("RateLimit fields as declared on every answer"),
        "{}",
        verdict(&report, "T4")
    );
}

/// The second service leaving a failed lookup's temp file behind fails F1, naming the file, with
/// `--temp-dir` reading the folder its contract's `[temp_files]` declares.
#[test]
fn the_second_service_leaving_a_failed_lookup_s_temp_file_fails_f1() {
    let config = plimsoll_example_service::Config {
        temp_leak: plimsoll_example_service::TempLeak::OnFailure,
        ..Default::default()
    };
    let report = breaks("a failed lookup's temp file kept", config, &["F1"]);
    let why = verdict(&report, "F1")["reason"].to_string();
    assert!(why.contains("temp files left: [\\\".tmp"), "{why}");
}

/// The second service answering a failed lookup as contracted but never giving its worker back
/// fails F1: after the failure, three lookups at once find two workers.
#[test]
fn the_second_service_losing_a_worker_on_a_failed_lookup_fails_f1() {
    let config = plimsoll_example_service::Config {
        lookup_on_failure: plimsoll_example_service::OnFailure::LosesWorker,
        ..Default::default()
    };
    let report = breaks("a failed lookup's worker lost", config, &["F1"]);
    let why = verdict(&report, "F1")["reason"].to_string();
    assert!(
        why.contains("lookup: every worker after the failure: 3 requests sent at once did not all call LOOKUP_URL"),
        "{why}"
    );
}

/// The second service answering every lookup `502` without calling its dependency fails F1: the
/// declared answer came, but no failed call caused it.
#[test]
fn the_second_service_failing_lookups_without_calling_fails_f1() {
    let config = plimsoll_example_service::Config {
        lookup_calling: plimsoll_example_service::Calling::FailsUncalled,
        ..Default::default()
    };
    let report = breaks("lookups failed without a call", config, &["F1"]);
    let why = verdict(&report, "F1")["reason"].to_string();
    assert!(
        why.contains("answered 502 without calling the dependency"),
        "{why}"
    );
}

/// The second service leaving a lookup's spooled file behind when its client goes away fails B3,
/// naming the file: the call closed within the bound, the file did not go with it.
#[test]
fn the_second_service_leaving_a_dropped_lookup_s_temp_file_fails_b3() {
    let config = plimsoll_example_service::Config {
        temp_leak: plimsoll_example_service::TempLeak::OnDisconnect,
        ..Default::default()
    };
    let report = breaks("a dropped lookup's temp file kept", config, &["B3"]);
    let why = verdict(&report, "B3")["reason"].to_string();
    assert!(
        why.contains("lookup, leaving at once: temp files left: [\\\".tmp"),
        "{why}"
    );
}

/// The second service without its lookup deadline serves a lookup held past it: B1 fails,
/// naming the answer and its time.
#[test]
fn the_second_service_without_its_lookup_deadline_fails_b1() {
    let config = plimsoll_example_service::Config {
        lookup_deadline: None,
        ..Default::default()
    };
    let report = breaks("no lookup deadline", config, &["B1"]);
    let why = verdict(&report, "B1")["reason"].to_string();
    assert!(
        why.contains("answered 200 after") && why.contains("not the deadline's answer"),
        "{why}"
    );
}

/// Under a latency fault that adds more than the contract's tolerance (300 ms) to a timeout's
/// answer (200 ms each way), the second service's deadline (B1), disconnect (B3) and queue
/// timeout (T5) are judged against the bounds the fault widens, as the reference's are, and
/// pass. (A fault against another service's contract once panicked the checker: the stop
/// bound's base was read from the digitize pool.)
#[test]
fn the_second_service_passes_its_deadlines_under_a_latency_wider_than_the_tolerance() {
    let dir = tempfile::tempdir().unwrap();
    let (url, contract) = second(dir.path(), plimsoll_example_service::Config::default());
    let args = ["--only", "B1,B3,T5", "--fault", "latency:latency=200"];
    let (code, report) = check_second(dir.path(), &url, &contract, &args);
    assert_eq!(code, Some(0), "{}", failing(&report));
    for id in ["B1", "B3", "T5"] {
        let v = verdict(&report, id);
        assert_eq!(v["verdict"], "pass", "{v}");
    }
}

/// The second service taking report bodies twice the size its contract declares fails F2: the
/// body one byte over the declared largest is served, declared or chunked.
#[test]
fn the_second_service_taking_larger_bodies_fails_f2() {
    let config = plimsoll_example_service::Config {
        report_bodies: plimsoll_example_service::Bodies {
            max_bytes: 128 * 1024,
            ..Default::default()
        },
        ..Default::default()
    };
    let report = breaks("bodies of 128 KiB taken", config, &["F2"]);
    let why = verdict(&report, "F2")["reason"].to_string();
    assert!(
        why.contains(
            "a body of 65537 bytes, chunked, over the 65536-byte largest body: answered 200"
        ),
        "{why}"
    );
}

/// The second service without a read timeout for report bodies never ends a stalled one: B1
/// fails, saying the checker gave up.
#[test]
fn the_second_service_without_a_body_read_timeout_fails_b1() {
    let config = plimsoll_example_service::Config {
        report_bodies: plimsoll_example_service::Bodies {
            read_timeout: None,
            ..Default::default()
        },
        ..Default::default()
    };
    let report = breaks("no body read timeout", config, &["B1"]);
    let why = verdict(&report, "B1")["reason"].to_string();
    assert!(
        why.contains("not ended within 4300 ms (the checker gave up)"),
        "{why}"
    );
}

/// The second service cutting lookups a second before its contract's deadline fails B1: the
/// held lookup is answered 504, but early.
#[test]
fn the_second_service_with_a_shorter_lookup_deadline_fails_b1() {
    let config = plimsoll_example_service::Config {
        lookup_deadline: Some(std::time::Duration::from_secs(3)),
        ..Default::default()
    };
    let report = breaks("a 3 s lookup deadline", config, &["B1"]);
    let why = verdict(&report, "B1")["reason"].to_string();
    assert!(why.contains("before the 4000 ms deadline"), "{why}");
}

/// The second service answering a failed lookup from its cache, `200`, hides the failure its
/// contract says it reports: F1 fails, naming the answer.
#[test]
fn the_second_service_hiding_a_failed_lookup_fails_f1() {
    let config = plimsoll_example_service::Config {
        lookup_on_failure: plimsoll_example_service::OnFailure::Cached,
        ..Default::default()
    };
    let report = breaks("a failed lookup served from the cache", config, &["F1"]);
    let why = verdict(&report, "F1")["reason"].to_string();
    assert!(why.contains("answered 200, the contract says 502"), "{why}");
}

/// The second service without a head timer keeps a silent connection open for ever: B4 fails,
/// naming it.
#[test]
fn the_second_service_without_its_head_timeout_fails_b4() {
    let config = plimsoll_example_service::Config {
        connections: plimsoll_example_service::Bounds {
            head_timeout: None,
            ..plimsoll_example_service::Config::default().connections
        },
        ..Default::default()
    };
    let report = breaks("no head timeout", config, &["B4"]);
    let why = verdict(&report, "B4")["reason"].to_string();
    assert!(why.contains("a silent connection was still open"), "{why}");
}

/// The second service serving one more connection than its contract's cap fails B4, naming the
/// connection served past it.
#[test]
fn the_second_service_with_one_more_connection_fails_b4() {
    let config = plimsoll_example_service::Config {
        connections: plimsoll_example_service::Bounds {
            max_connections: Some(257),
            ..plimsoll_example_service::Config::default().connections
        },
        ..Default::default()
    };
    let report = breaks("257 connections", config, &["B4"]);
    let why = verdict(&report, "B4")["reason"].to_string();
    assert!(
        why.contains("connection 257 was served with 256 already open"),
        "{why}"
    );
}

/// The second service whose closed connections never free their places fails B4: the
/// connections its earlier probes closed are still counted, and the fill is closed short of the
/// cap.
#[test]
fn the_second_service_never_freeing_a_closed_connection_s_place_fails_b4() {
    let config = plimsoll_example_service::Config {
        connections: plimsoll_example_service::Bounds {
            frees_places: false,
            ..plimsoll_example_service::Config::default().connections
        },
        ..Default::default()
    };
    let report = breaks("closed connections' places kept", config, &["B4"]);
    let why = verdict(&report, "B4")["reason"].to_string();
    // The twelve places its probes closed are still counted: the fill's next connection, with
    // 244 open, is closed unanswered (or, on a loaded machine, left waiting) below the cap.
    assert!(why.contains("244 open"), "{why}");
}

/// The second service configured with `config` fails the clauses `fails` with its contract,
/// each judged alone (`--only`: the passing run of the default configuration shows the others
/// pass), and the run exits 1. Returns the report, for a test that reads a reason.
fn breaks(what: &str, config: plimsoll_example_service::Config, fails: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let (url, contract) = second(dir.path(), config);
    let only = fails.join(",");
    let (code, report) = check_second(dir.path(), &url, &contract, &["--only", &only]);
    let failed: Vec<String> = verdicts(&report)
        .into_iter()
        .filter(|(_, v)| v == "fail")
        .map(|(id, _)| id)
        .collect();
    assert_eq!(code, Some(1), "{what}: {failed:?}");
    let why: Vec<String> = fails
        .iter()
        .map(|id| format!("{id}: {}", verdict(&report, id)))
        .collect();
    assert_eq!(failed, fails, "{what}: {why:#?}");
    report
}

/// No Server-Timing, where the contract declares one: every served answer of T1's bursts lacks
/// it.
#[test]
fn the_second_service_without_its_server_timing_fails_t1() {
    let config = plimsoll_example_service::Config {
        server_timing: plimsoll_example_service::ServerTiming::Off,
        ..Default::default()
    };
    let report = breaks("no Server-Timing", config, &["T1"]);
    let reason = verdict(&report, "T1")["reason"].to_string();
    assert!(
        reason.contains("carry no Server-Timing queue and run"),
        "{reason}"
    );
}

/// A Server-Timing that never reports a wait: the reports the client saw wait behind the held
/// worker claim none.
#[test]
fn the_second_service_reporting_no_wait_fails_t1() {
    let config = plimsoll_example_service::Config {
        server_timing: plimsoll_example_service::ServerTiming::QueueZero,
        ..Default::default()
    };
    let report = breaks("no wait in Server-Timing", config, &["T1"]);
    let reason = verdict(&report, "T1")["reason"].to_string();
    assert!(
        reason.contains("claims 0 ms in the queue, but the client saw it wait"),
        "{reason}"
    );
}

/// A claim of three search workers where the contract says two, and declares no override: the
/// `contract` check refuses the claimed value and fails, and T1 judges the contract's own two
/// (which the service runs).
#[test]
fn the_second_service_claiming_another_search_pool_fails_the_contract_check() {
    let dir = tempfile::tempdir().unwrap();
    let three = |claim: &mut Value| claim["pools"]["search"]["workers"] = 3.into();
    let config = plimsoll_example_service::Config::default();
    let (url, contract) = second_claiming(dir.path(), config, three);
    let (code, report) = check_second(dir.path(), &url, &contract, &["--only", "T1"]);
    assert_eq!(code, Some(1), "{:?}", verdicts(&report));
    let claim = verdict(&report, "contract");
    assert_eq!(claim["verdict"], "fail", "{claim}");
    assert!(
        claim["reason"].to_string().contains("pools.search.workers"),
        "{claim}"
    );
    assert_eq!(
        verdict(&report, "T1")["verdict"],
        "pass",
        "{}",
        failing(&report)
    );
}

/// Error lines in plain text where the contract says JSON.
#[test]
fn the_second_service_logging_plain_text_fails_f3() {
    let config = plimsoll_example_service::Config {
        error_lines: plimsoll_example_service::ErrorLines::Plain,
        ..Default::default()
    };
    let report = breaks("plain-text error lines", config, &["F3"]);
    let reason = verdict(&report, "F3")["reason"].to_string();
    assert!(reason.contains("are not JSON objects"), "{reason}");
}

/// No error line for a refusal: F3's own burst past a held pool is refused, and those answers
/// have no line.
#[test]
fn the_second_service_leaving_its_refusals_out_of_its_log_fails_f3() {
    let config = plimsoll_example_service::Config {
        error_lines: plimsoll_example_service::ErrorLines::SkipRefusals,
        ..Default::default()
    };
    let report = breaks("no line for a refusal", config, &["F3"]);
    let reason = verdict(&report, "F3")["reason"].to_string();
    assert!(
        reason.contains("no error line with its request_id"),
        "{reason}"
    );
}

/// A client's id kept whatever it is: the id one character too long, and the malformed one,
/// come back unchanged.
#[test]
fn the_second_service_keeping_any_client_id_fails_f4() {
    let config = plimsoll_example_service::Config {
        request_ids: plimsoll_example_service::RequestIds::KeepsAnything,
        ..Default::default()
    };
    let report = breaks("any client id kept", config, &["F4"]);
    let reason = verdict(&report, "F4")["reason"].to_string();
    assert!(reason.contains("an id one character too long"), "{reason}");
}

/// No request id on error answers: F4's own bad queries (`400`) carry none, so even an
/// `--only F4` run sees it.
#[test]
fn the_second_service_without_ids_on_its_errors_fails_f4() {
    let config = plimsoll_example_service::Config {
        request_ids: plimsoll_example_service::RequestIds::MissingOnErrors,
        ..Default::default()
    };
    let report = breaks("no id on errors", config, &["F4"]);
    let reason = verdict(&report, "F4")["reason"].to_string();
    assert!(reason.contains("had no X-Request-Id"), "{reason}");
}

/// One more search worker than declared: a burst sees three at once, and a probe of the full
/// pool is served.
#[test]
fn the_second_service_with_one_more_search_worker_fails_t1_and_t3() {
    let config = plimsoll_example_service::Config {
        search_workers: 3,
        ..Default::default()
    };
    breaks("one more search worker", config, &["T1", "T3"]);
}

/// `503` where the contract says a full search answers `429`.
#[test]
fn the_second_service_refusing_search_with_503_fails_t1_and_t3() {
    let config = plimsoll_example_service::Config {
        search_refusal: plimsoll_example_service::Status::SERVICE_UNAVAILABLE,
        ..Default::default()
    };
    breaks("503 for a full search", config, &["T1", "T3"]);
}

/// No `Retry-After` on a full search, where the contract declares one.
#[test]
fn the_second_service_without_its_hint_fails_t3() {
    let config = plimsoll_example_service::Config {
        search_retry_after: None,
        ..Default::default()
    };
    breaks("no Retry-After on a full search", config, &["T3"]);
}

/// A full search answering `429` with another error in its JSON body than the contract's
/// (`{"error":"slow down"}`): the right status, the wrong body, so no refusal. T1 counts the
/// burst's extra requests as otherwise answered and T3's probes are not refused, each saying
/// which body was expected and quoting the one that came.
#[test]
fn the_second_service_naming_another_error_in_its_refusal_fails_t1_and_t3() {
    let config = plimsoll_example_service::Config {
        search_refusal_error: "slow down",
        ..Default::default()
    };
    let report = breaks(
        "another error in a full search's body",
        config,
        &["T1", "T3"],
    );
    for id in ["T1", "T3"] {
        let said = verdict(&report, id).to_string();
        assert!(
            said.contains(
                r#"the body's `/error` is \"slow down\", the contract says \"too many searches\""#
            ),
            "{said}"
        );
    }
}

/// `Retry-After: 3` on a full search, past the contract's range of 1 to 2 seconds.
#[test]
fn the_second_service_advertising_a_delay_past_its_range_fails_t3() {
    let config = plimsoll_example_service::Config {
        search_retry_after: Some(3),
        ..Default::default()
    };
    let report = breaks("Retry-After past its range", config, &["T3"]);
    let t3 = verdict(&report, "T3").to_string();
    assert!(
        t3.contains("Retry-After `3` is not delay-seconds in 1..=2"),
        "{t3}"
    );
}

/// No queue timeout on `/reports`, where the contract says two seconds: the waiting report is
/// served once the held one is done, not refused.
#[test]
fn the_second_service_without_its_queue_timeout_fails_t5() {
    let config = plimsoll_example_service::Config {
        reports_queue_timeout: None,
        ..Default::default()
    };
    breaks("no queue timeout", config, &["T5"]);
}

/// A queue timeout of three seconds where the contract says two: the refusal comes late.
#[test]
fn the_second_service_with_a_longer_queue_timeout_fails_t5() {
    let config = plimsoll_example_service::Config {
        reports_queue_timeout: Some(Duration::from_secs(3)),
        ..Default::default()
    };
    breaks("a three-second queue timeout", config, &["T5"]);
}

/// Every refusal closes its connection, where the contract says each keeps it.
#[test]
fn the_second_service_closing_after_a_refusal_fails_t6() {
    let config = plimsoll_example_service::Config {
        close_after_refusal: true,
        ..Default::default()
    };
    breaks("closes after a refusal", config, &["T6"]);
}

/// One quota bucket for every API key, where the contract says one for each: a request under
/// another key is refused while the first key's bucket is spent.
#[test]
fn the_second_service_sharing_its_quota_across_keys_fails_t4() {
    let config = plimsoll_example_service::Config {
        quota_per_key: false,
        ..Default::default()
    };
    breaks("one quota for every key", config, &["T4"]);
}

/// `RateLimit-Policy` advertising a quota of 5 where the bucket (and the contract) says 3.
#[test]
fn the_second_service_advertising_another_quota_fails_t4() {
    let config = plimsoll_example_service::Config {
        quota_advertised: Some(5),
        ..Default::default()
    };
    breaks("RateLimit-Policy q=5", config, &["T4"]);
}

/// A spent quota refused `429` with another text than the contract's: T4's refusals are the
/// declared one's status with the wrong body, and its failure quotes the body that came.
#[test]
fn the_second_service_refusing_its_quota_with_another_body_fails_t4() {
    let config = plimsoll_example_service::Config {
        quota_refusal_body: "slow down\n",
        ..Default::default()
    };
    let report = breaks("another body for a spent quota", config, &["T4"]);
    let t4 = verdict(&report, "T4").to_string();
    assert!(
        t4.contains(r#"the body is \"slow down\\n\", the contract says exactly \"quota spent, try later\\n\""#),
        "{t4}"
    );
}

/// A burst of three where the contract says two: four of five sent at once are admitted.
#[test]
fn the_second_service_with_a_larger_quota_burst_fails_t4() {
    let config = plimsoll_example_service::Config {
        quota_burst: 3,
        ..Default::default()
    };
    breaks("a larger quota burst", config, &["T4"]);
}

/// One worker for every tenant together, where the contract says one for each: a tenant's
/// request waits behind another tenant's.
#[test]
fn the_second_service_sharing_tenant_workers_across_keys_fails_t1() {
    let config = plimsoll_example_service::Config {
        tenant_per_key: false,
        ..Default::default()
    };
    breaks("one pool for every API key", config, &["T1"]);
}

/// A server that counts connections, as a thread-per-connection server with a fixed number of
/// threads does (Apache's prefork, a bounded pool of connection threads): `workers` connections
/// at once, each kept for every request its client sends on it, each request answered `200 ok`
/// after [`SLOW`]; a connection past the limit is answered `503` and closed. Returns its URL.
fn connection_counting(workers: usize) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let open = std::sync::Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            if open.fetch_add(1, SeqCst) >= workers {
                open.fetch_sub(1, SeqCst);
                std::thread::spawn(move || {
                    let _ = read_head(&mut stream);
                    let _ = stream.write_all(
                        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\nConnection: close\r\n\r\nfull\n",
                    );
                });
                continue;
            }
            let open = open.clone();
            std::thread::spawn(move || {
                while read_head(&mut stream).is_some() {
                    std::thread::sleep(SLOW);
                    let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n";
                    if stream.write_all(ok).is_err() {
                        break;
                    }
                }
                open.fetch_sub(1, SeqCst);
            });
        }
    });
    url
}

/// The contract of [`connection_counting`] with two workers, counting `counts`.
fn counting_contract(dir: &Path, counts: &str) -> std::path::PathBuf {
    let text = format!(
        r#"language = 2

[contract]
name = "counted"
title = "A server that counts connections"
version = "1.0.0"
summary = "Two connections at once; the next refused 503."

[pools.slow]
title = "Slow"
routes = [{{ method = "GET", path = "/slow" }}]
workers = 2
queue = {{ capacity = 0, order = "unordered" }}
counts = "{counts}"
refusal = "full"
hold = {{ request = {{ method = "GET", path = "/slow" }}, at_least_ms = 500 }}

[refusals.full]
status = 503

[tolerances]
refusal_latency_ms = 100
timeout_late_ms = 300
retry_after_jitter_ms = 150
metrics_poll_interval_ms = 10
trials = 3
"#
    );
    let path = dir.join(format!("counts-{counts}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// A pool that counts connections, declared so: T1 opens two idle keep-alive connections and
/// a request on a third is refused at once; its burst (one request per connection) passes as
/// any pool's does.
#[test]
fn a_server_counting_connections_passes_a_contract_that_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let url = connection_counting(2);
    let contract = counting_contract(dir.path(), "connections");
    let (code, report) = check_with(dir.path(), &url, &contract, &["--only", "T1"]);
    let t1 = verdict(&report, "T1").to_string();
    assert_eq!(code, Some(0), "{t1}");
    assert!(
        t1.contains("while 2 idle connections were open: refused 503"),
        "{t1}"
    );
}

/// The same server against a contract that says its pool counts requests: beside two idle
/// keep-alive connections, none of T1's burst runs, where the contract promises two.
#[test]
fn a_server_counting_connections_where_its_contract_counts_requests_fails_t1() {
    let dir = tempfile::tempdir().unwrap();
    let url = connection_counting(2);
    let contract = counting_contract(dir.path(), "requests");
    let (code, report) = check_with(dir.path(), &url, &contract, &["--only", "T1"]);
    let t1 = verdict(&report, "T1").to_string();
    assert_eq!(code, Some(1), "{t1}");
    assert!(
        t1.contains("slow burst, beside 2 idle keep-alive connections")
            && t1.contains("0 ran at once"),
        "{t1}"
    );
}

/// The second service, whose pools count requests, against a contract saying its `search`
/// pool counts connections: a request on a new connection runs at once beside two idle ones.
#[test]
fn the_second_service_declared_counting_connections_fails_t1() {
    let dir = tempfile::tempdir().unwrap();
    let (url, contract) = second(dir.path(), plimsoll_example_service::Config::default());
    let text = std::fs::read_to_string(&contract).unwrap();
    let pool = "refusal = \"too_many\"\n";
    assert!(text.contains(pool));
    std::fs::write(
        &contract,
        text.replacen(pool, &format!("{pool}counts = \"connections\"\n"), 1),
    )
    .unwrap();
    let (code, report) = check_with(dir.path(), &url, &contract, &["--only", "T1"]);
    let t1 = verdict(&report, "T1").to_string();
    assert_eq!(code, Some(1), "{t1}");
    assert!(
        t1.contains(
            "search: a request on a new connection while 2 idle connections were open ran at once"
        ),
        "{t1}"
    );
}

/// No `/metrics` where the contract declares the pools' series: each declared series is
/// missing, and T1 fails saying which.
#[test]
fn the_second_service_without_its_metrics_fails_t1() {
    let config = plimsoll_example_service::Config {
        metrics: false,
        ..Default::default()
    };
    let report = breaks("no /metrics", config, &["T1"]);
    let t1 = verdict(&report, "T1").to_string();
    assert!(
        t1.contains("search: its declared series were not served: GET /metrics answered 404"),
        "{t1}"
    );
}

/// The second service whose series tell `lie`: T1, and only T1, fails, saying `why` (each
/// series is a claim the checker holds to what its client saw).
fn lying_series_fail_t1(lie: plimsoll_example_service::SeriesLie, why: &str) {
    let config = plimsoll_example_service::Config {
        series_lie: Some(lie),
        ..Default::default()
    };
    let report = breaks(&format!("series that lie: {lie:?}"), config, &["T1"]);
    let t1 = verdict(&report, "T1").to_string();
    assert!(t1.contains(why), "{why}: {t1}");
}

/// A busy gauge that never reports more than one: the client saw two searches run at once,
/// and T1 says the gauge disagrees.
#[test]
fn the_second_service_undercounting_its_busy_gauge_fails_t1() {
    lying_series_fail_t1(
        plimsoll_example_service::SeriesLie::BusyCappedAtOne,
        "search: pool_busy{pool=\\\"search\\\"} peaked at 1",
    );
}

/// A queue gauge that never shows anything waiting: the client saw three reports wait.
#[test]
fn the_second_service_hiding_its_queue_fails_t1() {
    lying_series_fail_t1(
        plimsoll_example_service::SeriesLie::NothingWaiting,
        "reports: pool_waiting{pool=\\\"reports\\\"} peaked at 0",
    );
}

/// A workers gauge one above the pool's: the contract's value is what it must read.
#[test]
fn the_second_service_claiming_one_more_worker_fails_t1() {
    lying_series_fail_t1(
        plimsoll_example_service::SeriesLie::OneMoreWorker,
        "search: pool_workers{pool=\\\"search\\\"} reads 3; the contract says 2 workers",
    );
}

/// A refusal counter that never counts: the client received the search pool's refusals.
#[test]
fn the_second_service_not_counting_its_refusals_fails_t1() {
    lying_series_fail_t1(
        plimsoll_example_service::SeriesLie::RefusalsUncounted,
        "search: pool_refused_total{pool=\\\"search\\\"} rose by 0 while the client \
         received 2 refusals",
    );
}

/// No memory cap where the contract declares one: the report of 1000 days is run and served,
/// and B2 says what was declared.
#[test]
fn the_second_service_without_its_memory_cap_fails_b2() {
    let config = plimsoll_example_service::Config {
        reports_memory_cap_mb: None,
        ..Default::default()
    };
    let report = breaks("no memory cap", config, &["B2"]);
    let b2 = verdict(&report, "B2").to_string();
    assert!(
        b2.contains("a report of the last 1000 days (2000 MB)")
            && b2.contains("answered 200, the contract says 422"),
        "{b2}"
    );
}

/// The reference server gated by a contract of a plain service's kind — no `[api]`: its
/// digitize route as data, held by the hook — whose requests carry binary bodies from files
/// beside the contract: a small PNG, and one whose header claims 100000 x 100000 pixels, which
/// the contract says is over the memory cap. B2 judges that one twice (its status and
/// `/code`), then the small one served.
#[test]
fn the_reference_server_s_memory_cap_is_judged_with_binary_body_files() {
    use plimsoll_conformance::remote::{png_claiming, sample_png};
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = common::serve(&dir.path().join("server"), &[]);
    let embedded = plimsoll_spec::Contract::embedded();
    let status = embedded
        .error(plimsoll_spec::ErrorCode::MemoryCapExceeded)
        .status;
    let cap = embedded
        .pool_spec(plimsoll_spec::Pool::Digitize)
        .memory_cap_mb
        .unwrap();
    let folder = dir.path().join("contract");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("small.png"), sample_png()).unwrap();
    std::fs::write(folder.join("huge.png"), png_claiming(100_000, 100_000)).unwrap();
    let png = r#"headers = { "Content-Type" = "image/png" }"#;
    let text = format!(
        r#"language = 2

[contract]
name = "digitize-as-data"
title = "Digitize, as a plain service's contract"
version = "1.0.0"
summary = "The digitize route with binary bodies from files."

[pools.digitize]
title = "Digitize"
routes = [{{ method = "POST", path = "/v1/digitize" }}]
workers = 4
queue = {{ capacity = "unbounded", order = "fifo" }}
memory_cap_mb = {cap}
hold = {{ request = {{ method = "POST", path = "/v1/digitize", {png}, body_file = "small.png" }}, hook = {{ header = "X-Plimsoll-Hook", stage = "parse" }} }}

[[pools.digitize.over_cap]]
what = "a PNG whose header claims 100000 x 100000 pixels"
request = {{ method = "POST", path = "/v1/digitize", {png}, body_file = "huge.png", status = {status} }}
code = {{ pointer = "/code", value = "memory_cap_exceeded" }}

[refusals]

[tolerances]
refusal_latency_ms = 100
timeout_late_ms = 300
retry_after_jitter_ms = 150
metrics_poll_interval_ms = 10
trials = 1
"#
    );
    let contract = folder.join("contract.toml");
    std::fs::write(&contract, text).unwrap();
    let (code, report) = check_with(dir.path(), &url, &contract, &["--only", "B2"]);
    let b2 = verdict(&report, "B2");
    assert_eq!(code, Some(0), "{b2}");
    assert!(
        b2["observed"].as_str().unwrap().contains(
            "1 of 1 declared over-cap requests answered as declared, twice; 1 of 1 pools served their own request after"
        ),
        "{b2}"
    );
}

/// A lookup whose call to the dependency runs on a task of its own: when the client goes away
/// the call goes on, and B3, watching from the dependency, sees it outlive the bound.
#[test]
fn the_second_service_calling_on_after_its_client_left_fails_b3() {
    let config = plimsoll_example_service::Config {
        lookup_calling: plimsoll_example_service::Calling::Detached,
        ..Default::default()
    };
    let report = breaks("a detached lookup call", config, &["B3"]);
    let b3 = verdict(&report, "B3").to_string();
    assert!(
        b3.contains(
            "lookup, leaving at once: the service was still calling its dependency LOOKUP_URL"
        ),
        "{b3}"
    );
}

/// A lookup that gives up its call after 150 ms and answers from a cache: a client leaving at
/// once sees the call end within the bound (200 ms), as if cancelled, but a client leaving 400 ms
/// after the call finds it long over and its request answered: nothing was held, and B3 fails.
#[test]
fn the_second_service_giving_up_its_call_on_its_own_fails_b3() {
    let config = plimsoll_example_service::Config {
        lookup_calling: plimsoll_example_service::Calling::GivesUpAfter(Duration::from_millis(150)),
        ..Default::default()
    };
    let report = breaks("a lookup that gives up its call", config, &["B3"]);
    let b3 = verdict(&report, "B3").to_string();
    assert!(
        b3.contains("lookup, leaving at once: the call closed")
            && b3.contains(
                "lookup, leaving 400 ms after the call: the request's call to LOOKUP_URL"
            )
            && b3.contains("ended before the client went away: nothing was held"),
        "{b3}"
    );
}

/// One more lookup worker than declared: held through the dependency the checker plays, a
/// burst sees four at once by the client's clock, and the dependency saw four calls at once.
#[test]
fn the_second_service_with_one_more_lookup_worker_fails_t1() {
    let config = plimsoll_example_service::Config {
        lookup_workers: 4,
        ..Default::default()
    };
    let report = breaks("one more lookup worker", config, &["T1"]);
    let t1 = verdict(&report, "T1").to_string();
    assert!(t1.contains("saw 4 calls at once"), "{t1}");
}

/// Lookups answered from a cache, never calling the dependency: nothing is held, and T1 says
/// the service never called it.
#[test]
fn the_second_service_never_calling_its_dependency_fails_t1() {
    let config = plimsoll_example_service::Config {
        lookup_calling: plimsoll_example_service::Calling::Cached,
        ..Default::default()
    };
    let report = breaks("lookups never call the dependency", config, &["T1"]);
    let t1 = verdict(&report, "T1").to_string();
    assert!(
        t1.contains("never called its dependency LOOKUP_URL"),
        "{t1}"
    );
}

/// Reports started oldest first where the contract says newest first.
#[test]
fn the_second_service_starting_reports_oldest_first_fails_t2() {
    let config = plimsoll_example_service::Config {
        reports_order: plimsoll_example_service::Order::Fifo,
        ..Default::default()
    };
    breaks("reports started oldest first", config, &["T2"]);
}

/// One more report waiting than declared: a burst sees four queued, and a probe of the full
/// pool waits instead of being refused.
#[test]
fn the_second_service_with_one_more_queue_place_fails_t1_and_t3() {
    let config = plimsoll_example_service::Config {
        reports_queue: 4,
        ..Default::default()
    };
    breaks("one more report waiting", config, &["T1", "T3"]);
}

/// A test certificate authority and a certificate it signed for [`SERVER_ADDRESS`], written to
/// `dir`: the authority's PEM (for `--ca-file`) and the server's certificate and key (for nginx).
fn certificates(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec![SERVER_ADDRESS.to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    std::fs::create_dir_all(dir).unwrap();
    let paths = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

/// nginx terminating TLS with `cert` and `key` in front of `upstream` (plain HTTP), on a
/// loopback port of its own. Returns the process and its `https://` URL.
fn tls_proxy(dir: &Path, cert: &Path, key: &Path, upstream: &str) -> (Process, String) {
    let port = free_port();
    let d = dir.display();
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
         \x20 fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         \x20 server {{\n    listen {SERVER_ADDRESS}:{port} ssl;\n    ssl_certificate {};\n    ssl_certificate_key {};\n\
         \x20   location / {{ proxy_pass {upstream}; }}\n  }}\n}}\n",
        cert.display(),
        key.display()
    );
    (
        start_nginx(dir, &conf, port),
        format!("https://{SERVER_ADDRESS}:{port}"),
    )
}

/// The second service (default configuration) behind nginx's TLS, its files in `dir`: the
/// test authority's PEM (for `--ca-file`), the `https://` URL, the service's contract, and nginx
/// (stopped when dropped).
fn https_second(dir: &Path) -> (std::path::PathBuf, String, std::path::PathBuf, Process) {
    let (ca, cert, key) = certificates(&dir.join("tls"));
    let (upstream, contract) = second(dir, plimsoll_example_service::Config::default());
    let (nginx, url) = tls_proxy(&dir.join("nginx"), &cert, &key, &upstream);
    (ca, url, contract, nginx)
}

/// An `https://` target: the second service behind TLS, its certificate signed by a test
/// authority. With `--ca-file` naming that authority the run judges and passes as over plain
/// HTTP; without it the target is unreachable (exit 2, the certificate named as the reason),
/// never a run of failures.
#[test]
fn an_https_target_is_checked_with_its_ca_file() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, url, contract, _nginx) = https_second(dir.path());
    let run = |ca_file: Option<&Path>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_plimsoll"));
        cmd.args([
            "check",
            "--quiet",
            "--only",
            "T1",
            "--target",
            &url,
            "--contract",
        ])
        .arg(&contract)
        .arg("--json")
        .arg(dir.path().join("report.json"));
        if let Some(ca) = ca_file {
            cmd.arg("--ca-file").arg(ca);
        }
        cmd.output().unwrap()
    };
    let trusted = run(Some(&ca));
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(
        trusted.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&trusted.stderr),
        verdict(&report, "T1")
    );
    assert_eq!(verdict(&report, "T1")["verdict"], "pass");
    let untrusted = run(None);
    let stderr = String::from_utf8_lossy(&untrusted.stderr);
    assert_eq!(untrusted.status.code(), Some(2), "{stderr}");
    assert!(stderr.to_lowercase().contains("certificate"), "{stderr}");
}

/// `plimsoll load` against the same `https://` target: with `--ca-file` the burst profile's
/// users (each on a TLS connection of its own) and its reads of the exposition trust the
/// authority and the profile passes as over plain HTTP; without it the target is unreachable
/// (exit 2); with Locust's engine `--ca-file` is refused as a usage error (exit 2), since
/// Locust's users trust Python's store.
#[test]
fn the_burst_profile_loads_an_https_target_with_its_ca_file() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, url, contract, _nginx) = https_second(dir.path());
    let target = (url.as_str(), contract.as_path());
    let ca = ca.to_str().unwrap();
    let burst = ("search", "burst");
    let (code, report) = load_with(
        dir.path(),
        target,
        burst,
        &["--waves", "2", "--ca-file", ca],
    );
    assert_eq!(code, Some(0), "{}", failing(&report));
    let observed = verdict(&report, "L-burst")["observed"].to_string();
    assert!(
        observed.contains("admitted per wave 2/8, 2/8"),
        "{observed}"
    );
    let (code, _) = load_with(dir.path(), target, burst, &["--waves", "2"]);
    assert_eq!(
        code,
        Some(2),
        "an untrusted certificate is an unreachable target"
    );
    let locust = ["--waves", "2", "--ca-file", ca, "--engine", "locust"];
    let (code, _) = load_with(dir.path(), target, burst, &locust);
    assert_eq!(
        code,
        Some(2),
        "--ca-file with Locust's engine is a usage error"
    );
}

/// `plimsoll discover --target URL --route ROUTE ARGS… -o DRAFT`: its exit code and what it
/// said on stderr. Killed after two minutes.
fn discover(url: &str, route: &str, args: &[&str], draft: &Path) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_plimsoll"))
        .args(["discover", "--target", url, "--route", route])
        .args(args)
        .arg("-o")
        .arg(draft)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let said = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("plimsoll discover against {url} ran past two minutes");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status.code(), said.join().unwrap())
}

/// A contract document, parsed by the loader.
fn contract_at(path: &Path) -> plimsoll_spec::Contract {
    let text = std::fs::read_to_string(path).unwrap();
    plimsoll_spec::Contract::from_toml(&text, &path.display().to_string())
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// What discover must find equal to the hand-written contract's, for `pool`: workers, queue
/// capacity and order, the refusal's status, body and its hint's header (its delays are
/// compared by [`delays`]: a range declared by hand holds the constant discover saw).
type Measured = (
    u32,
    Option<u32>,
    &'static str,
    u16,
    Option<plimsoll_spec::model::RefusalBody>,
    Option<String>,
);

/// [`Measured`] of `pool` in `contract`.
fn measured(contract: &plimsoll_spec::Contract, pool: &str) -> Measured {
    let spec = &contract.pools[pool];
    let refusal = &contract.refusals[spec.refusal.as_ref().unwrap()];
    (
        spec.workers,
        spec.queue.capacity.places(),
        spec.queue.order.as_str(),
        contract.refusal_status(refusal).unwrap(),
        refusal.body.clone(),
        refusal.hint.as_ref().map(|h| h.header().to_owned()),
    )
}

/// The delays `pool`'s refusal hint allows, in seconds: its constant, its range, or from the
/// estimator's least up.
fn delays(contract: &plimsoll_spec::Contract, pool: &str) -> Option<(u64, u64)> {
    use plimsoll_spec::model::Hint;
    let refusal = &contract.refusals[contract.pools[pool].refusal.as_ref().unwrap()];
    refusal.hint.as_ref().map(|h| match h {
        Hint::Constant(c) => (c.seconds, c.seconds),
        Hint::Range(r) => (r.min_seconds, r.max_seconds),
        Hint::Estimated(e) => (e.min_seconds, u64::MAX),
    })
}

/// Discovers `route` of `url`, then checks the draft against the same service: the draft is a
/// contract, `check` passes it with `judged` passed, and its measured values equal `pool`'s in
/// the hand-written `contract`.
fn discovered_then_checked(
    url: &str,
    route: &str,
    args: &[&str],
    (contract, pool): (&Path, &str),
    judged: &[&str],
) {
    let dir = tempfile::tempdir().unwrap();
    let draft = dir.path().join("draft.toml");
    let (code, said) = discover(url, route, args, &draft);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("at most 8 request(s) at once"), "{said}");
    let text = std::fs::read_to_string(&draft).unwrap();
    assert!(text.starts_with("#:schema "), "{text}");
    assert!(text.contains("confidence high"), "{text}");
    assert!(
        [
            "connection = \"kept\"  # kept open: ",
            "connection = \"closed\"  # closed: "
        ]
        .iter()
        .any(|seen| text.contains(seen)),
        "{text}"
    );
    let found = contract_at(&draft);
    let declared = contract_at(contract);
    assert_eq!(measured(&found, pool), measured(&declared, pool), "{text}");
    match (delays(&found, pool), delays(&declared, pool)) {
        (Some((least, most)), Some((from, to))) => {
            assert!(from <= least && most <= to, "{text}")
        }
        (seen, declared) => assert_eq!(seen, declared, "{text}"),
    }
    assert_eq!(
        found.tolerances,
        plimsoll_spec::Contract::embedded().tolerances,
        "{text}"
    );
    let (code, report) = check_with(dir.path(), url, &draft, &[]);
    let verdicts = verdicts(&report);
    assert_eq!(code, Some(0), "{verdicts:?}\n{text}{}", failing(&report));
    for id in judged {
        assert_eq!(verdict(&report, id)["verdict"], "pass", "{verdicts:?}");
    }
}

/// nginx (`limit_conn 2`): discover, holding by the slow upstream, finds two at once, no queue
/// and 503, as the hand-written contract says, and `check` passes its draft (T1, T3).
#[test]
fn discover_writes_a_draft_of_nginx_that_check_passes() {
    let dir = tempfile::tempdir().unwrap();
    let (_nginx, url) = nginx(&dir.path().join("nginx"), AS_CONTRACTED, &slow_upstream());
    let slow = SLOW.as_millis().to_string();
    discovered_then_checked(
        &url,
        "GET /slow",
        &["--slow-ms", &slow, "--ceiling", "8"],
        (&example("contract.toml"), "slow"),
        &["T1", "T3"],
    );
}

/// The second service's two routes, held by its hook: `GET /search` two at once, no queue,
/// 429 with `Retry-After: 1`; `POST /reports` one at a time, three waiting newest first, 503
/// without a hint — as its hand-written contract says; `check` passes each draft (T1, T3, and T2
/// for the queue).
#[test]
fn discover_writes_drafts_of_the_second_service_that_check_passes() {
    let url = second_service(plimsoll_example_service::Config::default());
    let hook = ["--hook", "X-Plimsoll-Hook", "--ceiling", "8"];
    discovered_then_checked(
        &url,
        "GET /search",
        &hook,
        (&second_contract(), "search"),
        &["T1", "T3"],
    );
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.json");
    std::fs::write(&body, r#"{"range":"last week"}"#).unwrap();
    let body = body.display().to_string();
    let mut args = vec![
        "--body",
        &body,
        "--header",
        "Content-Type: application/json",
    ];
    args.extend(hook);
    discovered_then_checked(
        &url,
        "POST /reports",
        &args,
        (&second_contract(), "reports"),
        &["T1", "T2", "T3"],
    );
}

/// An upstream with no limit of its own, answering after `hold` and counting the requests it
/// has at once: returns its address and the most it had.
fn counting_upstream(hold: Duration) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (now, most) = (
        std::sync::Arc::new(AtomicUsize::new(0)),
        std::sync::Arc::new(AtomicUsize::new(0)),
    );
    let seen = most.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let (now, most) = (now.clone(), most.clone());
            std::thread::spawn(move || {
                let at_once = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(at_once, Ordering::SeqCst);
                // Counted whether or not a whole head arrives, as a request in flight.
                let _ = read_head(&mut stream);
                std::thread::sleep(hold);
                // Counted out before the answer leaves: the client may send again once it has it.
                now.fetch_sub(1, Ordering::SeqCst);
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            });
        }
    });
    (format!("http://{addr}"), seen)
}

/// A service whose limit is above the ceiling: discover never has more requests at once than
/// the ceiling (counted by the service), says so at the start, and says the limit is above it
/// (exit 1), its draft's values marked as lower bounds.
#[test]
fn discover_never_exceeds_its_ceiling_and_says_when_the_limit_is_above_it() {
    let (url, most) = counting_upstream(Duration::from_millis(300));
    let dir = tempfile::tempdir().unwrap();
    let draft = dir.path().join("draft.toml");
    let (code, said) = discover(
        &url,
        "GET /work",
        &["--slow-ms", "300", "--ceiling", "3"],
        &draft,
    );
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("at most 3 request(s) at once"), "{said}");
    assert!(said.contains("the limit is above it"), "{said}");
    assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 3, "{said}");
    let text = std::fs::read_to_string(&draft).unwrap();
    assert!(text.contains("workers = 3  # at least"), "{text}");
    assert!(text.contains("none seen up to the ceiling of 3"), "{text}");
}

/// A small design of the reference's design format (`plimsoll_spec::design`): what its export
/// route takes, as text.
fn design_json() -> String {
    use plimsoll_spec::design::{DESIGN_FORMAT, Design, Extents, Stitch, StitchCommand, Thread};
    let st = |x, y, cmd| Stitch { x, y, cmd };
    serde_json::to_string(&Design {
        format: DESIGN_FORMAT.into(),
        width_mm: 20.0,
        height_mm: 10.0,
        threads: vec![Thread {
            color: "#c81e28".into(),
        }],
        extents: Extents {
            min_x: 0,
            min_y: 0,
            max_x: 200,
            max_y: 100,
        },
        stitch_count: 2,
        stitches: vec![
            st(0, 0, StitchCommand::Jump),
            st(0, 0, StitchCommand::Stitch),
            st(200, 100, StitchCommand::Stitch),
            st(200, 100, StitchCommand::End),
        ],
    })
    .unwrap()
}

/// The reference server (`plimsoll serve`, hooks on), its export pool cut to two workers by its
/// override so the ramp is three bursts: discover holds a worker with the reference's hook in
/// `parse`, the pool's first stage (the reference holds no request in `queue`, admission's and
/// no stage). Export, not digitize: a recipe's body is text, and digitize takes only images.
/// The draft's workers, queue capacity, refusal status and hint header equal the effective
/// contract's (spec/contract.toml with the override); the hint's kind (the reference's is an
/// estimator, and one load shows one value), the deadline, cancellation and memory cap are
/// marked as what cannot be measured from outside; the connection is seen kept open after a
/// refusal (hyper's HTTP/1.1 keeps it); and `check` passes the draft against the same server
/// (T1, T3).
#[test]
fn discover_writes_a_draft_of_the_reference_server_that_check_passes() {
    use plimsoll_conformance::discover::draft::CANNOT_MEASURE;
    let dir = tempfile::tempdir().unwrap();
    // A deadline of 1.5 s, which discover finds by holding one request up to 4 s.
    let env = [("EXPORT_POOL_SIZE", "2"), ("EXPORT_TIMEOUT_MS", "1500")];
    let (_server, url) = common::serve(&dir.path().join("server"), &env);
    let (expected, _) = plimsoll_spec::Contract::embedded()
        .with_overrides(|k| {
            env.iter()
                .find(|(e, _)| *e == k)
                .map(|(_, v)| v.to_string())
        })
        .unwrap();
    let body = dir.path().join("design.json");
    std::fs::write(&body, design_json()).unwrap();
    let draft = dir.path().join("draft.toml");
    let (code, said) = discover(
        &url,
        "POST /v1/export?format=svg",
        &[
            "--body",
            &body.display().to_string(),
            "--header",
            "Content-Type: application/json",
            "--hook",
            "X-Plimsoll-Hook",
            "--hook-stage",
            "parse",
            "--ceiling",
            "6",
            "--deadline-within",
            "4000",
        ],
        &draft,
    );
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("at most 6 request(s) at once"), "{said}");
    // A stderr that is no terminal gets the lines alone: no bar, no escape sequence.
    assert!(
        said.contains("discover: burst of 3: 2 ran at once"),
        "{said}"
    );
    assert!(!said.contains(['\u{1b}', '\r']), "{said:?}");
    let text = std::fs::read_to_string(&draft).unwrap();
    let found = contract_at(&draft);
    let (pool, spec) = (&found.pools["export"], &expected.pools["export"]);
    assert_eq!(pool.workers, 2, "{text}");
    assert_eq!(pool.workers, spec.workers, "{text}");
    assert_eq!(pool.queue.capacity, spec.queue.capacity, "{text}");
    // Written a third of the late tolerance below the client's count (the lateness one request
    // cannot show), rounded down to 10 ms: below the contract's, by no more than that and a
    // discovery as late.
    let deadline = pool.deadline_ms.expect("the deadline was found");
    let allowance = expected.tolerances.timeout_late_ms / 3;
    let declared = spec.deadline_ms.unwrap();
    assert!(
        (declared - 2 * allowance..=declared).contains(&deadline),
        "{deadline} ms, the contract's {declared} ms (-{allowance}): {text}"
    );
    assert!(text.contains("# answered 504 after "), "{text}");
    let (refusal, declared) = (
        &found.refusals[pool.refusal.as_ref().unwrap()],
        &expected.refusals[spec.refusal.as_ref().unwrap()],
    );
    assert_eq!(
        found.refusal_status(refusal),
        expected.refusal_status(declared),
        "{text}"
    );
    assert_eq!(
        refusal.hint.as_ref().map(|h| h.header()),
        declared.hint.as_ref().map(|h| h.header()),
        "{text}"
    );
    for marked in [
        "# hint: constant, or an estimate that follows the load",
        "# cancellation: ",
        "# memory_cap_mb: ",
    ] {
        let line = text
            .lines()
            .find(|l| l.starts_with(marked))
            .unwrap_or_else(|| panic!("no `{marked}` line in\n{text}"));
        assert!(line.contains(CANNOT_MEASURE), "{line}");
    }
    assert!(
        text.contains(
            "connection = \"kept\"  # kept open: refused 503 without `Connection: close`, then a second request on the same connection was answered 503"
        ),
        "{text}"
    );
    let (code, report) = check_with(dir.path(), &url, &draft, &[]);
    let verdicts = verdicts(&report);
    assert_eq!(code, Some(0), "{verdicts:?}\n{text}{}", failing(&report));
    for id in ["T1", "T3"] {
        assert_eq!(verdict(&report, id)["verdict"], "pass", "{verdicts:?}");
    }
}

/// How long [`limited_upstream`] takes to refuse: long enough that a request sent while a
/// refusal is under way overlaps it (discover fills the pool again and probes it 75 ms later).
const REFUSAL_LINGERS: Duration = Duration::from_millis(150);

/// An upstream serving `limit` requests at once, each answered after `hold`, and refusing any
/// more at once with 503 and `Connection: close` after [`REFUSAL_LINGERS`], closing every
/// connection after its answer; counting the connections it has at once. Returns its URL and
/// the most it had.
fn limited_upstream(
    hold: Duration,
    limit: usize,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (now, most) = (
        std::sync::Arc::new(AtomicUsize::new(0)),
        std::sync::Arc::new(AtomicUsize::new(0)),
    );
    let seen = most.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let (now, most) = (now.clone(), most.clone());
            std::thread::spawn(move || {
                let at_once = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(at_once, Ordering::SeqCst);
                let _ = read_head(&mut stream);
                let answer: &[u8] = if at_once > limit {
                    std::thread::sleep(REFUSAL_LINGERS);
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nConnection: close\r\n\r\nfull"
                } else {
                    std::thread::sleep(hold);
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                };
                // Counted out before the answer leaves: the client may send again once it has it.
                now.fetch_sub(1, Ordering::SeqCst);
                let _ = stream.write_all(answer);
            });
        }
    });
    (format!("http://{addr}"), seen)
}

/// A service that refuses within the ceiling: the ramp, the probes of the full pool and the
/// connection after a refusal together never have more requests at once than the ceiling
/// (counted by the service), and the connection the service closes after its refusal is
/// written down as closed, with the `Connection: close` it said.
#[test]
fn discover_s_probes_of_a_full_pool_stay_within_its_ceiling() {
    // Held a second: the connection's probe must reach the service while the pool is full, and
    // on two loaded cores a 300 ms hold ended before it once (the probe was served, not
    // refused, and the connection went unjudged).
    let (url, most) = limited_upstream(Duration::from_millis(1000), 2);
    let dir = tempfile::tempdir().unwrap();
    let draft = dir.path().join("draft.toml");
    let (code, said) = discover(
        &url,
        "GET /work",
        &["--slow-ms", "1000", "--ceiling", "3"],
        &draft,
    );
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 3, "{said}");
    let text = std::fs::read_to_string(&draft).unwrap();
    let found = contract_at(&draft);
    let pool = &found.pools["work"];
    assert_eq!(
        (pool.workers, pool.queue.capacity.places()),
        (2, Some(0)),
        "{text}"
    );
    assert!(
        text.contains("connection = \"closed\"  # closed: refused 503 with `Connection: close`"),
        "{text}"
    );
}

/// `--hook-stage` without `--hook` is refused before a request is sent (exit 2), naming
/// `--hook`: with `--slow-ms` it would otherwise be ignored without a word.
#[test]
fn discover_refuses_a_hook_stage_without_a_hook() {
    let dir = tempfile::tempdir().unwrap();
    let (url, most) = counting_upstream(Duration::from_millis(10));
    let (code, said) = discover(
        &url,
        "GET /work",
        &[
            "--slow-ms",
            "10",
            "--hook-stage",
            "decode",
            "--ceiling",
            "2",
        ],
        &dir.path().join("draft.toml"),
    );
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("--hook-stage") && said.contains("give --hook"),
        "{said}"
    );
    assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 0, "{said}");
}

/// A body that is not UTF-8 text (an image, as the reference's digitize takes) is refused
/// before a request is sent (exit 2), saying why: a contract's request body is text.
#[test]
fn discover_refuses_a_body_that_is_not_text() {
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("image.png");
    std::fs::write(&body, b"\x89PNG\r\n\x1a\n").unwrap();
    let (url, most) = counting_upstream(Duration::from_millis(10));
    let (code, said) = discover(
        &url,
        "POST /work",
        &[
            "--body",
            &body.display().to_string(),
            "--slow-ms",
            "10",
            "--ceiling",
            "2",
        ],
        &dir.path().join("draft.toml"),
    );
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("is not UTF-8 text"), "{said}");
    assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 0, "{said}");
}

/// `plimsoll load` against another service's contract needs to know which pool it loads: with
/// several it can hold and no `--pool`, or a pool the contract does not declare, it says so and
/// exits 2 before a request is sent, never panics.
#[test]
fn load_names_the_pools_it_can_load_and_why_it_cannot_load_another() {
    let url = second_service(plimsoll_example_service::Config::default());
    let load = |pool: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_plimsoll"))
            .args([
                "load",
                "--quiet",
                "--profile",
                "overload",
                "--duration",
                "1",
            ])
            .args(pool)
            .args(["--target", &url, "--contract"])
            .arg(second_contract())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{said}");
        assert!(!said.contains("panicked"), "{said}");
        said
    };
    let said = load(&[]);
    assert!(
        said.contains("name the one to load with --pool (lookup, reports, search, tenant)"),
        "{said}"
    );
    let said = load(&["--pool", "nope"]);
    assert!(said.contains("declares no such pool"), "{said}");
}

/// A search served whatever its query (no validation): each declared bad query is answered
/// 200, and F2 fails naming them.
#[test]
fn the_second_service_serving_any_query_fails_f2() {
    let config = plimsoll_example_service::Config {
        search_validation: false,
        ..Default::default()
    };
    let report = breaks("no query validation", config, &["F2"]);
    let reason = verdict(&report, "F2")["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    for what in [
        "an empty query",
        "a query of 65 bytes",
        "a query given twice",
    ] {
        assert!(reason.contains(what), "{reason}");
    }
    assert!(
        reason.contains("answered 200, the contract says 400"),
        "{reason}"
    );
}

/// A bad query refused with the right status but another code than the contract's: F2 fails
/// on the two requests whose code the contract declares, and passes the one it does not.
#[test]
fn the_second_service_refusing_a_bad_query_with_another_code_fails_f2() {
    let config = plimsoll_example_service::Config {
        invalid_query_code: "bad_request",
        ..Default::default()
    };
    let report = breaks("another code for a bad query", config, &["F2"]);
    let f2 = verdict(&report, "F2");
    let reason = f2["reason"].as_str().unwrap();
    assert!(
        reason
            .contains("the body's `/code` is \"bad_request\", the contract says \"invalid_query\""),
        "{reason}"
    );
    assert!(!reason.contains("given twice"), "{reason}");
    assert!(
        f2["observed"]
            .as_str()
            .unwrap()
            .contains("1 of 3 declared bad requests answered as declared"),
        "{f2}"
    );
}

/// Discovers the rate limit of `route` of `url` (`--rate-limit`, ceiling 8, `args`), then
/// checks the draft against the same service with `--only T4`: the draft is a contract whose
/// rate is within 10 % and burst within one request of `name`'s in the hand-written `contract`,
/// with the same burst mode, key and refusal status, and T4 passes it.
fn rate_discovered_then_checked(
    url: &str,
    route: &str,
    args: &[&str],
    (contract, name): (&Path, &str),
) {
    let dir = tempfile::tempdir().unwrap();
    let draft = dir.path().join("draft.toml");
    let mut all = vec!["--rate-limit", "--ceiling", "8"];
    all.extend(args);
    let started = std::time::Instant::now();
    let (code, said) = discover(url, route, &all, &draft);
    let took = started.elapsed();
    let text = std::fs::read_to_string(&draft).unwrap_or_default();
    assert_eq!(code, Some(0), "{said}\n{text}");
    assert!(
        said.contains("at most 8 request(s) at once (--ceiling) and 98 in all"),
        "{said}"
    );
    assert!(took < Duration::from_secs(15), "took {took:?}: {said}");
    let found = contract_at(&draft);
    let want = contract_at(contract);
    let (got, want_limit) = (&found.rate_limits[name], &want.rate_limits[name]);
    let rate = f64::from(want_limit.rate_per_second);
    assert!(
        (f64::from(got.rate_per_second) - rate).abs() <= 0.1 * rate,
        "rate {} against {rate}\n{text}",
        got.rate_per_second
    );
    assert!(got.burst.abs_diff(want_limit.burst) <= 1, "{text}");
    assert_eq!(got.burst_mode, want_limit.burst_mode, "{text}");
    // A bucket per client address looks like one for all from one address: discover leaves
    // the key at its default and marks it.
    if want_limit.key == plimsoll_spec::model::LimitKey::ClientAddress {
        assert_eq!(got.key, plimsoll_spec::model::LimitKey::All, "{text}");
    } else {
        assert_eq!(got.key, want_limit.key, "{text}");
    }
    let status = |c: &plimsoll_spec::Contract, refusal: &str| {
        c.refusal_status(&c.refusals[refusal]).unwrap()
    };
    assert_eq!(
        status(&found, &got.refusal),
        status(&want, &want_limit.refusal),
        "{text}"
    );
    assert_eq!(
        found.refusals[&got.refusal].body, want.refusals[&want_limit.refusal].body,
        "{text}"
    );
    assert!(text.contains("confidence high"), "{text}");
    let (code, report) = check_with(dir.path(), url, &draft, &["--only", "T4"]);
    let verdicts = verdicts(&report);
    assert_eq!(code, Some(0), "{verdicts:?}\n{text}{}", failing(&report));
    assert_eq!(verdict(&report, "T4")["verdict"], "pass", "{verdicts:?}");
}

/// nginx's `limit_req` on /api (5 r/s, burst 3, delayed, 429): discover's draft has the
/// hand-written contract's rate, burst, mode and refusal, and T4 passes it.
#[test]
fn discover_measures_nginx_s_rate_limit_and_t4_passes_its_draft() {
    let dir = tempfile::tempdir().unwrap();
    let (_nginx, url) = nginx(&dir.path().join("nginx"), AS_CONTRACTED, &slow_upstream());
    rate_discovered_then_checked(&url, "GET /api", &[], (&example("contract.toml"), "api"));
}

/// The second service's quota (5/s for each `X-Api-Key`, burst 2, `nodelay`, 429 with
/// `Retry-After: 1`): discover, told the header may key it, finds each value's own bucket and
/// the hand-written contract's values, and T4 passes its draft.
#[test]
fn discover_measures_the_second_service_s_quota_and_t4_passes_its_draft() {
    let url = second_service(plimsoll_example_service::Config::default());
    rate_discovered_then_checked(
        &url,
        "GET /quota",
        &["--key-header", "X-Api-Key"],
        (&second_contract(), "quota"),
    );
}

/// A token bucket of `rate` a second and `burst + 1` tokens, refusing at once with 429 when
/// spent, each answer after `hold`; counting the requests it had at once and in all. Returns
/// its URL, the most at once and the count.
fn counting_limiter(
    rate: f64,
    burst: u32,
    hold: Duration,
) -> (
    String,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (now, most, all) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let size = f64::from(burst + 1);
    let bucket = Arc::new(Mutex::new((size, std::time::Instant::now())));
    let (seen_most, seen_all) = (most.clone(), all.clone());
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let (now, most, all, bucket) = (now.clone(), most.clone(), all.clone(), bucket.clone());
            std::thread::spawn(move || {
                let at_once = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(at_once, Ordering::SeqCst);
                if read_head(&mut stream).is_some() {
                    all.fetch_add(1, Ordering::SeqCst);
                }
                let admitted = {
                    let mut b = bucket.lock().unwrap();
                    let at = std::time::Instant::now();
                    b.0 = (b.0 + at.duration_since(b.1).as_secs_f64() * rate).min(size);
                    b.1 = at;
                    let ok = b.0 >= 1.0;
                    if ok {
                        b.0 -= 1.0;
                    }
                    ok
                };
                std::thread::sleep(hold);
                now.fetch_sub(1, Ordering::SeqCst);
                let answer: &[u8] = if admitted {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                } else {
                    b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 4\r\nConnection: close\r\n\r\nslow"
                };
                let _ = stream.write_all(answer);
            });
        }
    });
    (format!("http://{addr}"), seen_most, seen_all)
}

/// discover `--rate-limit` never has more requests at once than its ceiling nor sends more in
/// all than it says at the start (both counted by the service, a token bucket of 20/s with a
/// burst of 1 whose every answer takes 20 ms and closes its connection), and says how many it
/// sent; its burst, rate and mode are the bucket's.
#[test]
fn discover_s_rate_probes_stay_within_the_ceiling_and_the_count_it_states() {
    let (url, most, all) = counting_limiter(20.0, 1, Duration::from_millis(20));
    let dir = tempfile::tempdir().unwrap();
    let draft = dir.path().join("draft.toml");
    let (code, said) = discover(
        &url,
        "GET /work",
        &["--rate-limit", "--ceiling", "4", "--quiet-ms", "500"],
        &draft,
    );
    let text = std::fs::read_to_string(&draft).unwrap_or_default();
    assert_eq!(code, Some(0), "{said}\n{text}");
    assert!(
        said.contains("at most 4 request(s) at once (--ceiling) and 94 in all"),
        "{said}"
    );
    let at_once = most.load(std::sync::atomic::Ordering::SeqCst);
    let sent = all.load(std::sync::atomic::Ordering::SeqCst);
    assert!((1..=4).contains(&at_once), "{at_once} at once\n{said}");
    // discover's count, from its last lines: the service's, or one more when the connection
    // probe's second request found its connection closed (this service closes every one).
    let counted: usize = said
        .split(" request(s) sent in all")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {said}"));
    assert!(
        counted <= 94 && (sent == counted || sent + 1 == counted),
        "the service saw {sent}, discover counted {counted}\n{said}"
    );
    let found = contract_at(&draft);
    let limit = &found.rate_limits["work"];
    assert_eq!(limit.burst, 1, "{text}");
    assert!((18..=22).contains(&limit.rate_per_second), "{text}");
    assert_eq!(
        limit.burst_mode,
        plimsoll_spec::model::BurstMode::Nodelay,
        "{text}"
    );
}

/// `--rate-limit` with a way to hold a worker, or `--key-header` without `--rate-limit` (which
/// clap alone lets through beside `--slow-ms`), is refused before a request is sent (exit 2),
/// naming the options.
#[test]
fn discover_refuses_rate_limit_options_that_do_not_fit() {
    let dir = tempfile::tempdir().unwrap();
    let (url, most) = counting_upstream(Duration::from_millis(10));
    for (args, named) in [
        (
            &["--rate-limit", "--slow-ms", "10", "--ceiling", "2"][..],
            "--slow-ms",
        ),
        (
            &[
                "--slow-ms",
                "10",
                "--key-header",
                "X-Api-Key",
                "--ceiling",
                "2",
            ][..],
            "--rate-limit",
        ),
    ] {
        let (code, said) = discover(&url, "GET /work", args, &dir.path().join("draft.toml"));
        assert_eq!(code, Some(2), "{said}");
        assert!(said.contains(named), "{said}");
    }
    assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 0);
}

/// `plimsoll load` on the second service's search pool, from its contract alone: the burst's
/// waves admit exactly its two workers and refuse the rest with its `429` and hint, the
/// overload's refused fraction is the prediction's, its own busy series stays within the
/// workers (and reaches them), and capacity comes back; the exposition's temp files, which
/// the contract does not declare, are not judged.
#[test]
fn the_second_service_passes_the_load_profiles_on_its_search_pool() {
    let dir = tempfile::tempdir().unwrap();
    let (url, contract) = second(dir.path(), plimsoll_example_service::Config::default());
    let target = (url.as_str(), contract.as_path());
    let (code, report) = load_with(dir.path(), target, ("search", "burst"), &["--waves", "3"]);
    assert_eq!(code, Some(0), "{}", failing(&report));
    let ids = [
        "L-burst",
        "L-burst.statuses",
        "L-burst.busy-limit",
        "L-burst.recovery",
    ];
    for id in ids {
        assert_eq!(
            verdict(&report, id)["verdict"],
            "pass",
            "{}",
            verdict(&report, id)
        );
    }
    let burst = verdict(&report, "L-burst")["observed"].to_string();
    assert!(burst.contains("admitted per wave 2/8, 2/8, 2/8"), "{burst}");
    let statuses = verdict(&report, "L-burst.statuses").to_string();
    assert!(statuses.contains("200: 6, 429 refused: 18"), "{statuses}");
    assert!(
        statuses.contains("429 with a JSON body whose `/error` is"),
        "{statuses}"
    );

    let args = ["--duration", "4"];
    let (code, report) = load_with(dir.path(), target, ("search", "overload"), &args);
    assert_eq!(code, Some(0), "{}", failing(&report));
    for (id, v) in verdicts(&report) {
        assert_eq!(v, "pass", "{id}: {}", verdict(&report, &id));
    }
}

/// `plimsoll load` on the second service's lookup pool, held by the dependency it calls and the
/// checker plays (nothing in the service knows of Plimsoll): every call is answered after the
/// burst's hold, each wave admits exactly its three workers and two queue places and refuses
/// the rest with its `503` page, and its own busy and queue series stay within them.
#[test]
fn the_second_service_passes_the_burst_profile_on_its_lookup_pool_held_by_its_dependency() {
    let dir = tempfile::tempdir().unwrap();
    let (url, contract) = second(dir.path(), plimsoll_example_service::Config::default());
    let target = (url.as_str(), contract.as_path());
    let (code, report) = load_with(dir.path(), target, ("lookup", "burst"), &["--waves", "2"]);
    assert_eq!(code, Some(0), "{:?}{}", verdicts(&report), failing(&report));
    let burst = verdict(&report, "L-burst")["observed"].to_string();
    assert!(burst.contains("admitted per wave 5/12, 5/12"), "{burst}");
    let busy = verdict(&report, "L-burst.busy-limit");
    assert_eq!(busy["verdict"], "pass", "{busy}");
    assert!(
        busy["observed"]
            .to_string()
            .contains("max busy 3, max queue depth 2"),
        "{busy}"
    );
}

/// `--engine locust` loads the second service's search pool as goose does: Locust's master and
/// two workers send the pool's request with its hook, tell its `429` by the refusal's JSON
/// body, and the overload's verdicts pass.
#[test]
fn the_second_service_passes_the_overload_profile_on_locust() {
    let dir = tempfile::tempdir().unwrap();
    let (url, contract) = second(dir.path(), plimsoll_example_service::Config::default());
    let target = (url.as_str(), contract.as_path());
    let args = ["--duration", "4", "--engine", "locust"];
    let (code, report) = load_with(dir.path(), target, ("search", "overload"), &args);
    assert_eq!(code, Some(0), "{:?}{}", verdicts(&report), failing(&report));
    let statuses = verdict(&report, "L-overload.statuses").to_string();
    assert!(statuses.contains("429 refused"), "{statuses}");
    let main = verdict(&report, "L-overload.refusals").to_string();
    assert!(main.contains("Locust (2 workers) counted search"), "{main}");
}

/// One more search worker than declared: every burst wave admits three where the contract
/// says two, and the service's own busy gauge says so too.
#[test]
fn the_second_service_with_one_more_search_worker_fails_the_burst_profile() {
    let dir = tempfile::tempdir().unwrap();
    let config = plimsoll_example_service::Config {
        search_workers: 3,
        ..Default::default()
    };
    let (url, contract) = second(dir.path(), config);
    let target = (url.as_str(), contract.as_path());
    let (code, report) = load_with(dir.path(), target, ("search", "burst"), &["--waves", "2"]);
    assert_eq!(code, Some(1), "{:?}", verdicts(&report));
    let burst = verdict(&report, "L-burst");
    assert!(
        burst["reason"]
            .to_string()
            .contains("3 admitted, expected exactly 2"),
        "{burst}"
    );
    let busy = verdict(&report, "L-burst.busy-limit");
    assert!(
        busy["reason"].to_string().contains("busy gauge reached 3"),
        "{busy}"
    );
}

/// A busy gauge that never reads more than one: the burst saturates both workers, so the
/// target's own report of itself fails the load's cross-check (the admissions, seen by the
/// client, pass).
#[test]
fn the_second_service_undercounting_its_busy_gauge_fails_the_burst_profile() {
    let dir = tempfile::tempdir().unwrap();
    let config = plimsoll_example_service::Config {
        series_lie: Some(plimsoll_example_service::SeriesLie::BusyCappedAtOne),
        ..Default::default()
    };
    let (url, contract) = second(dir.path(), config);
    let target = (url.as_str(), contract.as_path());
    let (code, report) = load_with(dir.path(), target, ("search", "burst"), &["--waves", "2"]);
    assert_eq!(code, Some(1), "{:?}", verdicts(&report));
    assert_eq!(verdict(&report, "L-burst")["verdict"], "pass");
    let busy = verdict(&report, "L-burst.busy-limit");
    assert!(
        busy["reason"]
            .to_string()
            .contains("never read more than 1 of 2"),
        "{busy}"
    );
}

/// `plimsoll load` on nginx's slow pool, from its contract alone: every attempt holds for the
/// upstream's own time (the contract's `hold.at_least_ms`, no hook), each burst wave admits
/// exactly `limit_conn` and refuses the rest at once with nginx's own 503 page, and under
/// `overload` the refused fraction is the prediction's. With one more connection than declared
/// the waves admit three. nginx declares no series: `busy-limit` is not applicable.
#[test]
fn nginx_passes_the_load_profiles_and_one_more_connection_fails_the_burst_profile() {
    let upstream = slow_upstream();
    let contract = example("contract.toml");
    for (connections, exit, admitted) in [(2, 0, "2/8, 2/8"), (3, 1, "3/8, 3/8")] {
        let dir = tempfile::tempdir().unwrap();
        let conf = Conf {
            connections,
            ..AS_CONTRACTED
        };
        let (_nginx, url) = nginx(&dir.path().join("nginx"), conf, &upstream);
        let target = (url.as_str(), contract.as_path());
        let (code, report) = load_with(dir.path(), target, ("slow", "burst"), &["--waves", "2"]);
        let seen = format!(
            "limit_conn {connections}: {:?}{}",
            verdicts(&report),
            failing(&report)
        );
        assert_eq!(code, Some(exit), "{seen}");
        let burst = verdict(&report, "L-burst").to_string();
        assert!(
            burst.contains(&format!("admitted per wave {admitted}")),
            "{burst}"
        );
        let busy = verdict(&report, "L-burst.busy-limit");
        assert_eq!(busy["verdict"], "not_applicable", "{busy}");
        if connections == 2 {
            let args = ["--duration", "4"];
            let (code, report) = load_with(dir.path(), target, ("slow", "overload"), &args);
            assert_eq!(code, Some(0), "{:?}{}", verdicts(&report), failing(&report));
            let refusals = verdict(&report, "L-overload.refusals");
            assert_eq!(refusals["verdict"], "pass", "{refusals}");
        }
    }
}
