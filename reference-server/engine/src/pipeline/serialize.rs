//! `serialize`: the design as JSON (serde_json, compact).
//!
//! A 600K-stitch design is ~25 MB of JSON, so it is not written in one opaque call: the design
//! without its stitches is serialised first (`stitches` is its last field, so that text ends in
//! `[]}`), then the stitches are appended in blocks of 4096, each serialised by serde_json
//! straight into the output vector, with the buffer charged before it grows and a checkpoint
//! between blocks. The bytes are exactly those of `serde_json::to_vec(&design)` (a test checks).

use plimsoll_spec::Design;

use super::{reserve_charged, vec_bytes};
use crate::job::{JobContext, StageError};

/// Stitches per block between checkpoints (~0.2 ms of work in a release build).
const BLOCK: usize = 4096;
/// Longest JSON of one stitch command plus its comma:
/// `{"x":-1000000,"y":-1000000,"cmd":"color_change"},`.
const MAX_JSON_PER_STITCH: usize = 50;

/// Writes the design as JSON, charging the buffer it writes into.
pub fn serialize(ctx: &JobContext, design: &Design) -> Result<Vec<u8>, StageError> {
    let _design = ctx.charge(vec_bytes(&design.stitches))?;
    let failed =
        |e: serde_json::Error| StageError::failed(format!("serialising the design failed: {e}"));
    let head = without_stitches(design);
    let mut charge = ctx.charge(0)?;
    let mut out: Vec<u8> = Vec::new();
    // Typical stitches take ~34 bytes; start there and grow (charged) if needed.
    reserve_charged(&mut out, 1024 + design.stitches.len() * 36, &mut charge, 0)?;
    serde_json::to_writer(&mut out, &head).map_err(failed)?;
    if !out.ends_with(b"[]}") {
        return Err(StageError::failed(
            "serialising the design failed: `stitches` is not the last field",
        ));
    }
    out.truncate(out.len() - 2);
    for (b, block) in design.stitches.chunks(BLOCK).enumerate() {
        ctx.checkpoint()?;
        reserve_charged(
            &mut out,
            block.len() * MAX_JSON_PER_STITCH + 2,
            &mut charge,
            0,
        )?;
        for (i, stitch) in block.iter().enumerate() {
            if b > 0 || i > 0 {
                out.push(b',');
            }
            serde_json::to_writer(&mut out, stitch).map_err(failed)?;
        }
    }
    out.extend_from_slice(b"]}");
    Ok(out)
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
