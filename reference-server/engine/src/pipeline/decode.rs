//! `decode`: spool the upload, sniff the format, check the header, then decode under limits.
//!
//! Everything that can be refused from the first bytes is refused before a pixel buffer exists:
//! the format (PNG and JPEG only, by magic bytes, never by a client's content type), zero or
//! corrupt dimensions, the memory estimate from the header (a decompression bomb claims huge
//! dimensions in a tiny file) and the pixel limit. The decoder then runs with
//! [`image::Limits`] set from what is left of the budget, so it cannot allocate past the cap
//! even if the header lied. Both decoders pull their input through a reader that checkpoints
//! (a PNG through the image crate, a JPEG through zune-jpeg driven directly: the image crate
//! would read the whole file before decoding it), so a cancel or the deadline stops a decode
//! mid-image.

use std::io::{BufRead, Cursor, Seek};

use image::error::{
    ImageFormatHint, LimitError, LimitErrorKind, UnsupportedError, UnsupportedErrorKind,
};
use image::{
    ColorType, DynamicImage, ImageDecoder, ImageError, ImageFormat, ImageReader, ImageResult,
    Limits,
};
use plimsoll_spec::ErrorCode;
use zune_jpeg::errors::DecodeErrors;
use zune_jpeg::zune_core::bytestream::ZCursor;
use zune_jpeg::zune_core::colorspace::ColorSpace;
use zune_jpeg::zune_core::options::DecoderOptions;

use super::{
    DigitizeParams, ESTIMATED_BYTES_PER_PIXEL, HeapSize, MAX_COORDINATE, UNITS_PER_MM,
    invalid_parameter, vec_bytes,
};
use crate::job::allocator::KeptBuffer;
use crate::job::{Charge, Interrupt, JobContext, StageError};

/// Name of the spooled upload inside the job's temp directory.
pub const UPLOAD_FILE_NAME: &str = "upload.bin";

/// Decoded pixels, 8- or 16-bit, 1 to 4 channels, rows packed without padding.
#[derive(Debug)]
pub struct DecodedImage {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// 1 = luma, 2 = luma + alpha, 3 = RGB, 4 = RGBA.
    pub channels: u8,
    /// The pixels, row by row, channels interleaved.
    pub samples: Samples,
}

/// The pixels at the depth the image has, so a 16-bit PNG is not converted (and doubled in
/// memory) before `quantize` reads it.
#[derive(Debug)]
pub enum Samples {
    /// 8 bits per channel, in a buffer the process keeps for the next job when it is large.
    U8(KeptBuffer),
    /// 16 bits per channel.
    U16(Vec<u16>),
}

impl HeapSize for DecodedImage {
    fn heap_bytes(&self) -> u64 {
        match &self.samples {
            Samples::U8(v) => v.capacity() as u64,
            Samples::U16(v) => vec_bytes(v),
        }
    }
}

/// The two formats we take, recognised by their magic bytes.
pub fn sniff(bytes: &[u8]) -> Option<ImageFormat> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(ImageFormat::Png)
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(ImageFormat::Jpeg)
    } else {
        None
    }
}

fn describe_unsupported(bytes: &[u8]) -> &'static str {
    const KNOWN: [(&[u8], &str); 7] = [
        (b"GIF8", "GIF"),
        (b"II*\0", "TIFF"),
        (b"MM\0*", "TIFF"),
        (b"%PDF", "PDF"),
        (b"BM", "BMP"),
        (b"RIFF", "RIFF/WebP"),
        (b"<", "text/markup"),
    ];
    KNOWN
        .iter()
        .find(|(magic, _)| bytes.starts_with(magic))
        .map(|(_, name)| *name)
        .unwrap_or("unrecognised data")
}

fn malformed(message: impl std::fmt::Display) -> StageError {
    StageError::invalid(
        ErrorCode::MalformedImage,
        format!("malformed image: {message}"),
    )
}

fn check_params(params: &DigitizeParams) -> Result<(), StageError> {
    let max_mm = f64::from(MAX_COORDINATE) / UNITS_PER_MM;
    let in_range = |v: f64, lo: f64, hi: f64| v.is_finite() && v >= lo && v <= hi;
    if !in_range(params.width_mm, 1.0, max_mm) {
        return Err(invalid_parameter(format!(
            "width_mm must be between 1 and {max_mm}, got {}",
            params.width_mm
        )));
    }
    if !in_range(params.density_mm, 0.1, 100.0) {
        return Err(invalid_parameter(format!(
            "density_mm must be between 0.1 and 100, got {}",
            params.density_mm
        )));
    }
    if !in_range(params.max_stitch_mm, 1.0, 100.0) {
        return Err(invalid_parameter(format!(
            "max_stitch_mm must be between 1 and 100, got {}",
            params.max_stitch_mm
        )));
    }
    if params.colors == 0 || params.colors == u8::MAX {
        return Err(invalid_parameter(format!(
            "colors must be between 1 and 254, got {}",
            params.colors
        )));
    }
    if params.max_pixels == 0 {
        return Err(invalid_parameter("max_pixels must be positive"));
    }
    Ok(())
}

