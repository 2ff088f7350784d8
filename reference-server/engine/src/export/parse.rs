//! `parse`: design JSON → a validated [`Design`].
//!
//! The result is what `serde_json::from_slice::<Design>` gives, but the stitch array — nearly all
//! of the bytes — is read by a strict hand-written scanner that accepts only the plain shape
//! serde_json itself writes (`{"x":int,"y":int,"cmd":"name"}`, any member order, any JSON
//! whitespace). Anything else (escapes in keys, unknown members, floats, duplicates, bad syntax)
//! makes the fast path give up, and serde_json parses the whole document, so errors and edge
//! cases are serde_json's. The scanner is ~4× faster on a 25 MB design and checkpoints every 64K
//! stitches.

use plimsoll_spec::design::DESIGN_FORMAT;
use plimsoll_spec::{Design, ErrorCode, Stitch, StitchCommand};

use crate::job::{Interrupt, JobContext, StageError};
use crate::pipeline::{MAX_COORDINATE, MAX_STITCHES};

fn malformed(message: impl Into<String>) -> StageError {
    StageError::invalid(
        ErrorCode::MalformedDesign,
        format!("malformed design: {}", message.into()),
    )
}

/// `parse`: JSON → validated [`Design`].
pub fn parse(ctx: &JobContext, json: &[u8]) -> Result<Design, StageError> {
    // The parsed design is smaller than its JSON (12 bytes per stitch against at least 25).
    let _parsed = ctx.charge(json.len() as u64)?;
    let design = match fast_parse(json, &mut || ctx.checkpoint()) {
        Some(result) => result?,
        None => serde_json::from_slice(json).map_err(|e| malformed(e.to_string()))?,
    };
    ctx.checkpoint()?;
    validate_design(&design, &mut || ctx.checkpoint()).map_err(|e| match e {
        Invalid::Interrupted(i) => StageError::Interrupted(i),
        Invalid::Design(message) => malformed(message),
    })?;
    Ok(design)
}

/// Why [`validate_design`] refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalid {
    /// The design breaks a rule; the message says which.
    Design(String),
    /// A checkpoint stopped the validation.
    Interrupted(Interrupt),
}

impl From<Interrupt> for Invalid {
    fn from(i: Interrupt) -> Self {
        Invalid::Interrupted(i)
    }
}

/// Checks that a design is one our encoders can write faithfully: the right format, within the
/// size and coordinate limits (extents included), thread colours that are `#rrggbb` (they go into the SVG verbatim),
/// a thread for every stitched colour block, a true `stitch_count`, extents that contain every
/// needle position, and `end` (if present) only last.
pub fn validate_design(
    design: &Design,
    check: &mut dyn FnMut() -> Result<(), Interrupt>,
) -> Result<(), Invalid> {
    check_header(design)?;
    let tally = StitchTally::of(design, check)?;
    if tally.stitches != design.stitch_count {
        return Err(Invalid::Design(format!(
            "stitch_count is {} but there are {} stitch commands",
            design.stitch_count, tally.stitches
        )));
    }
    if tally.blocks_with_stitches > design.threads.len() {
        return Err(Invalid::Design(format!(
            "{} stitched colour blocks but {} threads",
            tally.blocks_with_stitches,
            design.threads.len()
        )));
    }
    Ok(())
}

