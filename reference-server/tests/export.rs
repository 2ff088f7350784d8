//! Export: design → DST / EXP / SVG, checked by decoders written here from the format
//! descriptions (not from the encoder's code).

use std::io::Cursor;
use std::path::Path;
use std::time::{Duration, Instant};

use image::{ImageEncoder, Rgba, RgbaImage};
use plimsoll_server::export::{encode_dst, encode_exp, export, parse, render_svg, validate_design};
use plimsoll_server::job::{Interrupt, JobConfig, JobContext, JobErrorKind};
use plimsoll_server::pipeline::{DigitizeParams, digitize};
use plimsoll_spec::design::DESIGN_FORMAT;
use plimsoll_spec::{
    Design, ErrorCode, ExportFormat, Extents, HookDirective, Stage, Stitch, StitchCommand, Thread,
};
use proptest::prelude::*;
use tokio_util::sync::CancellationToken;

fn config(root: &Path) -> JobConfig {
    JobConfig {
        cancel: CancellationToken::new(),
        deadline: Instant::now() + Duration::from_secs(60),
        memory_cap_bytes: 1 << 30,
        temp_root: root.to_path_buf(),
        hooks: Vec::new(),
    }
}

/// A real design: digitized from an image with rings, stripes and several colours.
fn digitized() -> Design {
    let (w, h) = (160u32, 120u32);
    let img = RgbaImage::from_fn(w, h, |x, y| {
        let (u, v) = (x as f64 / w as f64, y as f64 / h as f64);
        let d = ((u - 0.3).powi(2) + (v - 0.5).powi(2)).sqrt();
        if (0.1..0.2).contains(&d) {
            Rgba([200, 30, 40, 255])
        } else if u > 0.55 && ((u + v) * 8.0).fract() < 0.5 {
            Rgba([230, 170, 20, 255])
        } else if u > 0.9 || v > 0.9 {
            Rgba([0, 0, 0, 0])
        } else {
            Rgba([20, 40, 160, 255])
        }
    });
    let mut png = Vec::new();
    image::codecs::png::PngEncoder::new(Cursor::new(&mut png))
        .write_image(img.as_raw(), w, h, image::ExtendedColorType::Rgba8)
        .unwrap();
    let root = tempfile::tempdir().unwrap();
    let mut ctx = JobContext::new(config(root.path())).unwrap();
    let params = DigitizeParams {
        width_mm: 120.0,
        density_mm: 0.4,
        colors: 4,
        max_stitch_mm: 3.0,
        max_pixels: 1_000_000,
    };
    digitize(&mut ctx, &png, &params).unwrap().design
}

fn design(threads: usize, stitches: Vec<Stitch>) -> Design {
    let (mut min, mut max) = ((0, 0), (0, 0));
    for s in &stitches {
        min = (min.0.min(s.x), min.1.min(s.y));
        max = (max.0.max(s.x), max.1.max(s.y));
    }
    Design {
        format: DESIGN_FORMAT.to_owned(),
        width_mm: 10.0,
        height_mm: 10.0,
        threads: (0..threads)
            .map(|i| Thread {
                color: format!("#{:02x}{:02x}07", i * 40 % 256, (i * 30 + 17) % 256),
            })
            .collect(),
        extents: Extents {
            min_x: min.0,
            min_y: min.1,
            max_x: max.0,
            max_y: max.1,
        },
        stitch_count: stitches
            .iter()
            .filter(|s| s.cmd == StitchCommand::Stitch)
            .count() as u64,
        stitches,
    }
}

fn st(x: i32, y: i32, cmd: StitchCommand) -> Stitch {
    Stitch { x, y, cmd }
}

