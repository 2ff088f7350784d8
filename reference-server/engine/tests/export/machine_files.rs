//! DST and EXP read back by decoders written here from the format descriptions (not from the
//! encoder's code): the same program, moves split to each format's limit.

use super::*;

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
