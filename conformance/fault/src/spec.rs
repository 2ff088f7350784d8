//! `--fault SPEC`: one fault, written as Toxiproxy names it — a toxic, then its parameters
//! (`latency:latency=50,jitter=10`, `slicer:average_size=1,delay=20000`,
//! `reset_peer:timeout=500`, `reset_peer:on_close=1`, `timeout:timeout=0`, `bandwidth:rate=64`, `slow_close:delay=300`),
//! each with an optional `stream=upstream|downstream|both`.
//!
//! Why Toxiproxy's words: people who inject faults already know them, and a fault found here
//! can be replayed with Toxiproxy by copying the spec. Where this proxy differs, the difference
//! is ours to say: a spec names one whole fault, so `stream` defaults to `both` (Toxiproxy adds
//! a toxic per stream, `downstream` by default); `reset_peer` also takes `bytes` (reset once
//! that many bytes passed) and `on_close=1` (a close passed on as a reset), and `blackhole` is `timeout` with `timeout=0` (data is dropped,
//! the sockets are kept open).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The direction a toxic acts on, in Toxiproxy's words: upstream is client → server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Client → server: the request (head, body) is affected.
    Upstream,
    /// Server → client: the response is affected.
    Downstream,
    /// Both directions, each on its own (latency is added once each way).
    Both,
}

impl Stream {
    /// Whether this stream covers `direction` (which is `Upstream` or `Downstream`).
    pub fn covers(self, direction: Stream) -> bool {
        self == Stream::Both || self == direction
    }

    /// Its name in a spec (`stream=upstream`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Stream::Upstream => "upstream",
            Stream::Downstream => "downstream",
            Stream::Both => "both",
        }
    }
}

/// What the proxy does to the bytes of the covered stream(s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Toxic {
    /// Every chunk is delivered `latency ± jitter` later (uniform, seeded), order kept.
    Latency {
        /// The delay added to each chunk.
        latency: Duration,
        /// The largest deviation from `latency`, either way (a delay never goes below 0).
        jitter: Duration,
    },
    /// At most `rate` KB (1000 bytes) per second.
    Bandwidth {
        /// Kilobytes per second, at least 1.
        rate_kb: u64,
    },
    /// Every write is cut into pieces of `average_size ± size_variation` bytes, `delay`
    /// apart.
    Slicer {
        /// The mean piece, in bytes (at least 1).
        average_size: usize,
        /// The largest deviation of a piece from `average_size` (below it).
        size_variation: usize,
        /// The pause between two pieces.
        delay: Duration,
    },
    /// Both sockets are reset (RST, `SO_LINGER` 0) once `timeout` has passed since the
    /// connection opened, or once `bytes` passed in the stream, whichever comes first; with
    /// `on_close`, a close (FIN) of the covered stream's sender is passed on as a reset
    /// instead: a client that vanishes (killed, or dropped by a NAT) rather than one that
    /// says goodbye.
    ResetPeer {
        /// From the connection's opening; `None`: only `bytes` triggers it.
        timeout: Option<Duration>,
        /// Bytes forwarded in the covered stream(s); `None`: only `timeout` triggers it.
        bytes: Option<u64>,
        /// Whether a close is passed on as a reset (`on_close=1`; ours, not Toxiproxy's).
        on_close: bool,
    },
    /// Data of the stream is dropped; the connection is closed (FIN) after `timeout`, or kept
    /// open for ever when it is zero (`blackhole`).
    Timeout {
        /// How long until the connection is closed; zero keeps it.
        timeout: Duration,
    },
    /// A close (FIN) is passed on `delay` after it arrived.
    SlowClose {
        /// How long a close is held back.
        delay: Duration,
    },
}

/// One fault: a toxic on a stream. Parsed from and printed as the `--fault` spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// What is done to the bytes.
    pub toxic: Toxic,
    /// Which direction it is done to.
    pub stream: Stream,
}

