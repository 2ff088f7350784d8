//! End-to-end digitize benchmark: the benchmark's poster ([`plimsoll_engine::synthetic`]) posted
//! to a reference server in its own process, timed from the request's first byte to the
//! response's last, with the server's peak memory (issue 39, part 2).
//!
//! ```text
//! cargo run --release -p plimsoll-server --example bench_pipeline
//! cargo run --release -p plimsoll-server --example bench_pipeline -- --megapixels 4 --runs 9
//! ```
//!
//! For each size (1, 4 and 16 MP by default) the benchmark starts a fresh server — itself,
//! re-run with `--serve`: the contract's defaults, its log to a temporary file —, sends one
//! request to warm it, then `--runs` (default 7) more, each on a new connection, and reads every
//! response to its last byte (`Content-Length`) into one buffer. It prints one row per size: the
//! wall time of each run (min, median, max), the median time to the first byte (the upload and
//! the job; the rest is the 24 MB answer crossing loopback), the median of the job's own run time
//! as the server reports it (`Server-Timing`; the first byte's time less the upload and the job's
//! set-up), the server's peak resident memory over the whole series
//! (`VmHWM`, read from `/proc` before the server is stopped), the body's size and whether its
//! SHA-256 is the one recorded before the pipeline was made faster
//! (`synthetic::BODY_SHA256`): a faster server must answer the same bytes. It exits 1 if any
//! body differs.
//!
//! The client is plain blocking sockets on the benchmark's thread, so it adds no runtime of its
//! own to the figure; the server is a separate process, so its memory is its own.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use plimsoll_engine::synthetic;
use sha2::Digest;

struct Args {
    serve: bool,
    megapixels: Vec<f64>,
    runs: usize,
}

fn parse_args() -> Args {
    let mut args = Args {
        serve: false,
        megapixels: vec![1.0, 4.0, 16.0],
        runs: 7,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--serve" => args.serve = true,
            "--megapixels" => {
                args.megapixels = vec![value().parse().expect("--megapixels: a number")];
            }
            "--runs" => args.runs = value().parse().expect("--runs: a count"),
            other => panic!("unknown argument {other}; see the doc comment"),
        }
    }
    assert!(args.runs > 0, "--runs must be at least 1");
    args
}