/// Everything the encoders must handle: long stitches and jumps in every direction, trims,
/// commands away from the needle, zero-length moves, negative coordinates, no final `end`.
fn awkward() -> Design {
    use StitchCommand::*;
    design(
        3,
        vec![
            st(0, 0, Stitch),
            st(500, -300, Stitch),
            st(500, -300, Stitch),
            st(-1000, 2000, Jump),
            st(-1000, 2000, Stitch),
            st(-979, 2000, Stitch),
            st(-979, 2000, Trim),
            st(4000, -4000, Jump),
            st(4121, -4121, Stitch),
            st(4121, -4121, Trim),
            st(0, 0, ColorChange),
            st(3, 4, Stitch),
            st(127, -127, Stitch),
            st(-122, 122, Stitch),
            st(-122, 122, Jump),
            st(50, 50, Trim),
            st(60, 70, ColorChange),
            st(61, 71, Stitch),
        ],
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Decoded {
    cmd: StitchCommand,
    x: i32,
    y: i32,
}

/// DST record bits, from the format description: (byte, bit) → (dx, dy) in DST axes (y up).
const DST_BITS: [(usize, u8, i32, i32); 20] = [
    (0, 0, 1, 0),
    (0, 1, -1, 0),
    (0, 2, 9, 0),
    (0, 3, -9, 0),
    (0, 7, 0, 1),
    (0, 6, 0, -1),
    (0, 5, 0, 9),
    (0, 4, 0, -9),
    (1, 0, 3, 0),
    (1, 1, -3, 0),
    (1, 2, 27, 0),
    (1, 3, -27, 0),
    (1, 7, 0, 3),
    (1, 6, 0, -3),
    (1, 5, 0, 27),
    (1, 4, 0, -27),
    (2, 2, 81, 0),
    (2, 3, -81, 0),
    (2, 5, 0, 81),
    (2, 4, 0, -81),
];

struct DstFile {
    header: Vec<(String, String)>,
    records: usize,
    ops: Vec<Decoded>,
    /// Needle positions visited, DST axes.
    positions: Vec<(i32, i32)>,
}

fn decode_dst(bytes: &[u8]) -> DstFile {
    assert!(
        bytes.len() >= 512 && (bytes.len() - 512).is_multiple_of(3),
        "length {}",
        bytes.len()
    );
    let head = &bytes[..512];
    let end = head
        .iter()
        .position(|&b| b == 0x1A)
        .expect("0x1A after the fields");
    assert!(head[end + 1..].iter().all(|&b| b == b' '), "header padding");
    let text = std::str::from_utf8(&head[..end]).unwrap();
    assert!(text.ends_with('\r'));
    let header: Vec<(String, String)> = text
        .split_terminator('\r')
        .map(|f| {
            (f[..2].to_owned(), {
                assert_eq!(&f[2..3], ":");
                f[3..].to_owned()
            })
        })
        .collect();

    let (mut x, mut y) = (0i32, 0i32);
    let mut raw: Vec<(char, i32, i32)> = Vec::new();
    let mut positions = vec![(0, 0)];
    for r in bytes[512..].chunks(3) {
        assert_eq!(
            r[2] & 0x03,
            0x03,
            "bits 0 and 1 of byte 3 are always set: {r:x?}"
        );
        if r[2] == 0xF3 {
            assert_eq!(&r[..2], &[0, 0]);
            raw.push(('E', 0, 0));
            continue;
        }
        if r[2] & 0xC3 == 0xC3 {
            assert_eq!(r, &[0, 0, 0xC3]);
            raw.push(('C', 0, 0));
            continue;
        }
        let (mut dx, mut dy) = (0, 0);
        for &(byte, bit, vx, vy) in &DST_BITS {
            if r[byte] & (1 << bit) != 0 {
                dx += vx;
                dy += vy;
            }
        }
        // Canonical: never both +w and −w of one weight.
        for pair in DST_BITS.chunks(2) {
            let set = |(b, bit, _, _): (usize, u8, i32, i32)| r[b] & (1 << bit) != 0;
            assert!(!(set(pair[0]) && set(pair[1])), "{r:x?}");
        }
        assert!(dx.abs() <= 121 && dy.abs() <= 121);
        x += dx;
        y += dy;
        positions.push((x, y));
        raw.push((if r[2] & 0x80 != 0 { 'J' } else { 'S' }, dx, dy));
    }
    let records = raw.len();
    // Three jumps (+2,+2), (−4,−4), (+2,+2) are a trim.
    let mut ops = Vec::new();
    let (mut x, mut y) = (0i32, 0i32);
    let mut i = 0;
    while i < raw.len() {
        if raw[i..].starts_with(&[('J', 2, 2), ('J', -4, -4), ('J', 2, 2)]) {
            ops.push(Decoded {
                cmd: StitchCommand::Trim,
                x,
                y: -y,
            });
            i += 3;
            continue;
        }
        let (kind, dx, dy) = raw[i];
        x += dx;
        y += dy;
        let cmd = match kind {
            'S' => StitchCommand::Stitch,
            'J' => StitchCommand::Jump,
            'C' => StitchCommand::ColorChange,
            _ => StitchCommand::End,
        };
        ops.push(Decoded { cmd, x, y: -y });
        i += 1;
    }
    DstFile {
        header,
        records,
        ops,
        positions,
    }
}

fn decode_exp(bytes: &[u8]) -> Vec<Decoded> {
    let (mut x, mut y) = (0i32, 0i32);
    let mut ops = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 0x80 {
            let (cmd, a, b) = (bytes[i + 1], bytes[i + 2], bytes[i + 3]);
            i += 4;
            match cmd {
                0x01 => {
                    assert_eq!((a, b), (0, 0));
                    ops.push(Decoded {
                        cmd: StitchCommand::ColorChange,
                        x,
                        y,
                    });
                }
                0x04 => {
                    let (dx, dy) = (a as i8 as i32, -(b as i8 as i32));
                    assert!(dx.abs() <= 127 && dy.abs() <= 127);
                    x += dx;
                    y += dy;
                    ops.push(Decoded {
                        cmd: StitchCommand::Jump,
                        x,
                        y,
                    });
                }
                0x80 => {
                    assert_eq!((a, b), (0x07, 0x00));
                    ops.push(Decoded {
                        cmd: StitchCommand::Trim,
                        x,
                        y,
                    });
                }
                other => panic!("unknown EXP command {other:#x}"),
            }
        } else {
            let (dx, dy) = (bytes[i] as i8 as i32, -(bytes[i + 1] as i8 as i32));
            assert!(dx.abs() <= 127 && dy.abs() <= 127);
            x += dx;
            y += dy;
            ops.push(Decoded {
                cmd: StitchCommand::Stitch,
                x,
                y,
            });
            i += 2;
        }
    }
    ops.push(Decoded {
        cmd: StitchCommand::End,
        x,
        y,
    });
    ops
}

/// The decoded operations are the design's commands at the same absolute positions, with long
/// moves split into several records of the same kind and commands away from the needle
/// preceded by jumps.
fn assert_same_program(design: &Design, ops: &[Decoded]) {
    let mut k = 0;
    let mut at = (0, 0);
    let next = |k: &mut usize| {
        let op = *ops
            .get(*k)
            .unwrap_or_else(|| panic!("decoded program ends early at {k}"));
        *k += 1;
        op
    };
    for (i, s) in design.stitches.iter().enumerate() {
        let target = (s.x, s.y);
        match s.cmd {
            StitchCommand::Stitch | StitchCommand::Jump => loop {
                let op = next(&mut k);
                assert_eq!(op.cmd, s.cmd, "command {i} {s:?}, record {k}");
                at = (op.x, op.y);
                if at == target {
                    break;
                }
            },
            cmd => {
                while at != target {
                    let op = next(&mut k);
                    assert_eq!(op.cmd, StitchCommand::Jump, "move before command {i} {s:?}");
                    at = (op.x, op.y);
                }
                let op = next(&mut k);
                assert_eq!((op.cmd, op.x, op.y), (cmd, at.0, at.1), "command {i}");
                if cmd == StitchCommand::End {
                    break;
                }
            }
        }
    }
    if design.stitches.last().map(|s| s.cmd) != Some(StitchCommand::End) {
        let op = next(&mut k);
        assert_eq!((op.cmd, op.x, op.y), (StitchCommand::End, at.0, at.1));
    }
    assert_eq!(k, ops.len(), "records after the end");
}

fn assert_dst_round_trip(design: &Design) {
    let bytes = encode_dst(design);
    let file = decode_dst(&bytes);
    assert_same_program(design, &file.ops);
    let field = |name: &str| -> String {
        file.header
            .iter()
            .find(|(k, _)| k == name)
            .unwrap_or_else(|| panic!("{name}"))
            .1
            .clone()
    };
    let names: Vec<&str> = file.header.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "LA", "ST", "CO", "+X", "-X", "+Y", "-Y", "AX", "AY", "MX", "MY", "PD"
        ]
    );
    assert_eq!(field("LA").len(), 16);
    assert_eq!(field("ST").len(), 7);
    assert_eq!(field("ST").trim().parse::<usize>().unwrap(), file.records);
    let changes = file
        .ops
        .iter()
        .filter(|o| o.cmd == StitchCommand::ColorChange)
        .count();
    assert_eq!(field("CO").len(), 3);
    assert_eq!(field("CO").trim().parse::<usize>().unwrap(), changes);
    let num = |name: &str| {
        let v = field(name);
        assert_eq!(v.len(), 5, "{name}");
        v.trim().parse::<i32>().unwrap()
    };
    let xs = file.positions.iter().map(|p| p.0);
    let ys = file.positions.iter().map(|p| p.1);
    assert_eq!(num("+X"), xs.clone().max().unwrap());
    assert_eq!(num("-X"), -xs.min().unwrap());
    assert_eq!(num("+Y"), ys.clone().max().unwrap());
    assert_eq!(num("-Y"), -ys.min().unwrap());
    let signed = |name: &str| {
        let v = field(name);
        assert_eq!(v.len(), 6, "{name}");
        let n: i32 = v[1..].trim().parse().unwrap();
        match &v[..1] {
            "+" => n,
            "-" => -n,
            s => panic!("{name} sign {s}"),
        }
    };
    let last = *file.positions.last().unwrap();
    assert_eq!((signed("AX"), signed("AY")), last);
    assert_eq!((signed("MX"), signed("MY")), (0, 0));
    assert_eq!(field("PD"), "******");
}

