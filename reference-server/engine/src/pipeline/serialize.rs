//! `serialize`: the design as JSON, compact, byte for byte what `serde_json::to_vec(&design)`
//! writes (a property test compares the two on arbitrary designs, and `tests/pipeline/bodies.rs`
//! holds the benchmark's bodies to their recorded SHA-256).
//!
//! A 700K-stitch design is ~25 MB of JSON, and serde_json spent ~30 ms on it (about 40 ns a
//! stitch: a call through its `Serializer` per field, a capacity check per write), half of a
//! 4 MP job. So the design without its stitches (small, and where the floats are) is still
//! written by serde_json, but the stitches, whose every member is an integer or one of five
//! names, are written here:
//!
//! 1. each stitch is written in place ([`Writer`]: a coordinate under 10,000 from a table of
//!    four-digit entries, a larger one from a two-digit table, every copy of a length known when
//!    compiled), in blocks of [`BLOCK`] stitches with a checkpoint per block (B3), into a buffer
//!    charged and reserved once, before the first stitch, at the most the stitches can take when
//!    their coordinates are within the design's extents ([`capacity`]); a design whose extents
//!    understate its coordinates still comes out right, its buffer grown (charged, in slices with
//!    checkpoints) where a block might not fit;
//! 2. a design of [`PARALLEL_FROM`] stitches or more is written by two threads
//!    ([`in_two_halves`]), each half into a buffer of its own, and the JSON is those two parts
//!    ([`Json`]): the response sends one after the other, so they are never joined. No pass
//!    counts the text first: the two halves need no common buffer to meet in (counting was as
//!    long as writing, ~3 ms of a 4 MP job).
//!
//! On the benchmark's 4 MP poster (714K stitches, 24 MB) this takes ~4 ms on two threads
//! where serde_json took ~30 ms on the same 2-core machine (docs/benchmarks.md).

use std::mem::MaybeUninit;

use plimsoll_spec::{Design, Extents, Stitch, StitchCommand};

use super::halves::{GoOn, in_two_halves};
use super::{reserve_ticked, vec_bytes};
use crate::job::{Charge, Interrupt, JobContext, StageError};

/// Stitches per block between checkpoints: ~0.1 ms of formatting in a release build, and a
/// count well under `STITCHES_PER_MS` × the contract's interval.
const BLOCK: usize = 4096;

/// A design's JSON as the parts its writers wrote: one, or two when two threads wrote it. The
/// text is their concatenation; a response sends the parts one after the other, so a 24 MB
/// body is never copied to join them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Json {
    parts: Vec<Vec<u8>>,
}

impl Json {
    /// The text's length in bytes (every part's).
    pub fn len(&self) -> usize {
        self.parts.iter().map(Vec::len).sum()
    }

    /// Whether there is no text at all (never, for a serialized design).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The parts, in order.
    pub fn parts(&self) -> &[Vec<u8>] {
        &self.parts
    }

    /// The parts, in order, to send without copying them.
    pub fn into_parts(self) -> Vec<Vec<u8>> {
        self.parts
    }

    /// The whole text in one buffer (a copy), for a caller that needs one slice.
    pub fn to_vec(&self) -> Vec<u8> {
        self.parts.concat()
    }
}

/// Writes the design as JSON, charging the buffers it writes into.
pub fn serialize(ctx: &JobContext, design: &Design) -> Result<Json, StageError> {
    let _design = ctx.charge(vec_bytes(&design.stitches))?;
    let failed =
        |e: serde_json::Error| StageError::failed(format!("serialising the design failed: {e}"));
    let head = serde_json::to_vec(&without_stitches(design)).map_err(failed)?;
    // The head ends in `[]}`: `stitches` is the last field, empty. The stitches go between the
    // brackets.
    let Some(open) = head.strip_suffix(b"]}") else {
        return Err(StageError::failed(
            "serialising the design failed: `stitches` is not the last field",
        ));
    };
    if !open.ends_with(b"[") {
        return Err(StageError::failed(
            "serialising the design failed: `stitches` is not the last field",
        ));
    }
    let stitches = &design.stitches;
    let per_stitch = text_bound(&design.extents);
    let n = stitches.len();
    if n < PARALLEL_FROM {
        let mut part = Part::new(ctx, open, n, per_stitch, &mut || ctx.checkpoint())?;
        part.write(stitches, false, &mut || ctx.checkpoint())?;
        part.close(&mut || ctx.checkpoint())?;
        return Ok(Json {
            parts: vec![part.text],
        });
    }
    let split = n / 2 / BLOCK * BLOCK;
    let (first, second) = stitches.split_at(split);
    let (first, second) = in_two_halves(
        ctx,
        |go_on| {
            let mut part = Part::new(ctx, open, first.len(), per_stitch, go_on)?;
            part.write(first, false, go_on)?;
            Ok(part.text)
        },
        |go_on| {
            let mut part = Part::new(ctx, b"", second.len(), per_stitch, go_on)?;
            part.write(second, true, go_on)?;
            part.close(go_on)?;
            Ok(part.text)
        },
    )?;
    Ok(Json {
        parts: vec![first, second],
    })
}