/// Maps an `image` error: an allocation limit hit means the budget, an unsupported feature means
/// the format, anything else (truncation, bad checksums, bad markers, data larger than its
/// header) is a malformed image.
fn map_image_error(err: ImageError, ctx: &JobContext) -> StageError {
    match err {
        ImageError::Limits(e) if matches!(e.kind(), LimitErrorKind::InsufficientMemory) => {
            // The decoder wanted more than the budget left: more than the cap in total.
            StageError::Interrupted(Interrupt::MemoryCapExceeded {
                requested_bytes: ctx.memory_cap_bytes().saturating_add(1),
                cap_bytes: ctx.memory_cap_bytes(),
            })
        }
        ImageError::Unsupported(e) => StageError::invalid(
            ErrorCode::UnsupportedFormat,
            format!("unsupported image feature: {e}"),
        ),
        other => malformed(other),
    }
}

/// Decodes an upload: spool, sniff, check the header, then decode under the budget's limits.
pub fn decode(
    ctx: &JobContext,
    bytes: &[u8],
    params: &DigitizeParams,
) -> Result<DecodedImage, StageError> {
    check_params(params)?;
    let _upload = spool(ctx, bytes)?;
    let Some(format) = sniff(bytes) else {
        return Err(StageError::invalid(
            ErrorCode::UnsupportedFormat,
            format!(
                "unsupported image format ({}); send PNG or JPEG",
                describe_unsupported(bytes)
            ),
        ));
    };
    // The image crate's JPEG decoder, which reads the header, copies the input: hence the second
    // charge.
    let _header_copy = ctx.charge(if format == ImageFormat::Jpeg {
        bytes.len() as u64
    } else {
        0
    })?;
    let header = Header::read(ctx, bytes, format)?;
    let pixels = header.check(ctx, params)?;
    // Charge the decoded buffer before the decoder allocates it.
    let output_bytes = pixels * u64::from(header.color.bytes_per_pixel());
    let _output = ctx.charge(output_bytes)?;
    if format == ImageFormat::Jpeg {
        return decode_jpeg(ctx, bytes, &header, output_bytes);
    }
    decode_checked(ctx, bytes, format, &header, output_bytes)
}

/// Refuses an empty body, then keeps the upload in the job's temp directory. The upload is the
/// job's: it stays in memory for decoding and is charged as such (the charge is returned).
fn spool<'c>(ctx: &'c JobContext, bytes: &[u8]) -> Result<Charge<'c>, StageError> {
    if bytes.is_empty() {
        return Err(StageError::invalid(
            ErrorCode::EmptyBody,
            "the request body is empty",
        ));
    }
    let upload = ctx.charge(bytes.len() as u64)?;
    let failed = |e: std::io::Error| StageError::failed(format!("spooling the upload failed: {e}"));
    let mut file = std::fs::File::create(ctx.temp_dir().join(UPLOAD_FILE_NAME)).map_err(failed)?;
    // In slices with a checkpoint between them: copying a 16 MP PNG (tens of MB) into the page
    // cache in one `write` was a 97 ms stretch without a checkpoint (`bench_checkpoints`).
    for slice in bytes.chunks(SPOOL_SLICE) {
        std::io::Write::write_all(&mut file, slice).map_err(failed)?;
        ctx.checkpoint()?;
    }
    Ok(upload)
}

/// Bytes of the upload written to the spool file between checkpoints (~0.5 ms of copying).
const SPOOL_SLICE: usize = 1 << 20;

/// What the image header says, read before any pixel buffer exists.
#[derive(Debug, Clone, Copy)]
struct Header {
    width: u32,
    height: u32,
    color: ColorType,
}

