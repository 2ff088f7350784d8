//! What a digitized design looks like: stitch count by area, colours and regions, every input
//! format the decoder takes.

use super::*;

#[test]
fn a_solid_rectangle_is_covered_with_the_stitch_count_its_area_needs() {
    let root = tempfile::tempdir().unwrap();
    // 0.5 mm per pixel: the rectangle is 150 mm × 60 mm at (25 mm, 20 mm).
    let img = rectangle(400, 200, (50, 40, 350, 160));
    let p = params(200.0);
    let out = run(root.path(), &png(&img), &p, |_| {}).unwrap();
    let d = &out.design;
    assert_well_formed(d, 30.0);
    assert_eq!(d.threads.len(), 1);
    assert_eq!(d.threads[0].color, "#c81e28");
    assert_eq!((d.width_mm, d.height_mm), (200.0, 100.0));

    let area = 150.0 * 60.0;
    let expected = area / (p.density_mm * p.max_stitch_mm);
    let n = d.stitch_count as f64;
    assert!(
        (n - expected).abs() / expected < 0.15,
        "{n} stitches, expected about {expected}"
    );

    // Every stitch inside the rectangle; interior points of a row on that row's staggered grid.
    let (rx0, ry0, rx1, ry1) = (250, 200, 1750, 800);
    let stitches: Vec<_> = d
        .stitches
        .iter()
        .filter(|s| s.cmd == StitchCommand::Stitch)
        .collect();
    for s in &stitches {
        assert!(
            s.x >= rx0 && s.x <= rx1 && s.y >= ry0 && s.y <= ry1,
            "{s:?} outside"
        );
    }
    let mut phases = std::collections::BTreeMap::new();
    for s in &stitches {
        if s.x > rx0 && s.x < rx1 {
            phases
                .entry(s.y)
                .or_insert_with(std::collections::BTreeSet::new)
                .insert(s.x % 30);
        }
    }
    for (y, set) in &phases {
        assert_eq!(set.len(), 1, "row {y} has points off its grid: {set:?}");
        let row = (*y - 2) / 4;
        assert_eq!(*set.iter().next().unwrap(), (row % 3) * 10, "row {y} phase");
    }

    // Coverage: each row of stitches covers ±density/2 around it; IoU with the rectangle.
    let (w, h) = (2000usize, 1000usize);
    let mut covered = vec![false; w * h];
    for pair in d.stitches.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.cmd == StitchCommand::Stitch && b.cmd == StitchCommand::Stitch && a.y == b.y {
            let (x0, x1) = (a.x.min(b.x) as usize, a.x.max(b.x) as usize);
            for y in (a.y - 2).max(0) as usize..(a.y + 2) as usize {
                covered[y * w + x0..y * w + x1]
                    .iter_mut()
                    .for_each(|c| *c = true);
            }
        }
    }
    let (mut inter, mut union) = (0u64, 0u64);
    for y in 0..h {
        for x in 0..w {
            let inside =
                x >= rx0 as usize && x < rx1 as usize && y >= ry0 as usize && y < ry1 as usize;
            let c = covered[y * w + x];
            inter += u64::from(inside && c);
            union += u64::from(inside || c);
        }
    }
    let iou = inter as f64 / union as f64;
    assert!(iou >= 0.9, "IoU {iou}");

    // The same rectangle at twice the resolution and the same physical size: same stitches.
    let img2 = rectangle(800, 400, (100, 80, 700, 320));
    let out2 = run(root.path(), &png(&img2), &p, |_| {}).unwrap();
    let n2 = out2.design.stitch_count as f64;
    assert!(
        (n2 - n).abs() / n < 0.02,
        "{n} vs {n2}: stitch count must follow mm², not pixels"
    );
    // And twice the physical width: four times the area, four times the stitches.
    let out3 = run(root.path(), &png(&img), &params(400.0), |_| {}).unwrap();
    let ratio = out3.design.stitch_count as f64 / n;
    assert!((ratio - 4.0).abs() < 0.3, "ratio {ratio}");
    assert!(is_empty_dir(root.path()));
}

#[test]
fn colours_regions_specks_and_sequencing() {
    let root = tempfile::tempdir().unwrap();
    let img = poster(300, 200);
    let mut p = params(150.0);
    p.colors = 4;
    let out = run(root.path(), &png(&img), &p, |_| {}).unwrap();
    let d = &out.design;
    assert_well_formed(d, 30.0);
    // The green noise is a palette colour but every region of it is a speck: merged away.
    let colors: Vec<&str> = d.threads.iter().map(|t| t.color.as_str()).collect();
    assert_eq!(colors.len(), 3, "{colors:?}");
    for want in ["#1428a0", "#c81e28", "#e6aa14"] {
        assert!(colors.contains(&want), "{want} missing from {colors:?}");
    }
    // Largest colour first: blue is the background.
    assert_eq!(colors[0], "#1428a0");

    // Colour blocks go largest area first, whatever the palette order.
    let img = RgbaImage::from_fn(200, 100, |x, _| match x {
        0..120 => Rgba([250, 240, 100, 255]),
        120..170 => Rgba([120, 130, 140, 255]),
        _ => Rgba([20, 20, 20, 255]),
    });
    let blocks = run(root.path(), &png(&img), &params(100.0), |_| {}).unwrap();
    let order: Vec<&str> = blocks
        .design
        .threads
        .iter()
        .map(|t| t.color.as_str())
        .collect();
    assert_eq!(order, ["#faf064", "#78828c", "#141414"]);
    // The JSON is exactly serde_json's rendering of the design.
    assert_eq!(out.json.to_vec(), serde_json::to_vec(d).unwrap());
    assert_eq!(
        serde_json::from_slice::<Design>(&out.json.to_vec()).unwrap(),
        *d
    );
}

