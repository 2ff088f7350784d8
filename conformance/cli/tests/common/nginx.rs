//! Debian's nginx, for the test binaries that run it (fleet: the balancer; services: a target
//! gated by its own contract).

use std::path::PathBuf;

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