impl Header {
    /// Header only. The allocation limit still applies (metadata chunks such as a compressed ICC
    /// profile are expanded here), but not the dimensions: a bomb must be measured, not fail to
    /// open.
    fn read(ctx: &JobContext, bytes: &[u8], format: ImageFormat) -> Result<Self, StageError> {
        let mut header_limits = Limits::default();
        header_limits.max_alloc = Some(ctx.memory_available_bytes());
        let mut header_reader = ImageReader::with_format(Cursor::new(bytes), format);
        header_reader.limits(header_limits);
        let header = header_reader
            .into_decoder()
            .map_err(|e| map_image_error(e, ctx))?;
        let (width, height) = header.dimensions();
        let color = header.color_type();
        Ok(Header {
            width,
            height,
            color,
        })
    }

    /// Refuses from the header alone what must not be decoded: zero dimensions, the memory
    /// estimate (B2), the pixel limit and a design too tall; returns the pixel count.
    fn check(&self, ctx: &JobContext, params: &DigitizeParams) -> Result<u64, StageError> {
        let Header { width, height, .. } = *self;
        if width == 0 || height == 0 {
            return Err(malformed(format!("zero dimension {width}x{height}")));
        }
        let pixels = u64::from(width) * u64::from(height);
        let estimate = pixels.saturating_mul(ESTIMATED_BYTES_PER_PIXEL);
        // clause: B2 — enforced before decoding, from the image header
        if estimate > ctx.memory_cap_bytes() {
            return Err(Interrupt::MemoryCapExceeded {
                requested_bytes: estimate,
                cap_bytes: ctx.memory_cap_bytes(),
            }
            .into());
        }
        if pixels > params.max_pixels || pixels >= u64::from(u32::MAX) {
            return Err(StageError::invalid(
                ErrorCode::PayloadTooLarge,
                format!(
                    "image is {width}x{height} = {pixels} pixels, more than the limit of {}",
                    params.max_pixels
                ),
            ));
        }
        let height_mm = params.width_mm * f64::from(height) / f64::from(width);
        if height_mm * UNITS_PER_MM > f64::from(MAX_COORDINATE) {
            return Err(invalid_parameter(format!(
                "at width_mm {} this {width}x{height} image would be {height_mm:.0} mm tall, more than {} mm",
                params.width_mm,
                f64::from(MAX_COORDINATE) / UNITS_PER_MM
            )));
        }
        Ok(pixels)
    }
}

/// Decodes the pixels, giving the decoder what is left of the budget as its own allocation limit
/// (the already charged `output_bytes` included), so it stops rather than overrun the cap, and
/// reading through [`CheckedInput`] so it stops on a checkpoint's refusal.
fn decode_checked(
    ctx: &JobContext,
    bytes: &[u8],
    format: ImageFormat,
    header: &Header,
    output_bytes: u64,
) -> Result<DecodedImage, StageError> {
    let (width, height) = (header.width, header.height);
    let mut limits = Limits::default();
    limits.max_image_width = Some(width);
    limits.max_image_height = Some(height);
    limits.max_alloc = Some(ctx.memory_available_bytes() + output_bytes);
    let interrupted = std::cell::Cell::new(None);
    let input = CheckedInput {
        inner: Cursor::new(bytes),
        ctx,
        interrupted: &interrupted,
    };
    let mut reader = ImageReader::with_format(input, format);
    reader.limits(limits.clone());
    let decoded = read_pixels(reader, limits);
    if let Some(interrupt) = interrupted.get() {
        return Err(interrupt.into());
    }
    let image = decoded.map_err(|e| map_image_error(e, ctx))?;
    ctx.checkpoint()?;
    if (image.width, image.height) != (width, height) {
        return Err(malformed(format!(
            "header says {width}x{height}, data decodes to {}x{}",
            image.width, image.height
        )));
    }
    Ok(image)
}

