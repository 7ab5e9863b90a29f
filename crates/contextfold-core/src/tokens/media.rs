//! Prices images and documents, which are not text: an image by its pixel size, read from
//! the header of its base64 data; a document by its text or its size.
//!
//! Design choice: image dimensions are read by decoding only the few base64 quads that hold
//! the header fields (random access into the base64 text), so pricing a 5 MB screenshot
//! costs microseconds and allocates nothing. Unknown sizes get a documented constant.

use super::{count_json, TokenCounter};
use crate::conversation::Media;
use serde_json::Value;

/// Pixels per token of an image, Anthropic's published rule: `tokens = width × height / 750`.
pub const IMAGE_PIXELS_PER_TOKEN: u64 = 750;

/// The longest edge the provider keeps; larger images are scaled down to it first.
pub const IMAGE_MAX_LONG_EDGE: u64 = 1568;

/// The most pixels the provider keeps (about 1.2 megapixels, which is 1,600 tokens); larger
/// images are scaled down, keeping their aspect ratio.
pub const IMAGE_MAX_PIXELS: u64 = 1_200_000;

/// Tokens of an image whose size we cannot read (a URL, a file id, an unknown format): the
/// most an image can cost after scaling.
pub const IMAGE_FALLBACK_TOKENS: u64 = IMAGE_MAX_PIXELS / IMAGE_PIXELS_PER_TOKEN;

/// Tokens per page of a base64 PDF: the upper end of Anthropic's "1,500–3,000 tokens per
/// page" for the extracted text.
pub const PDF_TOKENS_PER_PAGE: u64 = 3_000;

/// Bytes per page assumed when estimating a PDF's page count from its size (a text PDF
/// page is typically 10–100 KB).
pub const PDF_BYTES_PER_PAGE: u64 = 50_000;

/// Tokens of a document we cannot read (a URL or file id): one PDF page.
pub const DOCUMENT_FALLBACK_TOKENS: u64 = PDF_TOKENS_PER_PAGE;

/// The tokens of an image block with this `source`.
///
/// For `{"type": "base64", "data": …}` holding a PNG, GIF, JPEG or WebP, the size is read
/// from the image header and priced by [`image_tokens_for_size`]; any other source costs
/// [`IMAGE_FALLBACK_TOKENS`].
pub fn image_tokens(source: &Value) -> u64 {
    base64_data(source)
        .and_then(image_dimensions)
        .map_or(IMAGE_FALLBACK_TOKENS, |(width, height)| image_tokens_for_size(width, height))
}

/// The tokens of a `width × height` image: scaled down to at most [`IMAGE_MAX_LONG_EDGE`] on
/// the long edge and [`IMAGE_MAX_PIXELS`], then `pixels / 750` rounded up (at least one).
pub fn image_tokens_for_size(width: u32, height: u32) -> u64 {
    let (width, height) = (f64::from(width), f64::from(height));
    let long_edge = width.max(height);
    let mut scale = 1.0_f64;
    if long_edge > IMAGE_MAX_LONG_EDGE as f64 {
        scale = IMAGE_MAX_LONG_EDGE as f64 / long_edge;
    }
    let pixels = width * height * scale * scale;
    if pixels > IMAGE_MAX_PIXELS as f64 {
        scale *= (IMAGE_MAX_PIXELS as f64 / pixels).sqrt();
    }
    let pixels = (width * scale).floor() * (height * scale).floor();
    let tokens = (pixels / IMAGE_PIXELS_PER_TOKEN as f64).ceil() as u64;
    tokens.clamp(1, IMAGE_FALLBACK_TOKENS)
}

