//! The SVG preview.

use super::*;

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
