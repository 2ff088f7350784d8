//! Debian's nginx, for the test binaries that run it (fleet: the balancer; services: a target
//! gated by its own contract).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::Process;

/// Debian's nginx, or a failure saying how to get it.
pub fn nginx_binary() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("nginx"))
            .find(|p| p.is_file())
    });
    on_path
        .or_else(|| Some(PathBuf::from("/usr/sbin/nginx")).filter(|p| p.is_file()))
        .unwrap_or_else(|| {
            panic!(
                "nginx is not installed: the fleet tests run the replicas behind a real balancer. \
                 Install Debian's package (apt-get install -y nginx); the test command, bash ci/test.sh, does"
            )
        })
}

/// nginx running `conf` (a whole configuration that listens on loopback `port`) in the
/// foreground from `dir`, its error log there, once it listens; stopped when the process drops.
pub fn start_nginx(dir: &Path, conf: &str, port: u16) -> Process {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).unwrap();
    let mut child = Command::new(nginx_binary())
        .arg("-e")
        .arg(dir.join("error.log"))
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(port, "nginx", &mut child);
    Process(child)
}

/// Where the tests' servers that must be told their port (nginx) listen: a loopback address
/// no client connection starts from (clients start from 127.0.0.1, or 127.0.0.2 for a second
/// client address; the dependencies the checker plays listen on 127.0.0.3). A port picked on it
/// is free until the server binds it a moment later: no test's request, among the many the
/// suite sends at once, can take it as its own source port meanwhile.
pub const SERVER_ADDRESS: &str = "127.0.0.4";

/// A free port on [`SERVER_ADDRESS`] (bound and released; the server binds it a moment later).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind((SERVER_ADDRESS, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until `child` accepts on [`SERVER_ADDRESS`]'s `port`; fails if it exits first or does
/// not listen within 20 s.
pub fn wait_listening(port: u16, what: &str, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect((SERVER_ADDRESS, port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited before listening on {port}: {status}");
        }
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