/// The fewest stitches written by two threads: below it, starting the second thread costs about
/// what it saves.
const PARALLEL_FROM: usize = 16 * BLOCK;

/// The longest text of one stitch and its comma: a coordinate of eleven characters
/// (`-2147483648`) on both axes, and the longest command.
const MAX_STITCH_TEXT: usize =
    X.len() + 11 + Y.len() + 11 + CMD.len() + COLOR_CHANGE.len() + b",".len();

/// The longest text of one stitch and its comma when its coordinates are within `extents`: what
/// a part's buffer is reserved for, per stitch, before the first is written.
fn text_bound(extents: &Extents) -> usize {
    let [a, b, c, d] = [extents.min_x, extents.max_x, extents.min_y, extents.max_y].map(int_len);
    let digits = a.max(b).max(c).max(d);
    X.len() + digits + Y.len() + digits + CMD.len() + COLOR_CHANGE.len() + b",".len()
}

/// One part of the text being written: its buffer and the charge that holds it.
struct Part<'a> {
    text: Vec<u8>,
    charge: Charge<'a>,
}

impl<'a> Part<'a> {
    /// A part that starts with `lead` and has room for `stitches` stitches of `per_stitch`
    /// bytes, and a block of the longest, charged before it is allocated.
    fn new(
        ctx: &'a JobContext,
        lead: &[u8],
        stitches: usize,
        per_stitch: usize,
        go_on: GoOn<'_>,
    ) -> Result<Self, Interrupt> {
        let mut part = Part {
            text: Vec::new(),
            charge: ctx.charge(0)?,
        };
        let room = lead.len() + stitches.saturating_mul(per_stitch) + capacity(BLOCK) + 2;
        reserve_ticked(&mut part.text, room, &mut part.charge, 0, go_on)?;
        part.text.extend_from_slice(lead);
        Ok(part)
    }

    /// Writes `stitches`, comma-separated (and after a comma when `leading_comma`), asking
    /// `go_on` before every block of [`BLOCK`] stitches; a block is written into room reserved
    /// for the longest text it could have, so a buffer reserved too small is grown, never
    /// overrun.
    fn write(
        &mut self,
        stitches: &[Stitch],
        leading_comma: bool,
        go_on: GoOn<'_>,
    ) -> Result<(), Interrupt> {
        for (b, block) in stitches.chunks(BLOCK).enumerate() {
            go_on()?;
            reserve_ticked(
                &mut self.text,
                capacity(block.len()),
                &mut self.charge,
                0,
                go_on,
            )?;
            let mut w = Writer {
                buf: self.text.spare_capacity_mut(),
                at: 0,
            };
            for (i, stitch) in block.iter().enumerate() {
                if leading_comma || b > 0 || i > 0 {
                    w.put(b",");
                }
                w.stitch(stitch);
            }
            let written = w.at;
            // SAFETY: the writer wrote every byte of the spare capacity's first `written`, front
            // to back without a gap — every `put` writes the `N` bytes it advances by, every
            // `int` each byte between its start and its end (asserted, or four bytes from a
            // table of them, the ones past its end overwritten by the `put` that always follows)
            // — and `written` is within the spare capacity (each write is a checked slice).
            unsafe { self.text.set_len(self.text.len() + written) };
        }
        Ok(())
    }

    /// Writes the `]}` that closes the stitches and the design.
    fn close(&mut self, go_on: GoOn<'_>) -> Result<(), Interrupt> {
        reserve_ticked(&mut self.text, 2, &mut self.charge, 0, go_on)?;
        self.text.extend_from_slice(b"]}");
        Ok(())
    }
}

/// Room for `stitches` stitches of the longest text each.
fn capacity(stitches: usize) -> usize {
    stitches.saturating_mul(MAX_STITCH_TEXT)
}

fn without_stitches(design: &Design) -> Design {
    Design {
        format: design.format.clone(),
        width_mm: design.width_mm,
        height_mm: design.height_mm,
        threads: design.threads.clone(),
        extents: design.extents,
        stitch_count: design.stitch_count,
        stitches: Vec::new(),
    }
}