/// Reads the pixels as `ImageReader::decode` does (the decoder's own allocations limited to what
/// the output buffer leaves of `limits`), but an 8-bit image's into a [`KeptBuffer`]: a 16 MP
/// image's pixels then reuse the last large job's mapped memory. 16-bit images (never kept:
/// their samples are `u16`) go through the image crate's own buffers.
fn read_pixels(
    reader: ImageReader<impl BufRead + Seek>,
    mut limits: Limits,
) -> ImageResult<DecodedImage> {
    let mut decoder = reader.into_decoder()?;
    limits.reserve(decoder.total_bytes())?;
    decoder.set_limits(limits)?;
    let (width, height) = decoder.dimensions();
    let color = decoder.color_type();
    let channels = color.channel_count();
    let samples = if color.bytes_per_pixel() == channels {
        let len = usize::try_from(decoder.total_bytes()).map_err(|_| {
            ImageError::Limits(LimitError::from_kind(LimitErrorKind::InsufficientMemory))
        })?;
        let mut pixels = KeptBuffer::zeroed(len);
        decoder.read_image(&mut pixels)?;
        Samples::U8(pixels)
    } else {
        match DynamicImage::from_decoder(decoder)? {
            DynamicImage::ImageLuma16(b) => Samples::U16(b.into_raw()),
            DynamicImage::ImageLumaA16(b) => Samples::U16(b.into_raw()),
            DynamicImage::ImageRgb16(b) => Samples::U16(b.into_raw()),
            DynamicImage::ImageRgba16(b) => Samples::U16(b.into_raw()),
            // PNG's colour types are 8- and 16-bit luma, luma with alpha, RGB and RGBA.
            other => {
                return Err(ImageError::Unsupported(
                    UnsupportedError::from_format_and_kind(
                        ImageFormatHint::Exact(ImageFormat::Png),
                        UnsupportedErrorKind::Color(other.color().into()),
                    ),
                ));
            }
        }
    };
    Ok(DecodedImage {
        width,
        height,
        channels,
        samples,
    })
}

/// The upload as the PNG decoder's input, with a checkpoint whenever the decoder asks for more
/// data (at most [`INPUT_SLICE`] bytes at a time). The PNG decoder pulls compressed data as it
/// produces rows, so a cancel or the deadline stops it mid-image; a refusal is an I/O error to
/// the decoder, and the reason is kept in `interrupted`.
struct CheckedInput<'a> {
    inner: Cursor<&'a [u8]>,
    ctx: &'a JobContext,
    interrupted: &'a std::cell::Cell<Option<Interrupt>>,
}

/// Largest slice handed to the decoder per request for data.
const INPUT_SLICE: usize = 16 * 1024;

impl CheckedInput<'_> {
    fn check(&self) -> std::io::Result<()> {
        self.ctx.checkpoint().map_err(|i| {
            self.interrupted.set(Some(i));
            std::io::Error::other(i)
        })
    }
}

impl std::io::Read for CheckedInput<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.check()?;
        let n = buf.len().min(INPUT_SLICE);
        self.inner.read(&mut buf[..n])
    }
}

impl std::io::BufRead for CheckedInput<'_> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.check()?;
        let data = self.inner.fill_buf()?;
        Ok(&data[..data.len().min(INPUT_SLICE)])
    }

    fn consume(&mut self, amount: usize) {
        self.inner.consume(amount);
    }
}

impl std::io::Seek for CheckedInput<'_> {
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        self.inner.seek(pos)
    }
}

/// Decodes a JPEG's pixels with zune-jpeg as the image crate's `JpegDecoder` does, so the pixels
/// and the error codes are the same: the same options (lenient mode, the header's dimensions as
/// the limits), the same output colour space, an output buffer of the same size, the same
/// mapping of its errors. What differs is the input: the image crate reads the whole file into
/// memory and then decodes it in one call (~9 ms of CPU per megapixel without a checkpoint,
/// `bench_checkpoints`), where here the decoder pulls it through [`JpegInput`] as it decodes each
/// row of blocks, with a checkpoint every [`JPEG_SLICE`] bytes. The buffer is the caller's
/// `output_bytes` charge; like the image crate, no orientation or colour profile is applied.
/// A progressive JPEG is read scan by scan (through the checkpoints) before any pixel exists,
/// and its last pass (inverse DCT and colour conversion of the whole image) is one call that
/// reads nothing: 4 to 6 ms of CPU per megapixel, the one stretch over the interval, as B3's
/// rationale says.
fn decode_jpeg(
    ctx: &JobContext,
    bytes: &[u8],
    header: &Header,
    output_bytes: u64,
) -> Result<DecodedImage, StageError> {
    let (width, height) = (header.width, header.height);
    // The image crate asks zune-jpeg for the file's own colour space when it has a colour type
    // for it, RGB otherwise (CMYK, YCCK, ...), and reports that colour type in the header: so
    // the header's colour type names the colour space to ask for.
    let (colorspace, channels) = match header.color {
        ColorType::L8 => (ColorSpace::Luma, 1),
        ColorType::La8 => (ColorSpace::LumaA, 2),
        ColorType::Rgb8 => (ColorSpace::RGB, 3),
        ColorType::Rgba8 => (ColorSpace::RGBA, 4),
        other => {
            return Err(malformed(format!(
                "a JPEG header with colour type {other:?}"
            )));
        }
    };
    let options = DecoderOptions::default()
        .jpeg_set_out_colorspace(colorspace)
        .set_strict_mode(false)
        .set_max_width(width as usize)
        .set_max_height(height as usize);
    let Ok(len) = usize::try_from(output_bytes) else {
        return Err(map_image_error(
            ImageError::Limits(image::error::LimitError::from_kind(
                LimitErrorKind::InsufficientMemory,
            )),
            ctx,
        ));
    };
    let mut pixels = KeptBuffer::zeroed(len);
    let mut input = JpegInput {
        inner: ZCursor::new(bytes),
        ctx,
        unchecked: 0,
        interrupted: None,
    };
    let decoded = {
        let mut decoder = zune_jpeg::JpegDecoder::new_with_options(&mut input, options);
        decoder
            .decode_into(&mut pixels)
            .map(|()| decoder.dimensions())
    };
    if let Some(interrupt) = input.interrupted {
        return Err(interrupt.into());
    }
    let dimensions = decoded.map_err(|e| map_image_error(jpeg_error(e), ctx))?;
    ctx.checkpoint()?;
    if let Some((w, h)) = dimensions.filter(|&d| d != (width as usize, height as usize)) {
        return Err(malformed(format!(
            "header says {width}x{height}, data decodes to {w}x{h}"
        )));
    }
    Ok(DecodedImage {
        width,
        height,
        channels,
        samples: Samples::U8(pixels),
    })
}

