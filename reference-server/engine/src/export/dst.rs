//! Tajima DST.
//!
//! A 512-byte text header, then 3-byte records. Each record moves the needle by (dx, dy) in
//! 0.1 mm, |dx|, |dy| ≤ 121, written in balanced ternary: one bit each for +1, −1, +3, −3, +9,
//! −9, +27, −27, +81, −81 per axis, spread over the three bytes in the standard DST layout (the
//! table in [`TERNARY_BITS`]). Byte 3 always has bits 0 and 1 set; bit 7 marks a jump; `C3` is a
//! colour change and `F3` the end. DST's y axis points up, so design y is negated.
//!
//! DST has no trim record. Machines trim on a run of jumps, so a trim is written as three
//! jumps that return to where they started: (+2, +2), (−4, −4), (+2, +2) — the pattern
//! pyembroidery's `DstWriter` writes, which machines and readers take as a trim.
//!
//! Header fields (each followed by CR; then 0x1A and spaces to 512 bytes):
//! `LA:` label (16 chars), `ST:` number of records including the end record (7 digits),
//! `CO:` colour changes (3), `+X:` `-X:` `+Y:` `-Y:` the needle's furthest excursion from the
//! start in each direction, y up (5 digits, 0.1 mm), `AX:` `AY:` the last position relative to
//! the start, with sign (5), `MX:` `MY:` 0 (no multi-file design), `PD:` `******`. Values too
//! large for their field are clamped to its maximum.

use plimsoll_spec::Design;

use super::{Op, OpSink, for_each_op};
use crate::job::Interrupt;

/// Largest move of one record, per axis.
pub const DST_LIMIT: i32 = 121;
/// The fixed size of the DST text header, padded with spaces.
pub(crate) const DST_HEADER_LEN: usize = 512;
/// The label written in `LA:`.
pub const DST_LABEL: &str = "plimsoll";

const JUMP: u8 = 0x80;
const ALWAYS: u8 = 0x03;
const COLOR_CHANGE: [u8; 3] = [0x00, 0x00, 0xC3];
const END: [u8; 3] = [0x00, 0x00, 0xF3];
/// The three zero-sum jumps that make a trim.
pub const TRIM_JUMPS: [(i32, i32); 3] = [(2, 2), (-4, -4), (2, 2)];

/// Where a ternary digit lives: (byte index, bit).
pub type BitPosition = (usize, u8);

/// Bits of the +digit and −digit of each ternary weight, for x and for y. Weights in order 81,
/// 27, 9, 3, 1.
pub const TERNARY_BITS: [[(BitPosition, BitPosition); 5]; 2] = [
    // x
    [
        ((2, 2), (2, 3)),
        ((1, 2), (1, 3)),
        ((0, 2), (0, 3)),
        ((1, 0), (1, 1)),
        ((0, 0), (0, 1)),
    ],
    // y
    [
        ((2, 5), (2, 4)),
        ((1, 5), (1, 4)),
        ((0, 5), (0, 4)),
        ((1, 7), (1, 6)),
        ((0, 7), (0, 6)),
    ],
];
const WEIGHTS: [i32; 5] = [81, 27, 9, 3, 1];

/// The record bytes of one axis value, for every value in −121..=121 (index value + 121).
const fn axis_table(axis: usize) -> [[u8; 3]; 243] {
    let mut table = [[0u8; 3]; 243];
    let mut i = 0;
    while i < 243 {
        let mut v = i as i32 - 121;
        let mut bytes = [0u8; 3];
        let mut k = 0;
        while k < 5 {
            let w = WEIGHTS[k];
            let half = w / 2;
            let ((pb, pbit), (nb, nbit)) = TERNARY_BITS[axis][k];
            if v > half {
                bytes[pb] |= 1 << pbit;
                v -= w;
            } else if v < -half {
                bytes[nb] |= 1 << nbit;
                v += w;
            }
            k += 1;
        }
        table[i] = bytes;
        i += 1;
    }
    table
}

static X_BITS: [[u8; 3]; 243] = axis_table(0);
static Y_BITS: [[u8; 3]; 243] = axis_table(1);

/// Encodes one move record (DST axes: y up). `|dx|, |dy| ≤ 121`.
#[inline]
pub fn record(dx: i32, dy: i32, jump: bool) -> [u8; 3] {
    debug_assert!(dx.abs() <= DST_LIMIT && dy.abs() <= DST_LIMIT);
    let x = X_BITS[(dx + DST_LIMIT) as usize];
    let y = Y_BITS[(dy + DST_LIMIT) as usize];
    [
        x[0] | y[0],
        x[1] | y[1],
        x[2] | y[2] | ALWAYS | if jump { JUMP } else { 0 },
    ]
}

/// Encodes a design as DST.
pub fn encode_dst(design: &Design) -> Vec<u8> {
    super::unchecked(|check| encode_dst_checked(design, check))
}