/// The child: a reference server with the contract's defaults, configured like the bare server
/// binary (the environment), printing its address once it accepts connections.
fn serve() -> ExitCode {
    let config = plimsoll_server::Config::from_env().expect("the server's configuration");
    let served = tokio::runtime::Runtime::new().and_then(|rt| {
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let server = plimsoll_server::Server::new(config)?;
            println!("listening on {}", listener.local_addr()?);
            // Stopped by the parent (SIGKILL) once it has read the peak memory.
            server.serve(listener, std::future::pending()).await
        })
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_pipeline --serve: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A server in its own process, with its log and job directories in a temporary directory.
struct ServerProcess {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl ServerProcess {
    fn start() -> ServerProcess {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut child = Command::new(std::env::current_exe().expect("own path"))
            .arg("--serve")
            .env("PLIMSOLL_LOG_FILE", dir.path().join("server.log"))
            .env("PLIMSOLL_TEMP_DIR", dir.path())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("the server's first line");
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        ServerProcess {
            child,
            addr,
            _dir: dir,
        }
    }

    /// The most memory the server has held (`VmHWM`), in MB.
    fn peak_rss_mb(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server's /proc status");
        let kb: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .expect("VmHWM in /proc status");
        kb / 1024.0
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One exchange: the time from before the request's first byte is written to after the
/// response's last byte is read, the job's own run time (the server's `Server-Timing` run
/// metric: admission to the job's end, before the body is sent), and the body's length (the body
/// is in the caller's buffer).
struct Exchange {
    wall: Duration,
    /// To the status line's arrival: the upload, the job and its set-up, before the transfer.
    first_byte: Duration,
    run_ms: f64,
    length: usize,
}

/// The name of `Server-Timing`'s run metric, from the contract (the second of its two).
fn run_metric() -> String {
    plimsoll_spec::Contract::embedded()
        .observability()
        .server_timing_metrics
        .get(1)
        .expect("the contract names a run metric")
        .clone()
}

/// The longest any read or write of an exchange may wait: far past a 16 MP job (~0.1 s).
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);

/// One `POST /v1/digitize` on a new connection, its body read into `body` (grown to the body's
/// length if it is shorter: the warm-up's exchange does that, outside the timed runs).
fn digitize(addr: &str, png: &[u8], body: &mut Vec<u8>) -> Exchange {
    let head = format!(
        "POST /v1/digitize?{} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: image/png\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        synthetic::QUERY,
        png.len()
    );
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).expect("connect to the server");
    stream.set_nodelay(true).expect("TCP_NODELAY");
    // A server that stops answering ends the run with a reason instead of hanging it.
    stream
        .set_read_timeout(Some(EXCHANGE_TIMEOUT))
        .expect("a read timeout");
    stream
        .set_write_timeout(Some(EXCHANGE_TIMEOUT))
        .expect("a write timeout");
    stream.write_all(head.as_bytes()).expect("send the head");
    stream.write_all(png).expect("send the image");
    let mut reader = BufReader::with_capacity(1 << 16, stream);
    let mut status = String::new();
    reader.read_line(&mut status).expect("the status line");
    let first_byte = started.elapsed();
    assert!(
        status.starts_with("HTTP/1.1 200"),
        "the server answered {status:?}"
    );
    let mut length = None;
    let mut run_ms = f64::NAN;
    let run = format!("{};dur=", run_metric());
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("a header line");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = Some(value.trim().parse::<usize>().expect("a Content-Length"));
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("server-timing")
        {
            run_ms = value
                .split(',')
                .find_map(|m| m.trim().strip_prefix(run.as_str())?.parse().ok())
                .unwrap_or(f64::NAN);
        }
    }
    let length = length.expect("a Content-Length on the design");
    if body.len() < length {
        body.resize(length, 0);
    }
    // Straight into the buffer, as a client that knows the length reads: what the head's reader
    // holds already, then the socket in reads as large as what is left (a reader in between
    // would copy every byte once more, and its small reads would be counted in the figure).
    let held = reader.buffer().len().min(length);
    body[..held].copy_from_slice(&reader.buffer()[..held]);
    let mut stream = reader.into_inner();
    let mut read = held;
    while read < length {
        match stream.read(&mut body[read..length]).expect("the body") {
            0 => panic!("the connection closed after {read} of {length} body bytes"),
            n => read += n,
        }
    }
    Exchange {
        wall: started.elapsed(),
        first_byte,
        run_ms,
        length,
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() -> ExitCode {
    let args = parse_args();
    if args.serve {
        return serve();
    }
    println!(
        "POST /v1/digitize?{}, the poster as PNG; {} runs after a warm-up, each to the response's last byte",
        synthetic::QUERY,
        args.runs
    );
    println!(
        "| MP | PNG KB | body MB | wall ms min | median | max | first byte ms (median) | job run ms (median) | server peak RSS MB | body SHA-256 |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut all_same = true;
    for &mp in &args.megapixels {
        let png = synthetic::poster_png(mp);
        let server = ServerProcess::start();
        let mut body = Vec::new();
        let first = digitize(&server.addr, &png, &mut body);
        let digest = sha256_hex(&body[..first.length]);
        let body_mb = first.length as f64 / f64::from(1 << 20);
        let mut walls = Vec::with_capacity(args.runs);
        let mut runs = Vec::with_capacity(args.runs);
        let mut first_bytes = Vec::with_capacity(args.runs);
        for _ in 0..args.runs {
            let exchange = digitize(&server.addr, &png, &mut body);
            let same = sha256_hex(&body[..exchange.length]) == digest;
            assert!(same, "two runs of the same input answered different bodies");
            walls.push(exchange.wall);
            runs.push(exchange.run_ms);
            first_bytes.push(exchange.first_byte);
        }
        runs.sort_by(f64::total_cmp);
        let peak = server.peak_rss_mb();
        drop(server);
        walls.sort();
        first_bytes.sort();
        let verdict = match synthetic::recorded_body_sha256(mp) {
            Some(recorded) if recorded == digest => "as recorded".to_owned(),
            Some(_) => {
                all_same = false;
                format!("CHANGED ({digest})")
            }
            None => format!("{digest} (no recorded digest at this size)"),
        };
        println!(
            "| {mp} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {peak:.0} | {verdict} |",
            png.len() as f64 / 1024.0,
            body_mb,
            ms(walls[0]),
            ms(walls[walls.len() / 2]),
            ms(walls[walls.len() - 1]),
            ms(first_bytes[first_bytes.len() / 2]),
            runs[runs.len() / 2],
        );
    }
    if all_same {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