/// Checks everything but the stitches: the format, the size, the physical dimensions, the thread
/// colours and the extents.
fn check_header(design: &Design) -> Result<(), Invalid> {
    let bad = |m: String| Err(Invalid::Design(m));
    if design.format != DESIGN_FORMAT {
        return bad(format!(
            "format is `{}`, expected `{DESIGN_FORMAT}`",
            design.format
        ));
    }
    if design.stitches.len() as u64 > MAX_STITCHES {
        return bad(format!(
            "{} stitch commands, more than the limit of {MAX_STITCHES}",
            design.stitches.len()
        ));
    }
    for (name, v) in [
        ("width_mm", design.width_mm),
        ("height_mm", design.height_mm),
    ] {
        if !v.is_finite() || v < 0.0 || v * 10.0 > f64::from(MAX_COORDINATE) {
            return bad(format!("{name} is {v}, expected 0 to 100000"));
        }
    }
    for (i, thread) in design.threads.iter().enumerate() {
        let c = thread.color.as_bytes();
        if c.len() != 7 || c[0] != b'#' || !c[1..].iter().all(u8::is_ascii_hexdigit) {
            return bad(format!(
                "thread {i} colour `{}` is not #rrggbb",
                thread.color.escape_debug()
            ));
        }
    }
    let e = design.extents;
    for (name, v) in [
        ("min_x", e.min_x),
        ("min_y", e.min_y),
        ("max_x", e.max_x),
        ("max_y", e.max_y),
    ] {
        if v.unsigned_abs() > MAX_COORDINATE as u32 {
            return bad(format!("extents.{name} is {v}, beyond ±{MAX_COORDINATE}"));
        }
    }
    Ok(())
}

/// What the stitch commands add up to, to compare with what the design claims.
struct StitchTally {
    stitches: u64,
    blocks_with_stitches: usize,
}

impl StitchTally {
    /// Checks every command (within the limits and the extents, `end` only last) while counting
    /// the stitches and the colour blocks that have any; checks in every 64K commands.
    fn of(
        design: &Design,
        check: &mut dyn FnMut() -> Result<(), Interrupt>,
    ) -> Result<Self, Invalid> {
        let bad = |m: String| Err(Invalid::Design(m));
        let e = design.extents;
        let mut tally = StitchTally {
            stitches: 0,
            blocks_with_stitches: 0,
        };
        let mut block_has_stitch = false;
        let last = design.stitches.len().saturating_sub(1);
        for (i, s) in design.stitches.iter().enumerate() {
            if i % 65536 == 0 {
                check()?;
            }
            if s.x.unsigned_abs() > MAX_COORDINATE as u32
                || s.y.unsigned_abs() > MAX_COORDINATE as u32
            {
                return bad(format!(
                    "command {i} at ({}, {}) is beyond ±{MAX_COORDINATE}",
                    s.x, s.y
                ));
            }
            if s.x < e.min_x || s.x > e.max_x || s.y < e.min_y || s.y > e.max_y {
                return bad(format!(
                    "command {i} at ({}, {}) lies outside the extents",
                    s.x, s.y
                ));
            }
            match s.cmd {
                StitchCommand::Stitch => {
                    tally.stitches += 1;
                    if !block_has_stitch {
                        block_has_stitch = true;
                        tally.blocks_with_stitches += 1;
                    }
                }
                StitchCommand::ColorChange => block_has_stitch = false,
                StitchCommand::End if i != last => {
                    return bad(format!("`end` at command {i} is not the last command"));
                }
                _ => {}
            }
        }
        Ok(tally)
    }
}

/// Parses with the fast stitch scanner; `None` when the document is not in the plain shape (the
/// caller then uses serde_json on the whole of it).
pub(crate) fn fast_parse(
    json: &[u8],
    check: &mut dyn FnMut() -> Result<(), Interrupt>,
) -> Option<Result<Design, Interrupt>> {
    let start = find_member(json, b"stitches")?;
    let mut scanner = Scanner::new(&json[start..]);
    let stitches = match scanner.stitches(check)? {
        Ok(s) => s,
        Err(i) => return Some(Err(i)),
    };
    let end = start + scanner.i;
    let mut rest = Vec::with_capacity(json.len() - (end - start) + 2);
    rest.extend_from_slice(&json[..start]);
    rest.extend_from_slice(b"[]");
    rest.extend_from_slice(&json[end..]);
    let mut design: Design = serde_json::from_slice(&rest).ok()?;
    design.stitches = stitches;
    Some(Ok(design))
}