/// The tokens of a document block.
///
/// - `source.type == "text"`: its `data` text;
/// - `source.type == "content"`: its text blocks' text, images by [`image_tokens`], other
///   blocks by their compact JSON;
/// - `source.type == "base64"` (a PDF): [`PDF_TOKENS_PER_PAGE`] per
///   [`PDF_BYTES_PER_PAGE`] of decoded data, at least one page;
/// - anything else: [`DOCUMENT_FALLBACK_TOKENS`].
///
/// A `title` or `context` string on the block is counted as text too.
pub fn document_tokens(counter: &dyn TokenCounter, media: &Media) -> u64 {
    let extras: u64 = ["title", "context"]
        .iter()
        .filter_map(|key| media.extra.get(*key).and_then(Value::as_str))
        .map(|text| counter.count_text(text))
        .sum();
    let body = match media.source.get("type").and_then(Value::as_str) {
        Some("text") => media.source.get("data").and_then(Value::as_str).map_or(0, |text| counter.count_text(text)),
        Some("content") => match media.source.get("content") {
            Some(Value::String(text)) => counter.count_text(text),
            Some(Value::Array(items)) => items.iter().map(|item| content_item(counter, item)).sum(),
            _ => 0,
        },
        Some("base64") => {
            let bytes = base64_data(&media.source).map_or(0, |data| data.len() as u64 / 4 * 3);
            bytes.div_ceil(PDF_BYTES_PER_PAGE).max(1) * PDF_TOKENS_PER_PAGE
        }
        _ => DOCUMENT_FALLBACK_TOKENS,
    };
    extras + body
}

fn content_item(counter: &dyn TokenCounter, item: &Value) -> u64 {
    match item.get("type").and_then(Value::as_str) {
        Some("text") => item.get("text").and_then(Value::as_str).map_or(0, |text| counter.count_text(text)),
        Some("image") => item.get("source").map_or(IMAGE_FALLBACK_TOKENS, image_tokens),
        _ => count_json(counter, item),
    }
}

fn base64_data(source: &Value) -> Option<&str> {
    if source.get("type").and_then(Value::as_str) != Some("base64") {
        return None;
    }
    source.get("data").and_then(Value::as_str)
}

/// Random access to the bytes encoded by base64 text (standard or URL-safe alphabet, no
/// line breaks).
#[derive(Debug, Clone, Copy)]
struct Base64<'a> {
    text: &'a [u8],
}