impl Fault {
    /// The toxic's name (`latency`, `bandwidth`, …): a fault matrix's column, and the suffix of
    /// its run's report files.
    pub fn toxic_name(&self) -> &'static str {
        match self.toxic {
            Toxic::Latency { .. } => "latency",
            Toxic::Bandwidth { .. } => "bandwidth",
            Toxic::Slicer { .. } => "slicer",
            Toxic::ResetPeer { .. } => "reset_peer",
            Toxic::Timeout { timeout } if timeout.is_zero() => "blackhole",
            Toxic::Timeout { .. } => "timeout",
            Toxic::SlowClose { .. } => "slow_close",
        }
    }
}

/// Why a `--fault` spec was refused: each names the part at fault and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The toxic's name is none of the known ones.
    #[error("unknown toxic `{0}` (known: {TOXICS})")]
    UnknownToxic(String),
    /// A parameter this toxic does not take.
    #[error("`{toxic}` takes no parameter `{key}` (it takes: {known})")]
    UnknownParameter {
        /// The toxic.
        toxic: &'static str,
        /// The parameter given.
        key: String,
        /// The parameters it takes.
        known: &'static str,
    },
    /// A parameter not written `key=value`.
    #[error("`{0}` is not `key=value`")]
    NotKeyValue(String),
    /// A parameter given twice.
    #[error("parameter `{0}` is given twice")]
    Duplicate(String),
    /// A value that is not a whole number in its range, or not a stream.
    #[error("`{key}={value}`: expected {expected}")]
    BadValue {
        /// The parameter.
        key: String,
        /// The value given.
        value: String,
        /// What it must be.
        expected: String,
    },
    /// A parameter the toxic cannot do without.
    #[error("`{toxic}` needs `{key}`")]
    Missing {
        /// The toxic.
        toxic: &'static str,
        /// The parameter it needs.
        key: &'static str,
    },
}

/// The toxics' names, for the error that names an unknown one and for `--help`.
pub const TOXICS: &str = "latency, bandwidth, slicer, reset_peer, timeout, blackhole, slow_close";

/// The largest time a parameter may name (10 minutes): longer than any run's bound.
const MAX_MS: u64 = 600_000;

/// The parameters of one spec: each one the toxic takes, given at most once.
struct Params {
    toxic: &'static str,
    pairs: Vec<(String, String)>,
}

impl Params {
    fn parse(toxic: &'static str, known: &'static str, text: &str) -> Result<Params, SpecError> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for part in text.split(',').filter(|p| !p.trim().is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| SpecError::NotKeyValue(part.to_owned()))?;
            let (k, v) = (k.trim().to_owned(), v.trim().to_owned());
            if !known.split(", ").any(|name| name == k) {
                return Err(SpecError::UnknownParameter {
                    toxic,
                    key: k,
                    known,
                });
            }
            if pairs.iter().any(|(seen, _)| *seen == k) {
                return Err(SpecError::Duplicate(k));
            }
            pairs.push((k, v));
        }
        Ok(Params { toxic, pairs })
    }

    fn take(&mut self, key: &str) -> Option<String> {
        let at = self.pairs.iter().position(|(k, _)| k == key)?;
        Some(self.pairs.remove(at).1)
    }

    /// A whole number in `min..=max`, if given.
    fn number(&mut self, key: &str, min: u64, max: u64) -> Result<Option<u64>, SpecError> {
        let Some(value) = self.take(key) else {
            return Ok(None);
        };
        match value.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(SpecError::BadValue {
                key: key.to_owned(),
                value,
                expected: format!("a whole number from {min} to {max}"),
            }),
        }
    }

    fn millis(&mut self, key: &str) -> Result<Option<Duration>, SpecError> {
        Ok(self.number(key, 0, MAX_MS)?.map(Duration::from_millis))
    }

    fn required<T>(&self, key: &'static str, value: Option<T>) -> Result<T, SpecError> {
        value.ok_or(SpecError::Missing {
            toxic: self.toxic,
            key,
        })
    }

    fn stream(&mut self) -> Result<Stream, SpecError> {
        match self.take("stream").as_deref() {
            None | Some("both") => Ok(Stream::Both),
            Some("upstream") => Ok(Stream::Upstream),
            Some("downstream") => Ok(Stream::Downstream),
            Some(other) => Err(SpecError::BadValue {
                key: "stream".into(),
                value: other.into(),
                expected: "upstream, downstream or both".into(),
            }),
        }
    }
}