/// A zune-jpeg error as the image crate reports it (its `ImageError::from_jpeg`), so
/// [`map_image_error`] gives it the same code and message as when the image crate decoded.
fn jpeg_error(err: DecodeErrors) -> ImageError {
    use image::error::{DecodingError, LimitError, UnsupportedError, UnsupportedErrorKind};
    match err {
        DecodeErrors::Unsupported(desc) => {
            ImageError::Unsupported(UnsupportedError::from_format_and_kind(
                ImageFormat::Jpeg.into(),
                UnsupportedErrorKind::GenericFeature(format!("{desc:?}")),
            ))
        }
        DecodeErrors::LargeDimensions(_) => {
            ImageError::Limits(LimitError::from_kind(LimitErrorKind::DimensionError))
        }
        err => ImageError::Decoding(DecodingError::new(ImageFormat::Jpeg.into(), err)),
    }
}

/// The upload as zune-jpeg's input, with a checkpoint each time the decoder has read another
/// [`JPEG_SLICE`] bytes. zune-jpeg reads through `std::io` a few bytes at a time (four per
/// refill of its bit buffer), so a checkpoint on every read (~30 ns) would cost more than the
/// decoding: the bytes are counted instead. Every read, seek and look ahead is the one the
/// image crate's `ZCursor` answers, so the decoder sees the same stream, truncation and all. A
/// refusal is kept in `interrupted` and answers every later read with an I/O error, which
/// stops the decoder within a few bytes.
struct JpegInput<'a> {
    inner: ZCursor<&'a [u8]>,
    ctx: &'a JobContext,
    /// Bytes read since the last checkpoint.
    unchecked: usize,
    interrupted: Option<Interrupt>,
}

/// Bytes zune-jpeg reads between two checkpoints. Its time per byte is highest where the data is
/// least, a flat image (every block its DC alone): a 25 MP one in 147 KB, optimised Huffman
/// tables and 4:2:0, decodes in 47 ms, 16 KiB in ~5 ms (`bench_checkpoints --file`). A
/// photograph's 16 MP are 6.6 MB: its ~1,600 checkpoints at 4 KiB cost ~0.05 ms of its ~155.
const JPEG_SLICE: usize = 4 * 1024;

impl JpegInput<'_> {
    fn refused(&self) -> std::io::Result<()> {
        match self.interrupted {
            Some(interrupt) => Err(std::io::Error::other(interrupt)),
            None => Ok(()),
        }
    }
}

impl std::io::Read for JpegInput<'_> {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.refused()?;
        let n = self.inner.read(buf)?;
        self.unchecked += n;
        if self.unchecked >= JPEG_SLICE {
            self.unchecked = 0;
            if let Err(interrupt) = self.ctx.checkpoint() {
                self.interrupted = Some(interrupt);
                return Err(std::io::Error::other(interrupt));
            }
        }
        Ok(n)
    }
}

impl std::io::BufRead for JpegInput<'_> {
    #[inline]
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.refused()?;
        self.inner.fill_buf()
    }

    #[inline]
    fn consume(&mut self, amount: usize) {
        self.unchecked += amount;
        self.inner.consume(amount);
    }
}

impl std::io::Seek for JpegInput<'_> {
    #[inline]
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        self.refused()?;
        self.inner.seek(pos)
    }
}