#[test]
fn jpeg_and_sixteen_bit_png_and_transparent_images_digitize() {
    let root = tempfile::tempdir().unwrap();
    let img = rectangle(120, 80, (10, 10, 110, 70));
    let out = run(root.path(), &jpeg(&img), &params(60.0), |_| {}).unwrap();
    assert!(out.design.stitch_count > 500);
    assert_well_formed(&out.design, 30.0);

    let img16 = image::DynamicImage::ImageRgba8(img.clone()).into_rgba16();
    let mut bytes = Vec::new();
    image::codecs::png::PngEncoder::new(Cursor::new(&mut bytes))
        .write_image(
            &img16
                .as_raw()
                .iter()
                .flat_map(|v| v.to_be_bytes())
                .collect::<Vec<u8>>(),
            120,
            80,
            image::ExtendedColorType::Rgba16,
        )
        .unwrap();
    let out16 = run(root.path(), &bytes, &params(60.0), |_| {}).unwrap();
    let out8 = run(root.path(), &png(&img), &params(60.0), |_| {}).unwrap();
    assert_eq!(out16.design, out8.design);

    // Luma + alpha: the same shape in grey, transparent outside.
    let la = image::GrayAlphaImage::from_fn(120, 80, |x, y| {
        let inside = img.get_pixel(x, y)[3] == 255;
        image::LumaA([90, if inside { 255 } else { 0 }])
    });
    let mut bytes = Vec::new();
    image::codecs::png::PngEncoder::new(Cursor::new(&mut bytes))
        .write_image(la.as_raw(), 120, 80, image::ExtendedColorType::La8)
        .unwrap();
    let out_la = run(root.path(), &bytes, &params(60.0), |_| {}).unwrap();
    assert_eq!(out_la.design.stitches, out8.design.stitches);
    assert_eq!(out_la.design.threads[0].color, "#5a5a5a");

    let clear = RgbaImage::from_pixel(50, 50, CLEAR);
    let out = run(root.path(), &png(&clear), &params(60.0), |_| {}).unwrap();
    assert_eq!(out.design.stitch_count, 0);
    assert!(out.design.threads.is_empty());
    assert_eq!(out.design.stitches.len(), 1);
    assert_eq!(out.design.stitches[0].cmd, StitchCommand::End);
}

fn any_command() -> impl Strategy<Value = StitchCommand> {
    prop_oneof![
        Just(StitchCommand::Stitch),
        Just(StitchCommand::Jump),
        Just(StitchCommand::Trim),
        Just(StitchCommand::ColorChange),
        Just(StitchCommand::End),
    ]
}

fn any_coordinate() -> impl Strategy<Value = i32> {
    prop_oneof![-10_000..10_000i32, any::<i32>(), Just(i32::MIN), Just(0)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The serialize stage writes the stitches itself (issue 39): whatever the design, its
    /// bytes are exactly serde_json's rendering of it, the body `/v1/digitize` always answered.
    #[test]
    fn the_serialized_design_is_serde_jsons_rendering_byte_for_byte(
        stitches in proptest::collection::vec(
            (any_coordinate(), any_coordinate(), any_command())
                .prop_map(|(x, y, cmd)| plimsoll_spec::Stitch { x, y, cmd }),
            0..300,
        ),
        width_mm in 0.0..100_000.0f64,
        height_mm in 0.0..100_000.0f64,
        colors in proptest::collection::vec("#[0-9a-f]{6}", 0..4),
        stitch_count in any::<u64>(),
    ) {
        let design = Design {
            format: plimsoll_spec::design::DESIGN_FORMAT.into(),
            width_mm,
            height_mm,
            threads: colors.into_iter().map(|color| plimsoll_spec::Thread { color }).collect(),
            extents: plimsoll_spec::Extents { min_x: -3, min_y: 0, max_x: 8500, max_y: 1_000_000 },
            stitch_count,
            stitches,
        };
        let root = tempfile::tempdir().unwrap();
        let ctx = JobContext::new(config(root.path())).unwrap();
        let ours = plimsoll_engine::pipeline::serialize::serialize(&ctx, &design).unwrap();
        prop_assert_eq!(ours.to_vec(), serde_json::to_vec(&design).unwrap());
    }
}
