//! A loopback TCP proxy in front of a reference server that plays a dishonest implementation:
//! it answers the contract endpoint with a claim of its own, and passes everything else
//! through byte for byte — except that a request carrying a test hook, once its client goes
//! away, stays connected upstream for `linger` more (so the job keeps running after the
//! disconnect, as a service that ignores disconnects for a while would).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub struct Proxy {
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Plan {
    upstream: SocketAddr,
    /// `get /v1/contract ` (lower case), the request line the claim answers.
    contract_line: String,
    /// `\r\nx-plimsoll-hook:` (lower case): a held request, which lingers.
    hook_marker: String,
    claim: Vec<u8>,
    linger: Duration,
}

impl Proxy {
    /// Listens on a free loopback port in front of `upstream` (`http://127.0.0.1:PORT`).
    pub async fn start(upstream: &str, claim: Vec<u8>, linger: Duration) -> Proxy {
        let contract = plimsoll_spec::Contract::embedded();
        let plan = Arc::new(Plan {
            upstream: upstream
                .trim_start_matches("http://")
                .parse()
                .expect("an http://IP:PORT upstream"),
            contract_line: format!("get {} ", contract.api().contract.path.to_lowercase()),
            hook_marker: format!("\r\n{}:", contract.hooks().header.to_lowercase()),
            claim,
            linger,
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(serve(client, plan.clone()));
            }
        });
        Proxy { url, task }
    }
}

async fn serve(mut client: TcpStream, plan: Arc<Plan>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match client.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head).to_lowercase();
    if text.starts_with(&plan.contract_line) {
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            plan.claim.len()
        );
        let _ = client.write_all(response.as_bytes()).await;
        let _ = client.write_all(&plan.claim).await;
        let _ = client.shutdown().await;
        return;
    }
    let held = text.contains(&plan.hook_marker);
    let Ok(mut upstream) = TcpStream::connect(plan.upstream).await else {
        return;
    };
    if upstream.write_all(&head).await.is_err() {
        return;
    }
    let (mut client_read, mut client_write) = client.into_split();
    let (mut upstream_read, mut upstream_write) = upstream.into_split();
    tokio::select! {
        _ = async {
            // The client is gone (or done): a held request keeps its upstream a while longer.
            let _ = tokio::io::copy(&mut client_read, &mut upstream_write).await;
            if held {
                tokio::time::sleep(plan.linger).await;
            }
        } => {}
        _ = tokio::io::copy(&mut upstream_read, &mut client_write) => {}
    }
}