#[test]
fn dst_round_trips_with_a_header_that_matches_the_body() {
    for d in [digitized(), awkward()] {
        assert_dst_round_trip(&d);
    }
    // The empty design: just the end record.
    let empty = design(0, vec![st(0, 0, StitchCommand::End)]);
    let bytes = encode_dst(&empty);
    assert_eq!(bytes.len(), 515);
    assert_eq!(&bytes[512..], &[0x00, 0x00, 0xF3]);
    assert_dst_round_trip(&empty);
}

#[test]
fn exp_round_trips() {
    for d in [digitized(), awkward()] {
        assert_same_program(&d, &decode_exp(&encode_exp(&d)));
    }
    // Exact bytes of the documented encodings.
    use StitchCommand::*;
    let d = design(
        2,
        vec![
            st(10, -20, Stitch),
            st(10, -20, Trim),
            st(300, -20, Jump),
            st(300, -20, ColorChange),
            st(299, -19, Stitch),
            st(299, -19, End),
        ],
    );
    assert_eq!(
        encode_exp(&d),
        [
            10, 20, // stitch (+10, −20): y is negated
            0x80, 0x80, 0x07, 0x00, // trim
            0x80, 0x04, 96, 0, 0x80, 0x04, 97, 0, 0x80, 0x04, 97,
            0, // jump 290 in equal steps
            0x80, 0x01, 0x00, 0x00, // colour change
            0xFF, 0xFF, // stitch (−1, +1)
        ]
    );
}