#[inline]
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Where the value of top-level member `key` starts (the first, if repeated; keys with escapes
/// make it give up). Members before it are skipped without validation: serde_json reads them.
fn find_member(json: &[u8], key: &[u8]) -> Option<usize> {
    let mut s = Scanner::new(json);
    s.ws();
    s.eat(b'{')?;
    loop {
        if s.member_key()? == key {
            return Some(s.i);
        }
        s.skip_value()?;
        s.ws();
        match s.next()? {
            b',' => continue,
            _ => return None,
        }
    }
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    fn new(b: &'a [u8]) -> Self {
        Scanner { b, i: 0 }
    }

    #[inline]
    fn ws(&mut self) {
        while self.i < self.b.len() && is_ws(self.b[self.i]) {
            self.i += 1;
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline]
    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    #[inline]
    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    /// A string without escapes; returns its content.
    #[inline]
    fn plain_string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.i;
        let len = self.b[start..]
            .iter()
            .position(|&c| c == b'"' || c == b'\\')?;
        if self.b[start + len] != b'"' {
            return None;
        }
        self.i = start + len + 1;
        Some(&self.b[start..start + len])
    }

    /// Skips any JSON value without validating it (serde_json validates what is kept).
    fn skip_value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.skip_string(),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => self.skip_string()?,
                        b'{' | b'[' => {
                            depth += 1;
                            self.i += 1;
                        }
                        b'}' | b']' => {
                            depth -= 1;
                            self.i += 1;
                            if depth == 0 {
                                return Some(());
                            }
                        }
                        _ => self.i += 1,
                    }
                }
            }
            _ => {
                let start = self.i;
                while self.i < self.b.len()
                    && !matches!(self.b[self.i], b',' | b'}' | b']')
                    && !is_ws(self.b[self.i])
                {
                    self.i += 1;
                }
                (self.i > start).then_some(())
            }
        }
    }

    fn skip_string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            match self.next()? {
                b'"' => return Some(()),
                b'\\' => {
                    self.next()?;
                }
                _ => {}
            }
        }
    }

    /// An integer in i32 range, written as JSON writes integers.
    #[inline]
    fn int(&mut self) -> Option<i32> {
        let negative = self.peek()? == b'-';
        if negative {
            self.i += 1;
        }
        let start = self.i;
        let mut v: i64 = 0;
        while let Some(c @ b'0'..=b'9') = self.peek() {
            v = v * 10 + i64::from(c - b'0');
            self.i += 1;
            if self.i - start > 10 {
                return None;
            }
        }
        let digits = self.i - start;
        // serde_json reads `-0` as a float, which an i32 refuses: leave it to serde.
        if digits == 0 || (digits > 1 && self.b[start] == b'0') || (negative && v == 0) {
            return None;
        }
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        i32::try_from(if negative { -v } else { v }).ok()
    }

    /// An object member's key and its colon, with the white space around them; the position is
    /// then at the value.
    fn member_key(&mut self) -> Option<&'a [u8]> {
        self.ws();
        let key = self.plain_string()?;
        self.ws();
        self.eat(b':')?;
        self.ws();
        Some(key)
    }

    #[inline]
    fn command(&mut self) -> Option<StitchCommand> {
        Some(match self.plain_string()? {
            b"stitch" => StitchCommand::Stitch,
            b"jump" => StitchCommand::Jump,
            b"trim" => StitchCommand::Trim,
            b"color_change" => StitchCommand::ColorChange,
            b"end" => StitchCommand::End,
            _ => return None,
        })
    }

    fn stitch(&mut self) -> Option<Stitch> {
        if let Some(s) = self.canonical_stitch() {
            return Some(s);
        }
        self.eat(b'{')?;
        let (mut x, mut y, mut cmd) = (None, None, None);
        loop {
            match self.member_key()? {
                b"x" if x.is_none() => x = Some(self.int()?),
                b"y" if y.is_none() => y = Some(self.int()?),
                b"cmd" if cmd.is_none() => cmd = Some(self.command()?),
                _ => return None,
            }
            self.ws();
            match self.next()? {
                b',' => continue,
                b'}' => break,
                _ => return None,
            }
        }
        Some(Stitch {
            x: x?,
            y: y?,
            cmd: cmd?,
        })
    }

    /// The exact shape serde_json writes, `{"x":1,"y":2,"cmd":"stitch"}`, read without the
    /// general member loop; anything else leaves the position unchanged.
    #[inline]
    fn canonical_stitch(&mut self) -> Option<Stitch> {
        let start = self.i;
        let mut parse = || {
            self.expect(b"{\"x\":")?;
            let x = self.int()?;
            self.expect(b",\"y\":")?;
            let y = self.int()?;
            self.expect(b",\"cmd\":")?;
            let cmd = self.command()?;
            self.eat(b'}')?;
            Some(Stitch { x, y, cmd })
        };
        let stitch = parse();
        if stitch.is_none() {
            self.i = start;
        }
        stitch
    }

    #[inline]
    fn expect(&mut self, literal: &[u8]) -> Option<()> {
        if self.b[self.i..].starts_with(literal) {
            self.i += literal.len();
            Some(())
        } else {
            None
        }
    }

    /// The whole stitch array; `None` if it is not in the plain shape.
    fn stitches(
        &mut self,
        check: &mut dyn FnMut() -> Result<(), Interrupt>,
    ) -> Option<Result<Vec<Stitch>, Interrupt>> {
        self.eat(b'[')?;
        // Serde's own output spends ~34 bytes per stitch; never more than 12 per stitch kept.
        let mut out = Vec::with_capacity((self.b.len() / 30).min(MAX_STITCHES as usize + 1));
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
        } else {
            loop {
                self.ws();
                out.push(self.stitch()?);
                if out.len() % 65536 == 0
                    && let Err(i) = check()
                {
                    return Some(Err(i));
                }
                self.ws();
                match self.next()? {
                    b',' => continue,
                    b']' => break,
                    _ => return None,
                }
            }
        }
        Some(Ok(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check() -> Result<(), Interrupt> {
        Ok(())
    }

    #[test]
    fn fast_path_agrees_with_serde_or_gives_up() {
        let plain = r##"{"format":"plimsoll-design/1","width_mm":10.0,"height_mm":5.0,"threads":[{"color":"#ff0000"}],"extents":{"min_x":0,"min_y":0,"max_x":3,"max_y":4},"stitch_count":1,"stitches":[{"x":3,"y":4,"cmd":"stitch"},{"x":3,"y":4,"cmd":"end"}]}"##;
        let spaced = r#" { "stitches" : [ { "cmd" : "jump" , "y" : -7 , "x" : 12 } ] , "format":"plimsoll-design/1","width_mm":1,"height_mm":1,"threads":[],"extents":{"min_x":0,"min_y":0,"max_x":12,"max_y":0},"stitch_count":0 } "#;
        for doc in [plain, spaced] {
            let fast = fast_parse(doc.as_bytes(), &mut check)
                .expect("plain shape")
                .unwrap();
            let serde: Design = serde_json::from_str(doc).unwrap();
            assert_eq!(fast, serde);
        }
        let unusual = [
            plain.replace(r#""x":3,"#, r#""x":3.0,"#),
            plain.replace(r#""x":3,"#, r#""x":3,"extra":1,"#),
            plain.replace(r#""x":3,"#, r#""x":3,"x":4,"#),
            plain.replace(r#""x":3,"#, r#""x":03,"#),
            plain.replace(r#""x":3,"#, r#""x":-0,"#),
            plain.replace(r#""x":3,"#, r#""x":99999999999,"#),
            plain.replace(r#""stitch"}"#, r#""st\u0069tch"}"#),
            plain.replace(r#""stitches""#, r#""stitch\u0065s""#),
            plain.replace("]}", "]},"),
            plain.to_owned() + "x",
            plain.replace(r#""cmd":"end""#, r#""cmd":"fly""#),
        ];
        for doc in &unusual {
            let serde = serde_json::from_str::<Design>(doc);
            match fast_parse(doc.as_bytes(), &mut check) {
                None => {}
                Some(fast) => assert_eq!(fast.unwrap(), serde.unwrap(), "{doc}"),
            }
        }
    }
}