/// The largest pause between slices, in microseconds (the same 10 minutes).
const MICROS_MAX: u64 = MAX_MS * 1000;

fn parse_toxic(name: &str, text: &str) -> Result<Fault, SpecError> {
    let (toxic, known) = match name {
        "latency" => ("latency", "latency, jitter, stream"),
        "bandwidth" => ("bandwidth", "rate, stream"),
        "slicer" => ("slicer", "average_size, size_variation, delay, stream"),
        "reset_peer" => ("reset_peer", "timeout, bytes, on_close, stream"),
        "timeout" => ("timeout", "timeout, stream"),
        "blackhole" => ("blackhole", "stream"),
        "slow_close" => ("slow_close", "delay, stream"),
        other => return Err(SpecError::UnknownToxic(other.to_owned())),
    };
    let mut p = Params::parse(toxic, known, text)?;
    let toxic = match toxic {
        "latency" => Toxic::Latency {
            latency: p.millis("latency").and_then(|v| p.required("latency", v))?,
            jitter: p.millis("jitter")?.unwrap_or_default(),
        },
        "bandwidth" => Toxic::Bandwidth {
            rate_kb: p
                .number("rate", 1, 1_000_000_000_000)
                .and_then(|v| p.required("rate", v))?,
        },
        "slicer" => slicer(&mut p)?,
        "reset_peer" => Toxic::ResetPeer {
            timeout: p.millis("timeout")?,
            bytes: p.number("bytes", 1, 1_000_000_000_000)?,
            on_close: p.number("on_close", 0, 1)? == Some(1),
        },
        "timeout" => Toxic::Timeout {
            timeout: p.millis("timeout")?.unwrap_or_default(),
        },
        "blackhole" => Toxic::Timeout {
            timeout: Duration::ZERO,
        },
        _ => Toxic::SlowClose {
            delay: p.millis("delay").and_then(|v| p.required("delay", v))?,
        },
    };
    Ok(Fault {
        toxic,
        stream: p.stream()?,
    })
}

fn slicer(p: &mut Params) -> Result<Toxic, SpecError> {
    let average_size = p
        .number("average_size", 1, 65_536)
        .and_then(|v| p.required("average_size", v))? as usize;
    let size_variation = p.number("size_variation", 0, 65_536)?.unwrap_or(0) as usize;
    if size_variation >= average_size {
        return Err(SpecError::BadValue {
            key: "size_variation".into(),
            value: size_variation.to_string(),
            expected: "less than average_size".into(),
        });
    }
    Ok(Toxic::Slicer {
        average_size,
        size_variation,
        delay: Duration::from_micros(p.number("delay", 0, MICROS_MAX)?.unwrap_or(0)),
    })
}

impl FromStr for Fault {
    type Err = SpecError;

    fn from_str(spec: &str) -> Result<Fault, SpecError> {
        let (name, params) = spec.trim().split_once(':').unwrap_or((spec.trim(), ""));
        let mut fault = parse_toxic(name, params)?;
        // `reset_peer` with no trigger resets at once, as Toxiproxy's `timeout=0` does.
        if let Toxic::ResetPeer {
            timeout: timeout @ None,
            bytes: None,
            on_close: false,
        } = &mut fault.toxic
        {
            *timeout = Some(Duration::ZERO);
        }
        Ok(fault)
    }
}

