//! Shared helpers for the server's loopback tests.
#![allow(dead_code)]

use std::io::Cursor;
use std::time::{Duration, Instant};

use plimsoll_server::state::AppState;
use plimsoll_server::{Config, Embedded};
use plimsoll_spec::{MetricName, Pool};

/// The embedded reference server (its own workspace: temp root and log file) and a client.
pub struct TestServer {
    pub server: Embedded,
    pub client: reqwest::Client,
}

impl TestServer {
    /// A server on 127.0.0.1:0 with hooks on and `overrides` applied as if they were environment
    /// variables.
    pub async fn start(overrides: &[(&str, &str)]) -> TestServer {
        Self::start_with(overrides, true, |c| c).await
    }

    pub async fn start_with(
        overrides: &[(&str, &str)],
        hooks: bool,
        edit: impl FnOnce(Config) -> Config,
    ) -> TestServer {
        Self::start_in(tempfile::tempdir().unwrap(), overrides, hooks, edit).await
    }

    /// [`TestServer::start_with`] in a workspace the test prepared.
    pub async fn start_in(
        workspace: tempfile::TempDir,
        overrides: &[(&str, &str)],
        hooks: bool,
        edit: impl FnOnce(Config) -> Config,
    ) -> TestServer {
        let mut config = Config::from_overrides(overrides).unwrap();
        config.hooks_enabled = hooks;
        TestServer {
            server: Embedded::start_in(workspace, edit(config)).await.unwrap(),
            client: reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .unwrap(),
        }
    }

    pub fn state(&self) -> &AppState {
        self.server.state()
    }

    /// The relay workers of the server's effective contract (R1).
    pub fn relay_workers(&self) -> usize {
        self.state().config.contract.pool(Pool::Relay).workers as usize
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.server.url(), path)
    }

    /// `POST /v1/digitize` of `png` at 40 mm wide: a small design, quick to digitize.
    pub fn digitize(&self, png: &[u8], hook: Option<&str>) -> reqwest::RequestBuilder {
        self.digitize_at(40.0, png, hook)
    }

    /// `POST /v1/digitize` of `png` at `width_mm` wide (the stitches grow with the area).
    pub fn digitize_at(
        &self,
        width_mm: f64,
        png: &[u8],
        hook: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let mut r = self
            .client
            .post(self.url(&format!("/v1/digitize?width_mm={width_mm}")))
            .header("content-type", "image/png")
            .body(png.to_vec());
        if let Some(h) = hook {
            r = r.header("x-plimsoll-hook", h);
        }
        r
    }

    /// A metric's value for `pool` (summed over its other labels), or of an unlabelled metric.
    pub async fn metric(&self, name: MetricName, pool: Option<Pool>) -> f64 {
        let text = self
            .client
            .get(self.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        metric_value(&text, name, pool).unwrap_or(0.0)
    }

    /// Polls a metric until `pred` holds; returns how long it took, or None after `limit`.
    pub async fn wait_metric(
        &self,
        name: MetricName,
        pool: Option<Pool>,
        limit: Duration,
        pred: impl Fn(f64) -> bool,
    ) -> Option<Duration> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if pred(self.metric(name, pool).await) {
                return Some(start.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        None
    }

    pub fn temp_entries(&self) -> Vec<String> {
        std::fs::read_dir(self.server.temp_dir())
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The log file's lines, once everything logged so far is written.
    pub fn log_lines(&self) -> Vec<String> {
        assert!(self.server.flush_log(), "the log writer is stuck");
        std::fs::read_to_string(self.server.log_path())
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

pub fn metric_value(text: &str, name: MetricName, pool: Option<Pool>) -> Option<f64> {
    let labelled = format!("{name}{{");
    let unlabelled = format!("{name} ");
    text.lines()
        .filter(|l| match pool {
            Some(pool) => l.starts_with(&labelled) && l.contains(&format!("pool=\"{pool}\"")),
            None => l.starts_with(&unlabelled),
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .reduce(|a, b| a + b)
}

/// A small flat-colour PNG: a blue disc and a red bar on white.
pub fn png(width: u32, height: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(width, height, |x, y| {
        let (cx, cy) = (width as i64 / 3, height as i64 / 2);
        let (dx, dy) = (x as i64 - cx, y as i64 - cy);
        if dx * dx + dy * dy < (height as i64 / 3).pow(2) {
            image::Rgb([20, 40, 200])
        } else if x > width * 2 / 3 && y > height / 4 && y < height * 3 / 4 {
            image::Rgb([220, 30, 30])
        } else {
            image::Rgb([255, 255, 255])
        }
    });
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

pub async fn problem(
    response: reqwest::Response,
) -> (u16, reqwest::header::HeaderMap, serde_json::Value) {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.json().await.unwrap();
    (status, headers, body)
}

/// A valid 8x8 PNG whose IHDR (with a correct CRC) claims `width` x `height` pixels.
pub fn png_claiming(width: u32, height: u32) -> Vec<u8> {
    let mut bytes = png(8, 8);
    bytes[16..20].copy_from_slice(&width.to_be_bytes());
    bytes[20..24].copy_from_slice(&height.to_be_bytes());
    let crc = crc32fast::hash(&bytes[12..29]);
    bytes[29..33].copy_from_slice(&crc.to_be_bytes());
    bytes
}
