//! A JPEG is decoded by zune-jpeg driven directly, its input pulled through a reader that
//! checkpoints (issue 39), where the image crate read the whole file and decoded it in one call.
//! What the image crate answered must not change: the same pixels in the same layout, and an
//! error wherever it gave one, with the same message (so the same code), for whole, truncated
//! and corrupt files alike.

use image::{DynamicImage, ImageFormat};
use plimsoll_engine::pipeline::decode::{Samples, decode};

use super::*;

/// What the engine's decode stage makes of `bytes`: (width, height, channels, samples), or the
/// error's message.
fn engine_decode(bytes: &[u8]) -> Result<(u32, u32, u8, Vec<u8>), String> {
    let root = tempfile::tempdir().unwrap();
    let ctx = JobContext::new(config(root.path())).unwrap();
    let image = decode(&ctx, bytes, &params(100.0)).map_err(|e| e.to_string())?;
    let Samples::U8(samples) = image.samples else {
        panic!("a JPEG decoded to 16-bit samples");
    };
    Ok((image.width, image.height, image.channels, samples.to_vec()))
}

/// What the image crate makes of `bytes`, in the same terms.
fn image_decode(bytes: &[u8]) -> Result<(u32, u32, u8, Vec<u8>), String> {
    let image =
        image::load_from_memory_with_format(bytes, ImageFormat::Jpeg).map_err(|e| e.to_string())?;
    let (width, height) = (image.width(), image.height());
    let channels = image.color().channel_count();
    let samples = match image {
        DynamicImage::ImageLuma8(b) => b.into_raw(),
        DynamicImage::ImageLumaA8(b) => b.into_raw(),
        DynamicImage::ImageRgb8(b) => b.into_raw(),
        DynamicImage::ImageRgba8(b) => b.into_raw(),
        other => panic!("the image crate decoded a JPEG as {:?}", other.color()),
    };
    Ok((width, height, channels, samples))
}

/// The engine's answer is the image crate's: the same pixels, or an error carrying its message.
fn same_as_the_image_crate(name: &str, bytes: &[u8]) {
    match (engine_decode(bytes), image_decode(bytes)) {
        (Ok(ours), Ok(theirs)) => {
            assert_eq!(
                (ours.0, ours.1, ours.2),
                (theirs.0, theirs.1, theirs.2),
                "{name}: dimensions or channels"
            );
            assert!(ours.3 == theirs.3, "{name}: the pixels differ");
        }
        (Err(ours), Err(theirs)) => {
            assert!(ours.contains(&theirs), "{name}: `{ours}` is not `{theirs}`");
        }
        (ours, theirs) => panic!(
            "{name}: the engine answered {:?}, the image crate {:?}",
            ours.map(|o| (o.0, o.1, o.2)),
            theirs.map(|t| (t.0, t.1, t.2))
        ),
    }
}

fn grey_jpeg(img: &RgbaImage) -> Vec<u8> {
    let luma = DynamicImage::ImageRgba8(img.clone()).into_luma8();
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(Cursor::new(&mut out), 75)
        .write_image(
            luma.as_raw(),
            luma.width(),
            luma.height(),
            image::ExtendedColorType::L8,
        )
        .unwrap();
    out
}

#[test]
fn a_jpeg_decodes_to_the_image_crates_pixels() {
    // Colour and grey, sides that are and are not multiples of a block, and a noisy one.
    for (name, bytes) in [
        ("colour 320x240", jpeg(&poster(320, 240))),
        ("colour 37x23", jpeg(&poster(37, 23))),
        ("colour 1x1", jpeg(&poster(1, 1))),
        ("grey 250x131", grey_jpeg(&poster(250, 131))),
        ("colour noise 301x299", jpeg(&noise(301, 299))),
    ] {
        assert!(engine_decode(&bytes).is_ok(), "{name} must decode");
        same_as_the_image_crate(name, &bytes);
    }
}

#[test]
fn a_truncated_or_corrupt_jpeg_gets_the_image_crates_answer() {
    let whole = jpeg(&noise(200, 160));
    for cut in [
        3,
        20,
        100,
        300,
        whole.len() / 2,
        whole.len() * 9 / 10,
        whole.len() - 2,
    ] {
        same_as_the_image_crate(&format!("cut at {cut}"), &whole[..cut]);
    }
    // The conformance checker's corrupt JPEG (F2): the first half, then zeros.
    let mut padded = whole[..whole.len() / 2].to_vec();
    padded.extend(std::iter::repeat_n(0u8, 64));
    same_as_the_image_crate("half, then zeros", &padded);
    // Everything after the first segment garbled.
    let mut garbled = whole.clone();
    for b in garbled[20..].iter_mut() {
        *b = 0xFF;
    }
    same_as_the_image_crate("garbled", &garbled);
    // Bytes flipped in the entropy-coded data.
    let mut flipped = whole.clone();
    for i in (whole.len() / 3..whole.len() - 2).step_by(97) {
        flipped[i] ^= 0x5A;
    }
    same_as_the_image_crate("flipped", &flipped);
}

/// Cancels the job at the decode stage's `at`-th checkpoint.
#[derive(Debug)]
struct CancelInsideDecode {
    at: u64,
    token: CancellationToken,
    seen: std::sync::Mutex<(bool, u64)>,
}

impl plimsoll_engine::job::CheckpointObserver for CancelInsideDecode {
    fn stage_started(&self, stage: Stage) {
        *self.seen.lock().unwrap() = (stage == Stage::Decode, 0);
    }

    fn checkpoint(&self) {
        let mut seen = self.seen.lock().unwrap();
        seen.1 += 1;
        if seen.0 && seen.1 == self.at {
            self.token.cancel();
        }
    }

    fn stage_ended(&self, _stage: Stage) {}
}

/// A cancel that comes while zune-jpeg is decoding stops the job there as a cancellation (the
/// reader's refusal is not taken for a malformed image), naming `decode` with nothing completed.
#[test]
fn a_cancel_during_a_jpeg_decode_stops_it_as_cancelled() {
    let image = jpeg(&noise(1000, 1000));
    let root = tempfile::tempdir().unwrap();
    let cfg = config(root.path());
    let token = cfg.cancel.clone();
    let mut ctx = JobContext::new(cfg).unwrap();
    // Past the spooling (a checkpoint per MiB) and the header: inside the pixels.
    ctx.observe(Arc::new(CancelInsideDecode {
        at: 20,
        token,
        seen: Default::default(),
    }));
    let err = failed(digitize(&mut ctx, &image, &params(100.0)));
    assert_eq!(err.kind, JobErrorKind::Interrupted(Interrupt::Cancelled));
    assert_eq!(err.failed_stage, Stage::Decode);
    assert!(err.completed_stages.is_empty());
}

/// Noise in every channel: what compresses worst, so the most entropy-coded data per pixel.
fn noise(w: u32, h: u32) -> RgbaImage {
    let mut seed = 11u64;
    RgbaImage::from_fn(w, h, |_, _| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let [r, g, b, ..] = (seed >> 24).to_le_bytes();
        Rgba([r, g, b, 255])
    })
}
