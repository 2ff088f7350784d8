//! Debian's nginx, for the test binaries that run it (fleet: the balancer; services: a target
//! gated by its own contract).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::{Process, wait_listening};

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
