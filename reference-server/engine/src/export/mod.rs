//! Export: design JSON → machine file, in three stages (`parse`, `encode`, `write`).
//!
//! `parse` refuses anything that is not a self-consistent design (answered `malformed_design`,
//! naming the problem); `encode` writes Tajima DST ([`dst`]), Melco EXP ([`exp`]) or an SVG
//! preview ([`svg`]); `write` puts the file in the job's temp directory, from where the server
//! streams it and the job's drop removes it.
//!
//! Both machine formats store relative moves from the start point, which is the design's origin
//! (0, 0); moves longer than a record allows are split into several records of the same kind.

pub mod dst;
pub mod exp;
pub mod parse;
pub mod svg;

use std::path::PathBuf;

use plimsoll_spec::{Design, ExportFormat, Stage, StitchCommand};

use crate::job::{Interrupt, JobContext, JobError, StageError};

pub use dst::encode_dst;
pub use exp::encode_exp;
pub use parse::{Invalid, parse, validate_design};
pub use svg::render_svg;

/// The written file.
#[derive(Debug, Clone)]
pub struct ExportOutput {
    /// Inside the job's temp directory.
    pub path: PathBuf,
    /// The file's contents, for the response body without reading the file back.
    pub bytes: Vec<u8>,
    /// `design.dst`, `design.exp` or `design.svg`.
    pub file_name: String,
}

/// Runs `parse`, `encode` and `write`.
pub fn export(
    ctx: &mut JobContext,
    design_json: &[u8],
    format: ExportFormat,
) -> Result<ExportOutput, JobError> {
    let design = ctx.run_stage(Stage::Parse, |ctx| parse(ctx, design_json))?;
    let bytes = ctx.run_stage(Stage::Encode, |ctx| {
        let _design = ctx.charge(design_heap_bytes(&design))?;
        let mut charge = ctx.charge(0)?;
        let mut check = |capacity: usize| -> Result<(), Interrupt> {
            charge.resize(capacity as u64)?;
            ctx.checkpoint()
        };
        let bytes = match format {
            ExportFormat::Dst => dst::encode_dst_checked(&design, &mut check),
            ExportFormat::Exp => exp::encode_exp_checked(&design, &mut check),
            ExportFormat::Svg => {
                svg::render_svg_checked(&design, &mut check).map(String::into_bytes)
            }
        }?;
        drop(design);
        Ok(bytes)
    })?;
    ctx.run_stage(Stage::Write, |ctx| {
        let _bytes = ctx.charge(bytes.capacity() as u64)?;
        let file_name = format!("design.{}", format.as_str());
        let path = ctx.temp_dir().join(&file_name);
        std::fs::write(&path, &bytes)
            .map_err(|e| StageError::failed(format!("writing {file_name} failed: {e}")))?;
        Ok(ExportOutput {
            path,
            bytes,
            file_name,
        })
    })
}

/// Runs a checked encoder outside a job: no budget, no checkpoint.
fn unchecked<T>(
    encode: impl FnOnce(&mut dyn FnMut(usize) -> Result<(), Interrupt>) -> Result<T, Interrupt>,
) -> T {
    encode(&mut |_| Ok(())).expect("an unchecked encode cannot be interrupted")
}

/// Makes room for the next `room` bytes of `buf`, charging the grown capacity through `check`
/// before reserving it; with room to spare it only reports the capacity (the checkpoint).
fn reserve_checked(
    buf: &mut Vec<u8>,
    room: usize,
    check: &mut dyn FnMut(usize) -> Result<(), Interrupt>,
) -> Result<(), Interrupt> {
    let needed = buf.len() + room;
    if needed > buf.capacity() {
        let capacity = needed.max(buf.capacity() * 2);
        check(capacity)?;
        buf.reserve_exact(capacity - buf.len());
    } else {
        check(buf.capacity())?;
    }
    Ok(())
}

fn design_heap_bytes(design: &Design) -> u64 {
    (design.stitches.capacity() * size_of::<plimsoll_spec::Stitch>()
        + design.threads.capacity() * (size_of::<plimsoll_spec::Thread>() + 8)) as u64
}

/// One record-level operation of a machine file: moves are relative and within the format's
/// per-record limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Stitch(i32, i32),
    Jump(i32, i32),
    Trim,
    ColorChange,
    End,
}

/// Receives a design as record-level operations (see [`for_each_op`]).
pub(crate) trait OpSink {
    fn op(&mut self, op: Op);
    /// Called every 64K design commands: the job's checkpoint, and a chance to charge growth.
    fn check(&mut self) -> Result<(), Interrupt>;
}

/// Walks a design from the origin as record-level operations: every move split into equal steps
/// of at most `limit` per axis, commands that sit elsewhere than the needle preceded by jumps,
/// and an `End` supplied if the design has none.
pub(crate) fn for_each_op(
    design: &Design,
    limit: i32,
    sink: &mut impl OpSink,
) -> Result<(), Interrupt> {
    let mut at = (0i32, 0i32);
    for (i, s) in design.stitches.iter().enumerate() {
        if i % 65536 == 0 {
            sink.check()?;
        }
        match s.cmd {
            StitchCommand::Stitch => split(&mut at, (s.x, s.y), limit, false, sink),
            StitchCommand::Jump => split(&mut at, (s.x, s.y), limit, true, sink),
            cmd => {
                if (s.x, s.y) != at {
                    split(&mut at, (s.x, s.y), limit, true, sink);
                }
                match cmd {
                    StitchCommand::Trim => sink.op(Op::Trim),
                    StitchCommand::ColorChange => sink.op(Op::ColorChange),
                    _ => {
                        sink.op(Op::End);
                        return Ok(());
                    }
                }
            }
        }
    }
    sink.op(Op::End);
    Ok(())
}

/// Emits the move `at → to` as `n` equal steps of at most `limit` per axis (one step, possibly
/// zero, if it already fits).
#[inline]
fn split(at: &mut (i32, i32), to: (i32, i32), limit: i32, jump: bool, sink: &mut impl OpSink) {
    let dx = i64::from(to.0) - i64::from(at.0);
    let dy = i64::from(to.1) - i64::from(at.1);
    let l = i64::from(limit);
    if dx.abs() <= l && dy.abs() <= l {
        let (sx, sy) = (dx as i32, dy as i32);
        sink.op(if jump {
            Op::Jump(sx, sy)
        } else {
            Op::Stitch(sx, sy)
        });
        *at = to;
        return;
    }
    let n = ((dx.abs().max(dy.abs()) + l - 1) / l).max(1);
    let (mut px, mut py) = (0i64, 0i64);
    for i in 1..=n {
        let (nx, ny) = (dx * i / n, dy * i / n);
        let (sx, sy) = ((nx - px) as i32, (ny - py) as i32);
        sink.op(if jump {
            Op::Jump(sx, sy)
        } else {
            Op::Stitch(sx, sy)
        });
        (px, py) = (nx, ny);
    }
    *at = to;
}
