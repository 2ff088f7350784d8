//! Melco EXP.
//!
//! No header: a stream of 2-byte stitch moves (signed dx, dy in 0.1 mm, |d| ≤ 127, y negated
//! because EXP's y points up). `0x80` as a first byte escapes a command, followed by two more
//! bytes: `80 04 dx dy` jump, `80 01 00 00` colour change (also stop), `80 80 07 00` trim.
//! A stitch can never start with `0x80` because −128 is outside the ±127 limit.
//!
//! Trim and end follow pyembroidery's `ExpWriter` (and its reader), the de-facto reference in
//! open-source embroidery tools: trim is `80 80 07 00`; the end of the design is the end of the
//! file, with no end record.

use plimsoll_spec::Design;

use super::{Op, OpSink, for_each_op};
use crate::job::Interrupt;

/// Largest move of one record, per axis.
pub const EXP_LIMIT: i32 = 127;
/// Starts a control record (a move byte never takes this value: moves stop at ±127).
pub(crate) const ESCAPE: u8 = 0x80;
/// The control record that changes thread.
pub(crate) const COLOR_CHANGE: [u8; 4] = [0x80, 0x01, 0x00, 0x00];
/// After [`ESCAPE`], marks the next move as a jump (needle up).
pub(crate) const JUMP: u8 = 0x04;
/// The control record that cuts the thread.
pub(crate) const TRIM: [u8; 4] = [0x80, 0x80, 0x07, 0x00];

/// Encodes a design as EXP.
pub fn encode_exp(design: &Design) -> Vec<u8> {
    super::unchecked(|check| encode_exp_checked(design, check))
}

/// [`encode_exp`] that calls `check(capacity)` before reserving and every 64K commands.
pub(crate) fn encode_exp_checked(
    design: &Design,
    check: &mut dyn FnMut(usize) -> Result<(), Interrupt>,
) -> Result<Vec<u8>, Interrupt> {
    let capacity = 2 * (design.stitches.len() + 16);
    check(capacity)?;
    let mut w = Writer {
        buf: Vec::with_capacity(capacity),
        check,
    };
    for_each_op(design, EXP_LIMIT, &mut w)?;
    Ok(w.buf)
}

struct Writer<'c> {
    buf: Vec<u8>,
    check: &'c mut dyn FnMut(usize) -> Result<(), Interrupt>,
}

impl OpSink for Writer<'_> {
    #[inline]
    fn op(&mut self, op: Op) {
        match op {
            Op::Stitch(dx, dy) => self
                .buf
                .extend_from_slice(&[dx as i8 as u8, -dy as i8 as u8]),
            Op::Jump(dx, dy) => {
                self.buf
                    .extend_from_slice(&[ESCAPE, JUMP, dx as i8 as u8, -dy as i8 as u8])
            }
            Op::Trim => self.buf.extend_from_slice(&TRIM),
            Op::ColorChange => self.buf.extend_from_slice(&COLOR_CHANGE),
            Op::End => {}
        }
    }

    fn check(&mut self) -> Result<(), Interrupt> {
        // Room for the next 64K commands (4 bytes at most each) before they are written.
        super::reserve_checked(&mut self.buf, 4 * 65536, self.check)
    }
}
