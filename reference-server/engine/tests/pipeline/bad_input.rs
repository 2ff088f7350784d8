//! Inputs the pipeline must refuse with their own code (F2), never a panic, and images whose
//! header or metadata lie about their size (B2).

use super::*;

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// A PNG whose IHDR claims `w × h` RGBA with a tiny IDAT: a header-only lie.
fn png_claiming(w: u32, h: u32) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    // zlib stream with one stored block of 5 zero bytes.
    chunk(
        &mut out,
        b"IDAT",
        &[
            0x78, 0x01, 0x01, 0x05, 0x00, 0xFA, 0xFF, 0, 0, 0, 0, 0, 0, 0x05, 0, 0x01,
        ],
    );
    chunk(&mut out, b"IEND", &[]);
    out
}

/// Recomputes every chunk CRC, so mutations reach the decoder rather than the checksum test.
fn fix_crcs(png: &mut [u8]) {
    let mut i = 8;
    while i + 12 <= png.len() {
        let len = u32::from_be_bytes(png[i..i + 4].try_into().unwrap()) as usize;
        let Some(end) = (i + 8).checked_add(len) else {
            return;
        };
        if end + 4 > png.len() {
            return;
        }
        let crc = crc32fast::hash(&png[i + 4..end]);
        png[end..end + 4].copy_from_slice(&crc.to_be_bytes());
        i = end + 4;
    }
}

fn expect_code(result: Result<DigitizeOutput, JobError>, code: ErrorCode, what: &str) -> JobError {
    let err = result
        .err()
        .unwrap_or_else(|| panic!("{what}: expected {code}, got a design"));
    assert_eq!(err.kind.code(), Some(code), "{what}: {err:?}");
    assert_eq!(err.failed_stage, Stage::Decode, "{what}");
    assert!(err.completed_stages.is_empty(), "{what}");
    err
}

#[test]
fn each_bad_input_gets_its_code() {
    let root = tempfile::tempdir().unwrap();
    let good = png(&poster(64, 48));
    let p = params(50.0);
    let go = |bytes: &[u8], p: &DigitizeParams| run(root.path(), bytes, p, |_| {});

    let truncated = &good[..good.len() / 2];
    expect_code(
        go(truncated, &p),
        ErrorCode::MalformedImage,
        "truncated PNG",
    );

    let mut corrupt_jpeg = jpeg(&poster(64, 48));
    // Keep SOI and the first segment; garble everything after (tables, frame, scan).
    for b in corrupt_jpeg[20..].iter_mut() {
        *b = 0xFF;
    }
    expect_code(
        go(&corrupt_jpeg, &p),
        ErrorCode::MalformedImage,
        "corrupt JPEG",
    );
    let half_jpeg = jpeg(&poster(64, 48))[..100].to_vec();
    expect_code(
        go(&half_jpeg, &p),
        ErrorCode::MalformedImage,
        "truncated JPEG header",
    );

    let gif = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;";
    let e = expect_code(go(gif, &p), ErrorCode::UnsupportedFormat, "GIF");
    assert!(e.to_string().contains("GIF"), "{e}");
    expect_code(
        go(b"II*\x00\x08\x00\x00\x00", &p),
        ErrorCode::UnsupportedFormat,
        "TIFF",
    );
    expect_code(go(b"%PDF-1.7\n", &p), ErrorCode::UnsupportedFormat, "PDF");
    expect_code(
        go(b"hello, world", &p),
        ErrorCode::UnsupportedFormat,
        "text",
    );
    let random: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    expect_code(
        go(&random, &p),
        ErrorCode::UnsupportedFormat,
        "random bytes",
    );
    expect_code(go(b"", &p), ErrorCode::EmptyBody, "empty");

    expect_code(
        go(&png_claiming(0, 10), &p),
        ErrorCode::MalformedImage,
        "zero width",
    );
    expect_code(
        go(&png_claiming(10, 0), &p),
        ErrorCode::MalformedImage,
        "zero height",
    );

    let mut small = p.clone();
    small.max_pixels = 64 * 48 - 1;
    expect_code(
        go(&good, &small),
        ErrorCode::PayloadTooLarge,
        "past max_pixels",
    );

    // A decompression bomb: 10^10 pixels claimed in ~100 bytes. Refused from the header, fast.
    let started = Instant::now();
    let e = expect_code(
        go(&png_claiming(100_000, 100_000), &p),
        ErrorCode::MemoryCapExceeded,
        "bomb",
    );
    assert!(started.elapsed() < Duration::from_secs(1));
    match e.kind {
        JobErrorKind::Interrupted(Interrupt::MemoryCapExceeded {
            requested_bytes,
            cap_bytes,
        }) => {
            assert_eq!(requested_bytes, 10_000_000_000 * ESTIMATED_BYTES_PER_PIXEL);
            assert_eq!(cap_bytes, 1 << 30);
        }
        other => panic!("{other:?}"),
    }
    // A header that passes but a body that is not what it claims: malformed, not a crash.
    expect_code(
        go(&png_claiming(300, 300), &p),
        ErrorCode::MalformedImage,
        "lying header",
    );

    let mut bad = p.clone();
    bad.colors = 0;
    expect_code(go(&good, &bad), ErrorCode::InvalidParameter, "zero colours");
    let mut bad = p.clone();
    bad.width_mm = f64::NAN;
    expect_code(go(&good, &bad), ErrorCode::InvalidParameter, "NaN width");
    assert!(is_empty_dir(root.path()));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random bytes and mutated PNGs (with and without valid checksums) never panic: every
    /// outcome is a design or an input/memory error.
    #[test]
    fn no_input_makes_the_pipeline_panic(
        random in proptest::collection::vec(any::<u8>(), 0..256),
        mutations in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        fix in any::<bool>(),
        truncate in any::<bool>(),
    ) {
        let root = tempfile::tempdir().unwrap();
        let mut p = params(40.0);
        p.max_pixels = 1_000_000;
        let mut mutated = BASE_PNG.with(|b| b.clone());
        for (at, byte) in &mutations {
            let i = at.index(mutated.len() - 8) + 8; // keep the signature: reach the decoder
            mutated[i] = *byte;
        }
        if truncate {
            mutated.truncate(cut.index(mutated.len()).max(8));
        }
        if fix {
            fix_crcs(&mut mutated);
        }
        for input in [&random, &mutated] {
            match run(root.path(), input, &p, |c| c.memory_cap_bytes = 64 << 20) {
                Ok(out) => assert_well_formed(&out.design, 30.0),
                Err(e) => prop_assert!(
                    matches!(
                        e.kind,
                        JobErrorKind::Invalid { .. } | JobErrorKind::Interrupted(Interrupt::MemoryCapExceeded { .. })
                    ),
                    "{e:?}"
                ),
            }
        }
        prop_assert!(is_empty_dir(root.path()));
    }
}