const X: &[u8; 5] = b"{\"x\":";
const Y: &[u8; 5] = b",\"y\":";
const CMD: &[u8; 8] = b",\"cmd\":\"";
const STITCH: &[u8; 8] = b"stitch\"}";
const JUMP: &[u8; 6] = b"jump\"}";
const TRIM: &[u8; 6] = b"trim\"}";
const COLOR_CHANGE: &[u8; 14] = b"color_change\"}";
const END: &[u8; 5] = b"end\"}";

/// Decimal digits of `v`, with its minus sign.
fn int_len(v: i32) -> usize {
    usize::from(v < 0) + digits(v.unsigned_abs())
}

fn digits(n: u32) -> usize {
    n.checked_ilog10().unwrap_or(0) as usize + 1
}

/// "00" to "99", so each division by 100 writes two digits.
const PAIRS: [[u8; 2]; 100] = {
    let mut pairs = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        pairs[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    pairs
};

/// `0` to `9999` as their digits, left-aligned in four bytes: one copy of a length known when
/// compiled writes a coordinate of up to four digits (most of them: a design is at most
/// 10,000 units across when it is under a metre), the bytes past its digits overwritten by what
/// follows it.
static SMALL: [[u8; 4]; 10_000] = {
    let mut small = [[0u8; 4]; 10_000];
    let mut n = 0;
    while n < 10_000 {
        let mut digits = [0u8; 4];
        let (mut len, mut m) = (0, n);
        while m > 0 || len == 0 {
            len += 1;
            m /= 10;
        }
        let (mut i, mut m) = (len, n);
        while i > 0 {
            i -= 1;
            digits[i] = b'0' + (m % 10) as u8;
            m /= 10;
        }
        small[n] = digits;
        n += 1;
    }
    small
};

/// Writes into a part's spare capacity, reserved for the block's longest text, front to back. Every copy
/// has a length known when compiled (a constant, a digit pair), so none becomes a call to
/// `memcpy`: appending each stitch's variable-length text with `extend_from_slice` was one such
/// call a stitch, formatting it in a stack buffer first stalled on reading back what had just
/// been written byte by byte, and writing into a zeroed buffer paid for a 24 MB `memset` (the
/// allocator reuses the last body's memory, so `calloc` cannot skip it) — 3 ms of a 4 MP job.
struct Writer<'a> {
    buf: &'a mut [MaybeUninit<u8>],
    at: usize,
}

