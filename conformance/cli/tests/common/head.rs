//! A request head read from a loopback connection, for the small HTTP services the tests play
//! (a slow upstream, a service that counts its requests): bounded in time and in size.

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

/// The request head `stream` sends (up to its blank line), read for at most 10 s and 64 KB;
/// `None` when the client closes or stalls first.
pub fn read_head(stream: &mut TcpStream) -> Option<Vec<u8>> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    Some(head)
}