/// [`encode_dst`] that calls `check(capacity)` before reserving and every 64K commands, so the
/// caller can charge the buffer and observe its checkpoint.
pub(crate) fn encode_dst_checked(
    design: &Design,
    check: &mut dyn FnMut(usize) -> Result<(), Interrupt>,
) -> Result<Vec<u8>, Interrupt> {
    let capacity = DST_HEADER_LEN + 3 * (design.stitches.len() + 16);
    check(capacity)?;
    let mut buf = Vec::with_capacity(capacity);
    buf.resize(DST_HEADER_LEN, b' ');
    let mut w = Writer {
        buf,
        check,
        x: 0,
        y: 0,
        min_x: 0,
        max_x: 0,
        min_y: 0,
        max_y: 0,
        records: 0,
        color_changes: 0,
    };
    for_each_op(design, DST_LIMIT, &mut w)?;
    let header = w.header();
    w.buf[..header.len()].copy_from_slice(&header);
    Ok(w.buf)
}

struct Writer<'c> {
    buf: Vec<u8>,
    check: &'c mut dyn FnMut(usize) -> Result<(), Interrupt>,
    /// Needle position in DST axes (y up), relative to the start.
    x: i32,
    y: i32,
    min_x: i32,
    max_x: i32,
    min_y: i32,
    max_y: i32,
    records: u64,
    color_changes: u64,
}

impl Writer<'_> {
    #[inline]
    fn push(&mut self, rec: [u8; 3]) {
        self.buf.extend_from_slice(&rec);
        self.records += 1;
    }

    #[inline]
    fn mv(&mut self, dx: i32, dy: i32, jump: bool) {
        self.push(record(dx, dy, jump));
        self.x += dx;
        self.y += dy;
        self.min_x = self.min_x.min(self.x);
        self.max_x = self.max_x.max(self.x);
        self.min_y = self.min_y.min(self.y);
        self.max_y = self.max_y.max(self.y);
    }

    fn header(&self) -> Vec<u8> {
        let clamp = |v: i64, digits: u32| v.clamp(0, 10i64.pow(digits) - 1);
        let signed = |v: i32| {
            let sign = if v < 0 { '-' } else { '+' };
            format!("{sign}{:5}", clamp(i64::from(v).abs(), 5))
        };
        let mut h = String::with_capacity(DST_HEADER_LEN);
        h.push_str(&format!("LA:{DST_LABEL:<16}\r"));
        h.push_str(&format!("ST:{:7}\r", clamp(self.records as i64, 7)));
        h.push_str(&format!("CO:{:3}\r", clamp(self.color_changes as i64, 3)));
        h.push_str(&format!("+X:{:5}\r", clamp(i64::from(self.max_x), 5)));
        h.push_str(&format!("-X:{:5}\r", clamp(-i64::from(self.min_x), 5)));
        h.push_str(&format!("+Y:{:5}\r", clamp(i64::from(self.max_y), 5)));
        h.push_str(&format!("-Y:{:5}\r", clamp(-i64::from(self.min_y), 5)));
        h.push_str(&format!("AX:{}\r", signed(self.x)));
        h.push_str(&format!("AY:{}\r", signed(self.y)));
        h.push_str("MX:+    0\r");
        h.push_str("MY:+    0\r");
        h.push_str("PD:******\r");
        let mut bytes = h.into_bytes();
        bytes.push(0x1A);
        bytes.resize(DST_HEADER_LEN, b' ');
        bytes
    }
}

impl OpSink for Writer<'_> {
    #[inline]
    fn op(&mut self, op: Op) {
        match op {
            Op::Stitch(dx, dy) => self.mv(dx, -dy, false),
            Op::Jump(dx, dy) => self.mv(dx, -dy, true),
            Op::Trim => {
                for (dx, dy) in TRIM_JUMPS {
                    self.mv(dx, dy, true);
                }
            }
            Op::ColorChange => {
                self.push(COLOR_CHANGE);
                self.color_changes += 1;
            }
            Op::End => self.push(END),
        }
    }

    fn check(&mut self) -> Result<(), Interrupt> {
        // Room for the next 64K commands (a trim is 3 records) before they are written.
        super::reserve_checked(&mut self.buf, 3 * 3 * 65536, self.check)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_match_known_encodings() {
        // Values from the DST bit layout: +1 x is byte 0 bit 0, +1 y is byte 0 bit 7, and so on.
        assert_eq!(record(0, 0, false), [0x00, 0x00, 0x03]);
        assert_eq!(record(1, 0, false), [0x01, 0x00, 0x03]);
        assert_eq!(record(-1, 0, false), [0x02, 0x00, 0x03]);
        assert_eq!(record(0, 1, false), [0x80, 0x00, 0x03]);
        assert_eq!(record(0, -1, false), [0x40, 0x00, 0x03]);
        assert_eq!(record(121, 0, false), [0x05, 0x05, 0x07]);
        assert_eq!(record(0, -121, true), [0x50, 0x50, 0x93]);
        assert_eq!(record(2, 0, false), [0x02, 0x01, 0x03]); // +3 −1
    }
}
