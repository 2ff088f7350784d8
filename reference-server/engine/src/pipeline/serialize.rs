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
//! 1. the exact length of the whole text is counted first (the digits of every coordinate), so
//!    the buffer is charged and allocated once, at its final size — never grown, never copied,
//!    never more than the body;
//! 2. each stitch is then written in place ([`Writer`]: a coordinate under 10,000 from a table of
//!    four-digit entries, a larger one from a two-digit table, every
//!    copy of a length known when compiled), in blocks of [`BLOCK`] stitches with a checkpoint
//!    per block (B3), as the counting pass has too;
//! 3. a design of [`PARALLEL_FROM`] stitches or more is counted and written by two threads
//!    ([`in_two_halves`]): each half counted by its own, then each half written into its own
//!    part of the buffer, split where the first half's text ends ([`write_stitches`]); the job's
//!    thread still passes one checkpoint per block, and the helper stops at its next block once
//!    the job is interrupted.
//!
//! On the benchmark's 4 MP poster (714K stitches, 24 MB) this takes ~4 ms on two threads
//! where serde_json took ~30 ms on the same 2-core machine (docs/benchmarks.md).

use std::mem::MaybeUninit;

use plimsoll_spec::{Design, Stitch, StitchCommand};

use super::halves::{GoOn, in_two_halves};
use super::vec_bytes;
use crate::job::{Interrupt, JobContext, StageError};

/// Stitches per block between checkpoints: ~0.1 ms of formatting in a release build, and a
/// count well under `STITCHES_PER_MS` × the contract's interval.
const BLOCK: usize = 4096;

/// Writes the design as JSON, charging the buffer it writes into.
pub fn serialize(ctx: &JobContext, design: &Design) -> Result<Vec<u8>, StageError> {
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
    let counted = count(ctx, stitches)?;
    let commas = stitches.len().saturating_sub(1);
    let stitches_len = counted.len;
    let total = open.len() + stitches_len + commas + 2;
    let _charge = ctx.charge(total as u64)?;
    let mut out: Vec<u8> = Vec::with_capacity(total);
    let buf = &mut out.spare_capacity_mut()[..total];
    buf[..open.len()].write_copy_of_slice(open);
    let (_, body) = buf.split_at_mut(open.len());
    let (text, close) = body.split_at_mut(stitches_len + commas);
    write_stitches(ctx, text, stitches, &counted)?;
    close.write_copy_of_slice(b"]}");
    // SAFETY: `out` has room for `total` bytes, and all of them are initialised: the head and
    // the closing `]}` above, and between them `text`, which `write_stitches` returned `Ok` for
    // only once its writers had written every byte of it (each writes its part front to back
    // without a gap — every `put` writes the `N` bytes it advances by, every `int` each byte
    // between its start and its end (asserted, or four bytes from a table of them) — and ends
    // exactly at the part's end).
    unsafe { out.set_len(total) };
    Ok(out)
}

/// Stitches counted between two checkpoints: counting is a few times faster than writing.
const COUNT_BLOCK: usize = 4 * BLOCK;

/// The stitches' text, counted before a byte is written: its length without the commas between
/// stitches, and where two writers split it — the first writer's stitches (all of them when one
/// writes) and their text with its commas.
struct Counted {
    len: usize,
    split: usize,
    first_len: usize,
}

/// Counts `stitches`' text, checkpointing between blocks of [`COUNT_BLOCK`]; a design of
/// [`PARALLEL_FROM`] stitches or more is split in two halves at a block's start, each counted by
/// its own thread ([`in_two_halves`]).
fn count(ctx: &JobContext, stitches: &[Stitch]) -> Result<Counted, Interrupt> {
    let n = stitches.len();
    if n < PARALLEL_FROM {
        let len = text_len(stitches, &mut || ctx.checkpoint())?;
        return Ok(Counted {
            len,
            split: n,
            first_len: len + n.saturating_sub(1),
        });
    }
    let split = n / 2 / COUNT_BLOCK * COUNT_BLOCK;
    let (first, second) = stitches.split_at(split);
    let (first_text, second_text) = in_two_halves(
        ctx,
        |go_on| text_len(first, go_on),
        |go_on| text_len(second, go_on),
    )?;
    Ok(Counted {
        len: first_text + second_text,
        split,
        first_len: first_text + split - 1,
    })
}

