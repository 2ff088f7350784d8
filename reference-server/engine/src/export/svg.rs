//! SVG preview: what the machine will sew, for a person to look at.
//!
//! Millimetre coordinates (the viewBox is the design's extents plus a 1 mm margin, and the
//! document's width and height are in mm, so it prints at true size). One `<path>` per colour
//! block, stroked in the thread colour with no fill: `L` for every stitch, `M` after jumps, trims
//! and colour changes, since no thread is drawn while the needle is up.

use plimsoll_spec::{Design, StitchCommand};

use crate::job::Interrupt;

/// Stroke width in mm: about one thread's width.
const STROKE_MM: &str = "0.35";

/// Renders the SVG preview of a design.
pub fn render_svg(design: &Design) -> String {
    super::unchecked(|check| render_svg_checked(design, check))
}

/// [`render_svg`] that calls `check(capacity)` before reserving and every 64K commands.
pub(crate) fn render_svg_checked(
    design: &Design,
    check: &mut dyn FnMut(usize) -> Result<(), Interrupt>,
) -> Result<String, Interrupt> {
    // About 14 bytes per command ("L123.4 567.8").
    let capacity = design.stitches.len() * 14 + 1024;
    check(capacity)?;
    let mut out: Vec<u8> = Vec::with_capacity(capacity);
    let e = design.extents;
    let margin = 10;
    let (x0, y0) = (e.min_x.min(0) - margin, e.min_y.min(0) - margin);
    let (x1, y1) = (e.max_x.max(0) + margin, e.max_y.max(0) + margin);
    out.extend_from_slice(b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"");
    push_mm(&mut out, x1 - x0);
    out.extend_from_slice(b"mm\" height=\"");
    push_mm(&mut out, y1 - y0);
    out.extend_from_slice(b"mm\" viewBox=\"");
    for (i, v) in [x0, y0, x1 - x0, y1 - y0].into_iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        push_mm(&mut out, v);
    }
    out.extend_from_slice(b"\">\n<title>Plimsoll design preview: ");
    out.extend_from_slice(design.stitch_count.to_string().as_bytes());
    out.extend_from_slice(b" stitches</title>\n");

    let mut block = 0usize;
    let mut in_path = false;
    let mut pen_down = false;
    let (mut x, mut y) = (0i32, 0i32);
    for (i, s) in design.stitches.iter().enumerate() {
        if i % 65536 == 0 {
            super::reserve_checked(&mut out, 14 * 65536 + 256, check)?;
        }
        match s.cmd {
            StitchCommand::Stitch => {
                if !in_path {
                    // Threads are validated as #rrggbb by `parse`; fall back for direct callers.
                    let color = design
                        .threads
                        .get(block)
                        .map(|t| t.color.as_str())
                        .filter(|c| is_hex_color(c))
                        .unwrap_or("#000000");
                    out.extend_from_slice(b"<path fill=\"none\" stroke-linecap=\"round\" stroke-linejoin=\"round\" stroke-width=\"");
                    out.extend_from_slice(STROKE_MM.as_bytes());
                    out.extend_from_slice(b"\" stroke=\"");
                    out.extend_from_slice(color.as_bytes());
                    out.extend_from_slice(b"\" d=\"");
                    in_path = true;
                    pen_down = false;
                }
                if !pen_down {
                    out.push(b'M');
                    push_point(&mut out, x, y);
                    pen_down = true;
                }
                out.extend_from_slice(b" L");
                push_point(&mut out, s.x, s.y);
            }
            StitchCommand::Jump | StitchCommand::Trim => pen_down = false,
            StitchCommand::ColorChange => {
                if in_path {
                    out.extend_from_slice(b"\"/>\n");
                    in_path = false;
                }
                block += 1;
            }
            StitchCommand::End => {}
        }
        (x, y) = (s.x, s.y);
    }
    if in_path {
        out.extend_from_slice(b"\"/>\n");
    }
    out.extend_from_slice(b"</svg>\n");
    Ok(String::from_utf8(out).expect("only ASCII is written"))
}

fn is_hex_color(c: &str) -> bool {
    let b = c.as_bytes();
    b.len() == 7 && b[0] == b'#' && b[1..].iter().all(u8::is_ascii_hexdigit)
}

fn push_point(out: &mut Vec<u8>, x: i32, y: i32) {
    push_mm(out, x);
    out.push(b' ');
    push_mm(out, y);
}

/// Writes 0.1 mm units as millimetres with one decimal, dropping a `.0`.
#[inline]
fn push_mm(out: &mut Vec<u8>, units: i32) {
    let v = i64::from(units);
    if v < 0 {
        out.push(b'-');
    }
    let v = v.unsigned_abs();
    let (int, frac) = (v / 10, v % 10);
    let mut digits = [0u8; 20];
    let mut n = 0;
    let mut i = int;
    loop {
        digits[n] = b'0' + (i % 10) as u8;
        n += 1;
        i /= 10;
        if i == 0 {
            break;
        }
    }
    out.extend(digits[..n].iter().rev());
    if frac != 0 {
        out.push(b'.');
        out.push(b'0' + frac as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millimetres_have_one_decimal() {
        let mut out = Vec::new();
        for v in [0, 5, 10, 123, -7, -120, 1_000_000] {
            push_mm(&mut out, v);
            out.push(b',');
        }
        assert_eq!(out, b"0,0.5,1,12.3,-0.7,-12,100000,");
    }
}