impl Writer<'_> {
    #[inline]
    fn put<const N: usize>(&mut self, bytes: &[u8; N]) {
        self.buf[self.at..self.at + N].write_copy_of_slice(bytes);
        self.at += N;
    }

    /// `v` in decimal, as `itoa` (which serde_json uses) writes it. Inlined into each stitch:
    /// as a call it was a sixth of the stage.
    #[inline(always)]
    fn int(&mut self, v: i32) {
        // Four bytes written, the digits' count kept: the rest is overwritten by the next `put`
        // (every `int` is followed by one of five bytes or more), so never at the part's end.
        if let Ok(n) = u16::try_from(v)
            && n < 10_000
            && self.at + 4 <= self.buf.len()
        {
            let end = self.at + digits(u32::from(n));
            self.put(&SMALL[usize::from(n)]);
            self.at = end;
            return;
        }
        if v < 0 {
            self.put(b"-");
        }
        let mut n = v.unsigned_abs();
        let end = self.at + digits(n);
        let mut i = end;
        while n >= 100 {
            i -= 2;
            self.buf[i..i + 2].write_copy_of_slice(&PAIRS[(n % 100) as usize]);
            n /= 100;
        }
        if n >= 10 {
            i -= 2;
            self.buf[i..i + 2].write_copy_of_slice(&PAIRS[n as usize]);
        } else {
            i -= 1;
            self.buf[i].write(b'0' + n as u8);
        }
        // Every byte from the start to the end was written: what `serialize`'s `set_len` needs.
        assert_eq!(i, self.at, "the digits counted are the digits written");
        self.at = end;
    }

    /// `{"x":X,"y":Y,"cmd":"NAME"}`, as serde_json writes a [`Stitch`].
    #[inline]
    fn stitch(&mut self, s: &Stitch) {
        self.put(X);
        self.int(s.x);
        self.put(Y);
        self.int(s.y);
        self.put(CMD);
        match s.cmd {
            StitchCommand::Stitch => self.put(STITCH),
            StitchCommand::Jump => self.put(JUMP),
            StitchCommand::Trim => self.put(TRIM),
            StitchCommand::ColorChange => self.put(COLOR_CHANGE),
            StitchCommand::End => self.put(END),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::job::JobConfig;

    /// A job with a minute and a gigabyte, its temp dir under `root`.
    fn job(root: &std::path::Path) -> JobContext {
        JobContext::new(JobConfig {
            cancel: Default::default(),
            deadline: Instant::now() + Duration::from_secs(60),
            memory_cap_bytes: 1 << 30,
            upload_bytes: 0,
            temp_root: root.to_path_buf(),
            hooks: Vec::new(),
            progress: Default::default(),
        })
        .unwrap()
    }

    /// Every digit count, both signs and the extremes, with every command: the bytes are
    /// serde_json's, though the extents (all zero) understate every coordinate, so each block
    /// grows the buffer reserved for one-digit coordinates.
    #[test]
    fn stitches_are_written_as_serde_json_writes_them_beyond_the_extents() {
        let values = [
            0,
            1,
            9,
            10,
            99,
            100,
            999,
            1000,
            8500,
            9_999,
            10_000,
            -9_999,
            99_999,
            100_000,
            -1,
            -10,
            -1_000_000,
            1_000_000,
            i32::MAX,
            i32::MIN,
        ];
        let commands = [
            StitchCommand::Stitch,
            StitchCommand::Jump,
            StitchCommand::Trim,
            StitchCommand::ColorChange,
            StitchCommand::End,
        ];
        let mut stitches = Vec::new();
        for (i, &x) in values.iter().enumerate() {
            for (k, &cmd) in commands.iter().enumerate() {
                let y = values[(i + 3 * k + 1) % values.len()];
                stitches.push(Stitch { x, y, cmd });
            }
        }
        let design = Design {
            format: plimsoll_spec::design::DESIGN_FORMAT.into(),
            width_mm: 12.5,
            height_mm: 0.1,
            threads: Vec::new(),
            extents: Default::default(),
            stitch_count: 3,
            stitches,
        };
        let root = tempfile::tempdir().unwrap();
        let ctx = job(root.path());
        let json = serialize(&ctx, &design).unwrap();
        assert_eq!(json.parts().len(), 1);
        assert_eq!(
            String::from_utf8(json.to_vec()).unwrap(),
            serde_json::to_string(&design).unwrap()
        );
    }

    /// A design long enough to be written by two threads: two parts, whose text is serde_json's,
    /// the second starting at a comma; with its extents stated, each part is the one buffer
    /// reserved for it, never grown; with them understated, the same bytes.
    #[test]
    fn a_long_design_written_by_two_threads_is_serde_json_s_text() {
        let commands = [
            StitchCommand::Stitch,
            StitchCommand::Jump,
            StitchCommand::Trim,
        ];
        let stitches: Vec<Stitch> = (0..PARALLEL_FROM as i32 * 2 + 77)
            .map(|i| Stitch {
                x: i * 37 - 50_000,
                y: -(i % 1000),
                cmd: commands[i as usize % 3],
            })
            .collect();
        let mut design = Design {
            format: plimsoll_spec::design::DESIGN_FORMAT.into(),
            width_mm: 850.0,
            height_mm: 0.4,
            threads: Vec::new(),
            extents: Default::default(),
            stitch_count: stitches.len() as u64,
            stitches,
        };
        let root = tempfile::tempdir().unwrap();
        let ctx = job(root.path());
        let understated = serialize(&ctx, &design).unwrap();
        assert_eq!(understated.to_vec(), serde_json::to_vec(&design).unwrap());
        let (xs, ys) = (
            design.stitches.iter().map(|s| s.x),
            design.stitches.iter().map(|s| s.y),
        );
        design.extents = Extents {
            min_x: xs.clone().min().unwrap(),
            max_x: xs.max().unwrap(),
            min_y: ys.clone().min().unwrap(),
            max_y: ys.max().unwrap(),
        };
        let json = serialize(&ctx, &design).unwrap();
        assert_eq!(json.to_vec(), serde_json::to_vec(&design).unwrap());
        let [first, second] = json.parts() else {
            panic!("{} parts", json.parts().len())
        };
        assert!(second.starts_with(b",{") && first.ends_with(b"}"));
        let per_stitch = text_bound(&design.extents);
        let half = design.stitches.len() / 2 / BLOCK * BLOCK;
        assert!(first.capacity() <= first.len() + half * per_stitch + capacity(BLOCK) + 2);
        assert!(
            second.capacity() <= (design.stitches.len() - half) * per_stitch + capacity(BLOCK) + 2
        );
    }
}
