//! Images the checker sends: a small valid PNG, and a PNG whose header claims any size.

/// A small PNG with flat colours: quick to digitize, real enough to produce stitches.
pub fn sample_png() -> Vec<u8> {
    let (w, h) = (96u32, 64u32);
    let img = image::RgbImage::from_fn(w, h, |x, y| {
        let (dx, dy) = (x as i64 - 30, y as i64 - 32);
        if dx * dx + dy * dy < 22 * 22 {
            image::Rgb([20, 40, 200])
        } else if x > 60 && (16..48).contains(&y) {
            image::Rgb([220, 30, 30])
        } else {
            image::Rgb([255, 255, 255])
        }
    });
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png)
        .expect("encoding a PNG in memory");
    out.into_inner()
}

/// A valid PNG whose header claims `width` x `height` (for the memory-cap check).
pub fn png_claiming(width: u32, height: u32) -> Vec<u8> {
    let img = image::RgbImage::from_pixel(8, 8, image::Rgb([1, 2, 3]));
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png)
        .expect("encoding a PNG in memory");
    let mut bytes = out.into_inner();
    bytes[16..20].copy_from_slice(&width.to_be_bytes());
    bytes[20..24].copy_from_slice(&height.to_be_bytes());
    let crc = crc32fast::hash(&bytes[12..29]);
    bytes[29..33].copy_from_slice(&crc.to_be_bytes());
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::{metric_value, server_timing_of};
    use plimsoll_spec::Contract;

    #[test]
    fn a_claiming_png_reads_back_with_the_claimed_size() {
        // The PNG decoder checks the header chunk's CRC, so this also proves the CRC is right.
        let bytes = png_claiming(100_000, 70_000);
        let dims =
            image::ImageReader::with_format(std::io::Cursor::new(bytes), image::ImageFormat::Png)
                .into_dimensions()
                .unwrap();
        assert_eq!(dims, (100_000, 70_000));
    }

    #[test]
    fn server_timing_is_read_by_the_contracts_names_and_only_when_whole() {
        let names = Contract::embedded()
            .observability()
            .server_timing_metrics
            .clone();
        assert_eq!(
            server_timing_of("queue;dur=1.5, run;dur=20", &names),
            Some((1.5, 20.0))
        );
        assert_eq!(
            server_timing_of("run;desc=\"x\";dur=7, queue;dur=0", &names),
            Some((0.0, 7.0))
        );
        // Absence is not a zero: either one missing, negative or not a number gives nothing.
        assert_eq!(server_timing_of("run;dur=20", &names), None);
        assert_eq!(server_timing_of("queue;dur=-1, run;dur=20", &names), None);
        assert_eq!(server_timing_of("queue;dur=NaN, run;dur=20", &names), None);
        assert_eq!(server_timing_of("", &names), None);
        let other = vec!["wait".to_owned(), "work".to_owned()];
        assert_eq!(
            server_timing_of("wait;dur=3, work;dur=4", &other),
            Some((3.0, 4.0))
        );
        assert_eq!(server_timing_of("queue;dur=3, run;dur=4", &other), None);
    }

    #[test]
    fn metric_values_sum_a_pool_or_every_series() {
        let text = "# TYPE plimsoll_workers_busy gauge\nplimsoll_workers_busy{pool=\"digitize\"} 3\nplimsoll_workers_busy{pool=\"relay\"} 2\nplimsoll_temp_files 1\n";
        assert_eq!(
            metric_value(text, "plimsoll_workers_busy", "digitize"),
            Some(3.0)
        );
        assert_eq!(metric_value(text, "plimsoll_workers_busy", ""), Some(5.0));
        assert_eq!(metric_value(text, "plimsoll_queue_depth", "digitize"), None);
    }
}