fn arb_design() -> impl Strategy<Value = Design> {
    let cmd = prop_oneof![
        6 => Just(StitchCommand::Stitch),
        2 => Just(StitchCommand::Jump),
        1 => Just(StitchCommand::Trim),
        1 => Just(StitchCommand::ColorChange),
    ];
    let step = (cmd, -700i32..=700, -700i32..=700, any::<bool>());
    (proptest::collection::vec(step, 0..60), any::<bool>()).prop_map(|(steps, end)| {
        let (mut x, mut y) = (0, 0);
        let mut stitches = Vec::new();
        for (cmd, dx, dy, stay) in steps {
            if !(stay && matches!(cmd, StitchCommand::Trim | StitchCommand::ColorChange)) {
                x += dx;
                y += dy;
            }
            stitches.push(st(x, y, cmd));
        }
        if end {
            stitches.push(st(x, y, StitchCommand::End));
        }
        let changes = stitches
            .iter()
            .filter(|s| s.cmd == StitchCommand::ColorChange)
            .count();
        design(changes + 1, stitches)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn any_design_round_trips_through_dst_and_exp(d in arb_design()) {
        validate_design(&d, &mut || Ok(())).unwrap();
        assert_dst_round_trip(&d);
        assert_same_program(&d, &decode_exp(&encode_exp(&d)));
    }
}

#[test]
fn svg_shows_one_path_per_colour_block_in_millimetres() {
    let d = digitized();
    let svg = render_svg(&d);
    assert!(svg.starts_with(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\""
    ));
    assert!(svg.trim_end().ends_with("</svg>"));
    let strokes: Vec<&str> = svg.split("stroke=\"").skip(1).map(|s| &s[..7]).collect();
    let colors: Vec<&str> = d.threads.iter().map(|t| t.color.as_str()).collect();
    assert_eq!(strokes, colors);
    assert_eq!(svg.matches("<path").count(), d.threads.len());
    assert_eq!(svg.matches(" L").count() as u64, d.stitch_count);
    // viewBox = extents (mm) plus a 1 mm margin; the document is sized in mm.
    let view = svg
        .split("viewBox=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let v: Vec<f64> = view.split(' ').map(|n| n.parse().unwrap()).collect();
    let e = d.extents;
    assert_eq!(v[0], f64::from(e.min_x.min(0)) / 10.0 - 1.0);
    assert_eq!(v[1], f64::from(e.min_y.min(0)) / 10.0 - 1.0);
    assert!((v[0] + v[2] - (f64::from(e.max_x) / 10.0 + 1.0)).abs() < 1e-9);
    assert!((v[1] + v[3] - (f64::from(e.max_y) / 10.0 + 1.0)).abs() < 1e-9);
    assert!(svg.contains(&format!("width=\"{}mm\"", v[2])));
    // Every coordinate of every path is inside the viewBox.
    for path in svg.split(" d=\"").skip(1) {
        let data = path.split('"').next().unwrap();
        assert!(data.starts_with('M'));
        for point in data.split(['M', 'L']).filter(|p| !p.trim().is_empty()) {
            let xy: Vec<f64> = point
                .split_whitespace()
                .map(|n| n.parse().unwrap())
                .collect();
            assert!(xy[0] >= v[0] && xy[0] <= v[0] + v[2] && xy[1] >= v[1] && xy[1] <= v[1] + v[3]);
        }
    }
}

#[test]
fn export_writes_the_file_in_the_job_dir_and_cleans_up() {
    let d = digitized();
    let json = serde_json::to_vec(&d).unwrap();
    for format in ExportFormat::ALL {
        let root = tempfile::tempdir().unwrap();
        let mut ctx = JobContext::new(config(root.path())).unwrap();
        let out = export(&mut ctx, &json, format).unwrap();
        assert_eq!(out.file_name, format!("design.{}", format.as_str()));
        assert_eq!(out.path, ctx.temp_dir().join(&out.file_name));
        assert_eq!(std::fs::read(&out.path).unwrap(), out.bytes);
        let expected = match format {
            ExportFormat::Dst => encode_dst(&d),
            ExportFormat::Exp => encode_exp(&d),
            ExportFormat::Svg => render_svg(&d).into_bytes(),
        };
        assert_eq!(out.bytes, expected);
        assert_eq!(
            ctx.progress().snapshot(),
            (None, vec![Stage::Parse, Stage::Encode, Stage::Write])
        );
        drop(ctx);
        assert!(std::fs::read_dir(root.path()).unwrap().next().is_none());
    }
}

#[test]
fn parse_reads_a_design_exactly_as_serde_json_does() {
    let d = digitized();
    let root = tempfile::tempdir().unwrap();
    let ctx = JobContext::new(config(root.path())).unwrap();
    let json = serde_json::to_vec(&d).unwrap();
    assert_eq!(parse(&ctx, &json).unwrap(), d);
    let pretty = serde_json::to_vec_pretty(&d).unwrap();
    assert_eq!(parse(&ctx, &pretty).unwrap(), d);
}

fn malformed(json: &[u8]) -> String {
    let root = tempfile::tempdir().unwrap();
    let mut ctx = JobContext::new(config(root.path())).unwrap();
    let err = export(&mut ctx, json, ExportFormat::Dst).unwrap_err();
    assert_eq!(err.failed_stage, Stage::Parse);
    assert!(err.completed_stages.is_empty());
    match err.kind {
        JobErrorKind::Invalid {
            code: ErrorCode::MalformedDesign,
            message,
        } => message,
        other => panic!("{other:?}"),
    }
}

#[test]
fn invalid_designs_are_refused_naming_the_problem() {
    let good = awkward();
    let json = |d: &Design| serde_json::to_vec(d).unwrap();
    let with = |f: &dyn Fn(&mut Design)| {
        let mut d = good.clone();
        f(&mut d);
        json(&d)
    };
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"{not json".to_vec(), "key must be a string"),
        (b"".to_vec(), "EOF"),
        (b"[]".to_vec(), "invalid length 0"),
        (
            with(&|d| d.format = "plimsoll-design/2".into()),
            "format is `plimsoll-design/2`",
        ),
        (with(&|d| d.stitches[3].x = -1_000_001), "beyond"),
        (
            with(&|d| d.threads.clear()),
            "3 stitched colour blocks but 0 threads",
        ),
        (
            with(&|d| d.threads[1].color = "\"/><script>".into()),
            "is not #rrggbb",
        ),
        (with(&|d| d.stitch_count += 1), "stitch_count"),
        (
            with(&|d| d.stitches.insert(2, st(500, -300, StitchCommand::End))),
            "not the last",
        ),
        (with(&|d| d.extents.max_x = 0), "outside the extents"),
        (with(&|d| d.width_mm = -1.0), "width_mm"),
        (
            json(&good).iter().chain(b"x").copied().collect(),
            "trailing",
        ),
    ];
    for (doc, want) in cases {
        let message = malformed(&doc);
        assert!(
            message.contains(want),
            "{message:?} should mention {want:?}"
        );
    }
    let mut huge = design(1, vec![st(1, 1, StitchCommand::Stitch); 10_000_001]);
    huge.stitch_count = 10_000_001;
    let err = validate_design(&huge, &mut || Ok(())).unwrap_err();
    assert!(
        format!("{err:?}").contains("more than the limit of 10000000"),
        "{err:?}"
    );
}

#[test]
fn export_failures_name_their_stage_and_leave_nothing_behind() {
    let json = serde_json::to_vec(&digitized()).unwrap();
    let cases = [
        (
            HookDirective::Fail {
                stage: Stage::Encode,
            },
            Stage::Encode,
            vec![Stage::Parse],
        ),
        (
            HookDirective::Panic {
                stage: Stage::Write,
            },
            Stage::Write,
            vec![Stage::Parse, Stage::Encode],
        ),
        (
            HookDirective::Fail {
                stage: Stage::Parse,
            },
            Stage::Parse,
            vec![],
        ),
    ];
    for (hook, stage, completed) in cases {
        let root = tempfile::tempdir().unwrap();
        let mut cfg = config(root.path());
        cfg.hooks = vec![hook];
        let mut ctx = JobContext::new(cfg).unwrap();
        let err = export(&mut ctx, &json, ExportFormat::Dst).unwrap_err();
        assert_eq!((err.failed_stage, err.completed_stages), (stage, completed));
        drop(ctx);
        assert!(std::fs::read_dir(root.path()).unwrap().next().is_none());
    }
    // A budget smaller than the upload: refused while parsing.
    let root = tempfile::tempdir().unwrap();
    let mut cfg = config(root.path());
    cfg.memory_cap_bytes = json.len() as u64 / 2;
    let mut ctx = JobContext::new(cfg).unwrap();
    let err = export(&mut ctx, &json, ExportFormat::Exp).unwrap_err();
    assert!(
        matches!(
            err.kind,
            JobErrorKind::Interrupted(Interrupt::MemoryCapExceeded { .. })
        ),
        "{err:?}"
    );
    assert_eq!(err.failed_stage, Stage::Parse);
    // Cancelled before it starts: the first stage says so.
    let cfg = config(root.path());
    cfg.cancel.cancel();
    let mut ctx = JobContext::new(cfg).unwrap();
    let err = export(&mut ctx, &json, ExportFormat::Svg).unwrap_err();
    assert_eq!(
        (err.kind, err.failed_stage),
        (
            JobErrorKind::Interrupted(Interrupt::Cancelled),
            Stage::Parse
        )
    );
}