/// The text of `stitches` without commas, asking `go_on` before each block of [`COUNT_BLOCK`].
fn text_len(stitches: &[Stitch], go_on: GoOn<'_>) -> Result<usize, Interrupt> {
    let mut len = 0;
    for block in stitches.chunks(COUNT_BLOCK) {
        go_on()?;
        len += block.iter().map(stitch_len).sum::<usize>();
    }
    Ok(len)
}

/// The fewest stitches written by two threads: below it, starting the second thread costs about
/// what it saves.
const PARALLEL_FROM: usize = 16 * BLOCK;

/// Writes `stitches`, comma-separated, into `text`, which is exactly their length. A design
/// `counted` split in two is written by two threads ([`in_two_halves`]): the job's own writes
/// the first half, a scoped helper the second into the other part of the buffer, and the job
/// passes one checkpoint per block whichever thread writes it (B3). The bytes are the same
/// either way: each writer must end exactly at its part's end, as counted.
fn write_stitches(
    ctx: &JobContext,
    text: &mut [MaybeUninit<u8>],
    stitches: &[Stitch],
    counted: &Counted,
) -> Result<(), Interrupt> {
    if counted.split == stitches.len() {
        return write_part(text, stitches, false, &mut || ctx.checkpoint());
    }
    let (first, second) = stitches.split_at(counted.split);
    let (left, right) = text.split_at_mut(counted.first_len);
    in_two_halves(
        ctx,
        |go_on| write_part(left, first, false, go_on),
        |go_on| write_part(right, second, true, go_on),
    )?;
    Ok(())
}

/// Writes `stitches` into `part` front to back, each but the first after a comma (the first too
/// when `leading_comma`), asking `go_on` before every block of [`BLOCK`] stitches; its part is
/// then written exactly to its end (asserted), unless `go_on` stopped it.
fn write_part(
    part: &mut [MaybeUninit<u8>],
    stitches: &[Stitch],
    leading_comma: bool,
    go_on: GoOn<'_>,
) -> Result<(), Interrupt> {
    let mut w = Writer { buf: part, at: 0 };
    for (b, block) in stitches.chunks(BLOCK).enumerate() {
        go_on()?;
        for (i, stitch) in block.iter().enumerate() {
            if leading_comma || b > 0 || i > 0 {
                w.put(b",");
            }
            w.stitch(stitch);
        }
    }
    assert_eq!(
        w.at,
        w.buf.len(),
        "the stitches written fill the part counted for them"
    );
    Ok(())
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

/// `"cmd"`'s value with its closing quote and brace, as serde writes the snake-case variant.
fn command_tail(cmd: StitchCommand) -> &'static [u8] {
    match cmd {
        StitchCommand::Stitch => STITCH,
        StitchCommand::Jump => JUMP,
        StitchCommand::Trim => TRIM,
        StitchCommand::ColorChange => COLOR_CHANGE,
        StitchCommand::End => END,
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

/// The length of one stitch's JSON, without the comma between stitches.
fn stitch_len(s: &Stitch) -> usize {
    X.len() + int_len(s.x) + Y.len() + int_len(s.y) + CMD.len() + command_tail(s.cmd).len()
}

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

/// Writes into the output's spare capacity, already at its final size, front to back. Every copy
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
    /// serde_json's, and as many as were counted (else `serialize` fails).
    #[test]
    fn stitches_are_written_as_serde_json_writes_them_and_as_long_as_counted() {
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
        assert_eq!(
            String::from_utf8(serialize(&ctx, &design).unwrap()).unwrap(),
            serde_json::to_string(&design).unwrap()
        );
    }

    /// A design long enough to be written by two threads: the same bytes as serde_json's, the
    /// halves meeting at a comma.
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
        let design = Design {
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
        assert_eq!(
            serialize(&ctx, &design).unwrap(),
            serde_json::to_vec(&design).unwrap()
        );
    }
}