impl<'a> Base64<'a> {
    /// A view of `text`.
    fn new(text: &'a str) -> Base64<'a> {
        Base64 { text: text.as_bytes() }
    }

    /// The decoded byte at `index`, or `None` past the end or at a character that is not
    /// base64.
    fn byte(&self, index: usize) -> Option<u8> {
        let quad = index / 3;
        let start = quad.checked_mul(4)?;
        let chars = self.text.get(start..start.checked_add(4)?)?;
        let mut bits = 0u32;
        let mut valid = 0;
        for &ch in chars {
            let Some(value) = sextet(ch) else { break };
            bits |= u32::from(value) << (18 - 6 * valid);
            valid += 1;
        }
        let position = index % 3;
        // A quad with n valid characters carries n - 1 bytes.
        if position + 1 >= valid {
            return None;
        }
        Some((bits >> (16 - 8 * position)) as u8)
    }

    fn bytes<const N: usize>(&self, index: usize) -> Option<[u8; N]> {
        let mut out = [0u8; N];
        for (offset, slot) in out.iter_mut().enumerate() {
            *slot = self.byte(index.checked_add(offset)?)?;
        }
        Some(out)
    }

    fn be16(&self, index: usize) -> Option<u32> {
        self.bytes::<2>(index).map(|b| u32::from(u16::from_be_bytes(b)))
    }

    fn le16(&self, index: usize) -> Option<u32> {
        self.bytes::<2>(index).map(|b| u32::from(u16::from_le_bytes(b)))
    }

    fn le24(&self, index: usize) -> Option<u32> {
        self.bytes::<3>(index).map(|b| u32::from_le_bytes([b[0], b[1], b[2], 0]))
    }
}

fn sextet(ch: u8) -> Option<u8> {
    match ch {
        b'A'..=b'Z' => Some(ch - b'A'),
        b'a'..=b'z' => Some(ch - b'a' + 26),
        b'0'..=b'9' => Some(ch - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    }
}

/// The `(width, height)` of a PNG, GIF, JPEG or WebP image given as base64 text, read from
/// its header; `None` for other formats or a damaged header.
pub fn image_dimensions(base64: &str) -> Option<(u32, u32)> {
    let data = &Base64::new(base64);
    let magic = data.bytes::<4>(0)?;
    let size = match magic {
        [0x89, b'P', b'N', b'G'] => {
            let width = u32::from_be_bytes(data.bytes::<4>(16)?);
            let height = u32::from_be_bytes(data.bytes::<4>(20)?);
            (width, height)
        }
        [b'G', b'I', b'F', b'8'] => (data.le16(6)?, data.le16(8)?),
        [0xFF, 0xD8, 0xFF, _] => jpeg_dimensions(data)?,
        [b'R', b'I', b'F', b'F'] if &data.bytes::<4>(8)? == b"WEBP" => webp_dimensions(data)?,
        _ => return None,
    };
    (size.0 > 0 && size.1 > 0).then_some(size)
}

fn jpeg_dimensions(data: &Base64<'_>) -> Option<(u32, u32)> {
    // Walk the segments: each is 0xFF, a marker, and (for most markers) a big-endian length
    // that includes the length field itself. Stop at the first start-of-frame.
    let mut at = 2usize;
    for _ in 0..1024 {
        if data.byte(at)? != 0xFF {
            return None;
        }
        let marker = data.byte(at + 1)?;
        match marker {
            0xFF => at += 1, // fill byte
            0xD0..=0xD9 | 0x01 => at += 2,
            0xC0..=0xCF if !matches!(marker, 0xC4 | 0xC8 | 0xCC) => {
                return Some((data.be16(at + 7)?, data.be16(at + 5)?));
            }
            _ => at = at.checked_add(2 + usize::try_from(data.be16(at + 2)?).ok()?)?,
        }
    }
    None
}

fn webp_dimensions(data: &Base64<'_>) -> Option<(u32, u32)> {
    match &data.bytes::<4>(12)? {
        b"VP8 " => Some((data.le16(26)? & 0x3FFF, data.le16(28)? & 0x3FFF)),
        b"VP8L" => {
            let bits = u32::from_le_bytes(data.bytes::<4>(21)?);
            Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
        }
        b"VP8X" => Some((data.le24(24)? + 1, data.le24(27)? + 1)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A tiny standard base64 encoder for building test images.
    fn encode(bytes: &[u8]) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    fn png(width: u32, height: u32) -> Vec<u8> {
        let mut bytes = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13];
        bytes.extend_from_slice(b"IHDR");
        bytes.extend_from_slice(&width.to_be_bytes());
        bytes.extend_from_slice(&height.to_be_bytes());
        bytes.extend_from_slice(&[8, 6, 0, 0, 0]);
        bytes
    }

    fn dims(bytes: &[u8]) -> Option<(u32, u32)> {
        image_dimensions(&encode(bytes))
    }

    #[test]
    fn base64_random_access_matches_the_bytes() {
        let bytes: Vec<u8> = (0..=255u8).chain([1, 2]).collect();
        let text = encode(&bytes);
        let view = Base64::new(&text);
        for (index, &byte) in bytes.iter().enumerate() {
            assert_eq!(view.byte(index), Some(byte), "byte {index}");
        }
        assert_eq!(view.byte(bytes.len()), None);
        assert_eq!(Base64::new("A!==").byte(0), None);
    }

    #[test]
    fn reads_each_format() {
        assert_eq!(dims(&png(640, 480)), Some((640, 480)));
        let mut gif = b"GIF89a".to_vec();
        gif.extend_from_slice(&[0x20, 0x03, 0x58, 0x02, 0, 0, 0]);
        assert_eq!(dims(&gif), Some((800, 600)));
        // JPEG: SOI, an APP0 segment of 16 bytes, a DQT, then SOF0 (height 300, width 400).
        let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10];
        jpeg.extend_from_slice(&[0; 14]);
        jpeg.extend_from_slice(&[0xFF, 0xDB, 0x00, 0x04, 0, 0]);
        jpeg.extend_from_slice(&[0xFF, 0xC0, 0x00, 0x11, 0x08, 0x01, 0x2C, 0x01, 0x90, 3]);
        jpeg.extend_from_slice(&[0; 8]);
        assert_eq!(dims(&jpeg), Some((400, 300)));
        let mut lossy = b"RIFF\0\0\0\0WEBPVP8 \0\0\0\0\0\0\0\x9d\x01\x2a".to_vec();
        lossy.extend_from_slice(&[0x00, 0x04, 0x00, 0x03, 0, 0]);
        assert_eq!(dims(&lossy), Some((1024, 768)));
        let mut lossless = b"RIFF\0\0\0\0WEBPVP8L\0\0\0\0\x2f".to_vec();
        let bits: u32 = 99 | (49 << 14);
        lossless.extend_from_slice(&bits.to_le_bytes());
        assert_eq!(dims(&lossless), Some((100, 50)));
        let mut extended = b"RIFF\0\0\0\0WEBPVP8X\0\0\0\0\0\0\0\0".to_vec();
        extended.extend_from_slice(&[0x3F, 0x01, 0x00, 0xC7, 0x00, 0x00]);
        assert_eq!(dims(&extended), Some((320, 200)));
        assert_eq!(dims(b"not an image at all"), None);
        assert_eq!(dims(&png(640, 480)[..18]), None);
    }

    #[test]
    fn sizes_are_scaled_like_the_provider() {
        assert_eq!(image_tokens_for_size(200, 200), 54);
        assert_eq!(image_tokens_for_size(1000, 1000), 1334);
        assert_eq!(image_tokens_for_size(1092, 1092), 1590);
        // Long edge first: 4000 x 1000 becomes 1568 x 392.
        assert_eq!(image_tokens_for_size(4000, 1000), 820);
        // Scaled to 1095 x 1095 whole pixels: just under the cap.
        assert_eq!(image_tokens_for_size(8000, 8000), 1599);
        assert_eq!(image_tokens_for_size(1, 1), 1);
        assert_eq!(IMAGE_FALLBACK_TOKENS, 1600);
    }

    #[test]
    fn sources_fall_back_when_unreadable() {
        let source = json!({"type": "base64", "media_type": "image/png", "data": encode(&png(200, 200))});
        assert_eq!(image_tokens(&source), 54);
        assert_eq!(image_tokens(&json!({"type": "url", "url": "https://x"})), IMAGE_FALLBACK_TOKENS);
        assert_eq!(image_tokens(&json!({"type": "base64", "data": "%%%%"})), IMAGE_FALLBACK_TOKENS);
    }

    #[test]
    fn documents() {
        let counter = &crate::tokens::Chars4;
        let doc = |source: Value| Media { source, extra: Default::default() };
        let text = doc(json!({"type": "text", "media_type": "text/plain", "data": "abcdefgh"}));
        assert_eq!(document_tokens(counter, &text), 2);
        let pdf = doc(json!({"type": "base64", "media_type": "application/pdf", "data": "A".repeat(200_000)}));
        assert_eq!(document_tokens(counter, &pdf), 3 * PDF_TOKENS_PER_PAGE);
        let url = doc(json!({"type": "url", "url": "https://x"}));
        assert_eq!(document_tokens(counter, &url), DOCUMENT_FALLBACK_TOKENS);
        let mut titled = doc(json!({"type": "content", "content": [{"type": "text", "text": "abcd"}]}));
        titled.extra.insert("title".into(), json!("abcd"));
        assert_eq!(document_tokens(counter, &titled), 2);
    }
}