thread_local! {
    static BASE_PNG: Vec<u8> = png(&poster(40, 30));
}

/// Writes deflate bits, least significant first.
struct Bits {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits {
    fn put(&mut self, value: u64, len: u32) {
        self.acc |= value << self.n;
        self.n += len;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    /// Huffman codes go most significant bit first.
    fn code(&mut self, code: u64, len: u32) {
        let reversed = (0..len).fold(0, |r, i| r | ((code >> i) & 1) << (len - 1 - i));
        self.put(reversed, len);
    }
}

/// A zlib stream of `repeats × 258 + 1` zero bytes, ~13 bits per 258 bytes (fixed Huffman:
/// one literal 0, then length 258 / distance 1 copies).
fn zlib_zeros(repeats: usize) -> Vec<u8> {
    let mut b = Bits {
        out: vec![0x78, 0x01],
        acc: 0,
        n: 0,
    };
    b.put(1, 1); // final block
    b.put(1, 2); // fixed Huffman
    b.code(0x30, 8); // literal 0
    for _ in 0..repeats {
        b.code(0b1100_0101, 8); // length 258 (symbol 285)
        b.code(0, 5); // distance 1
    }
    b.code(0, 7); // end of block
    b.put(0, 7); // flush
    let total = (repeats * 258 + 1) as u64;
    let adler = ((total % 65521) << 16) | 1;
    b.out.extend_from_slice(&(adler as u32).to_be_bytes());
    b.out
}

#[test]
fn a_zip_bomb_in_the_png_metadata_is_bounded_by_the_budget() {
    // A 16×16 image whose ICC profile chunk inflates to 1 GiB: the header itself is the bomb.
    // The PNG decoder drops a profile it may not inflate, so the image still decodes; what
    // matters is that the profile was never inflated past the job's budget.
    let image = png(&poster(16, 16));
    let mut bomb = image[..33].to_vec(); // signature + IHDR
    let mut iccp = b"icc\0\0".to_vec();
    iccp.extend_from_slice(&zlib_zeros((1 << 30) / 258));
    chunk(&mut bomb, b"iCCP", &iccp);
    bomb.extend_from_slice(&image[33..]);
    assert!(bomb.len() < 8 << 20);

    let root = tempfile::tempdir().unwrap();
    let (result, peak) = heap_peak_of(|| {
        run(root.path(), &bomb, &params(40.0), |c| {
            c.memory_cap_bytes = 64 << 20
        })
        .map(|out| out.design.stitch_count)
    });
    match result {
        Ok(stitches) => assert!(stitches > 0),
        Err(e) => assert!(
            matches!(
                e.kind,
                JobErrorKind::Interrupted(Interrupt::MemoryCapExceeded { .. })
            ),
            "{e:?}"
        ),
    }
    assert!(
        peak < 80 << 20,
        "decoding held {peak} bytes with a 64 MiB cap"
    );
}