/// The spec again, every parameter spelled out: what the report shows and what parses back
/// to the same fault.
impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: &Duration| d.as_millis();
        match &self.toxic {
            Toxic::Latency { latency, jitter } => {
                write!(f, "latency:latency={},jitter={}", ms(latency), ms(jitter))
            }
            Toxic::Bandwidth { rate_kb } => write!(f, "bandwidth:rate={rate_kb}"),
            Toxic::Slicer {
                average_size,
                size_variation,
                delay,
            } => write!(
                f,
                "slicer:average_size={average_size},size_variation={size_variation},delay={}",
                delay.as_micros()
            ),
            Toxic::ResetPeer {
                timeout,
                bytes,
                on_close,
            } => {
                write!(f, "reset_peer:")?;
                if let Some(t) = timeout {
                    write!(f, "timeout={},", ms(t))?;
                }
                if let Some(b) = bytes {
                    write!(f, "bytes={b},")?;
                }
                if *on_close {
                    write!(f, "on_close=1,")?;
                }
                Ok(())
            }
            Toxic::Timeout { timeout } => write!(f, "timeout:timeout={},", ms(timeout)),
            Toxic::SlowClose { delay } => write!(f, "slow_close:delay={}", ms(delay)),
        }?;
        let sep = if matches!(self.toxic, Toxic::ResetPeer { .. } | Toxic::Timeout { .. }) {
            ""
        } else {
            ","
        };
        write!(f, "{sep}stream={}", self.stream.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Fault, SpecError> {
        s.parse()
    }

    #[test]
    fn toxiproxy_specs_parse_with_their_defaults() {
        let f = parse("latency:latency=50,jitter=10").unwrap();
        assert_eq!(f.stream, Stream::Both);
        assert_eq!(
            f.toxic,
            Toxic::Latency {
                latency: Duration::from_millis(50),
                jitter: Duration::from_millis(10)
            }
        );
        let f = parse("slicer:average_size=1,delay=20000,stream=upstream").unwrap();
        assert_eq!(f.stream, Stream::Upstream);
        assert!(
            matches!(f.toxic, Toxic::Slicer { average_size: 1, size_variation: 0, delay } if delay == Duration::from_millis(20))
        );
        assert_eq!(
            parse("blackhole").unwrap().toxic,
            Toxic::Timeout {
                timeout: Duration::ZERO
            }
        );
        assert_eq!(
            parse("reset_peer").unwrap().toxic,
            Toxic::ResetPeer {
                timeout: Some(Duration::ZERO),
                bytes: None,
                on_close: false,
            }
        );
        assert_eq!(
            parse("reset_peer:on_close=1,stream=upstream")
                .unwrap()
                .toxic,
            Toxic::ResetPeer {
                timeout: None,
                bytes: None,
                on_close: true,
            }
        );
    }

    #[test]
    fn every_fault_prints_a_spec_that_parses_back_to_it() {
        for spec in [
            "latency:latency=50,jitter=10,stream=downstream",
            "bandwidth:rate=64",
            "slicer:average_size=8,size_variation=3,delay=500",
            "reset_peer:timeout=500",
            "reset_peer:bytes=100,stream=upstream",
            "reset_peer:timeout=10,bytes=100",
            "reset_peer:on_close=1,stream=upstream",
            "timeout:timeout=200",
            "blackhole:stream=upstream",
            "slow_close:delay=300",
        ] {
            let fault = parse(spec).unwrap();
            assert_eq!(
                parse(&fault.to_string()).unwrap(),
                fault,
                "{spec} → {fault}"
            );
        }
    }

    #[test]
    fn bad_specs_are_refused_naming_what_is_wrong() {
        assert_eq!(
            parse("jitterbug"),
            Err(SpecError::UnknownToxic("jitterbug".into()))
        );
        assert!(matches!(
            parse("latency:ms=50"),
            Err(SpecError::UnknownParameter { key, .. }) if key == "ms"
        ));
        assert!(matches!(
            parse("latency:jitter=5"),
            Err(SpecError::Missing { key: "latency", .. })
        ));
        assert!(matches!(
            parse("latency:latency=-1"),
            Err(SpecError::BadValue { .. })
        ));
        assert!(matches!(
            parse("latency:latency=99999999999999999999999"),
            Err(SpecError::BadValue { .. })
        ));
        assert!(matches!(
            parse("bandwidth:rate=0"),
            Err(SpecError::BadValue { .. })
        ));
        assert!(matches!(
            parse("slicer:average_size=2,size_variation=2"),
            Err(SpecError::BadValue { .. })
        ));
        assert!(matches!(
            parse("latency:latency"),
            Err(SpecError::NotKeyValue(_))
        ));
        assert!(matches!(
            parse("latency:latency=1,latency=2"),
            Err(SpecError::Duplicate(_))
        ));
        assert!(matches!(
            parse("latency:latency=1,stream=sideways"),
            Err(SpecError::BadValue { .. })
        ));
        assert!(parse("").is_err());
    }
}
