//! A request body as it arrived, read once, with whether its bytes are UTF-8.
//!
//! Design choice: a long session's body runs to tens of megabytes, and a check of its text
//! after it has been read is one more pass over memory on every call (at 20 MB, about a
//! fifth of what the proxy added to one). Each piece is checked as it is copied in, while
//! it is still in the cache. Pieces that each end on a character boundary make UTF-8 text
//! together, so the whole body needs no second check; a character split between two pieces
//! is checked with the next.

use crate::error::ProxyError;
use axum::body::Body;
use bytes::Bytes;
use http_body_util::BodyExt;

/// A request body and, when its bytes are UTF-8, its text.
#[derive(Debug)]
pub struct Received {
    bytes: Bytes,
    /// `Ok` when every byte was checked to be UTF-8; else the offset of the first byte that
    /// is not.
    utf8: Result<(), usize>,
}

impl Received {
    /// Reads `body` whole, up to `limit` bytes (413 past it); `declared` is its
    /// `Content-Length`, which sizes the buffer once.
    pub async fn read(mut body: Body, limit: usize, declared: Option<u64>) -> Result<Received, ProxyError> {
        let capacity = declared.map_or(0, |length| usize::try_from(length).unwrap_or(limit).min(limit));
        let mut bytes = Vec::new();
        // A declared length the system will not reserve (a client may declare what it never
        // sends) is grown into as the bytes arrive instead.
        let _ = bytes.try_reserve_exact(capacity);
        let mut check = Utf8Check::default();
        while let Some(frame) = body.frame().await {
            let frame =
                frame.map_err(|_| ProxyError::bad_request("the request body could not be read; send it again"))?;
            let Ok(data) = frame.into_data() else { continue };
            if data.len() > limit - bytes.len() {
                return Err(ProxyError::too_large(limit));
            }
            bytes.extend_from_slice(&data);
            check.advance(&bytes);
        }
        let utf8 = check.finish(&bytes);
        Ok(Received { bytes: Bytes::from(bytes), utf8 })
    }

    /// The body's bytes, as they came.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// The body's bytes, as they came.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// The body as text, or the offset of its first byte that is not UTF-8.
    pub fn text(&self) -> Result<&str, usize> {
        self.utf8?;
        // SAFETY: `utf8` is `Ok` only when `Utf8Check` found every byte of `bytes` to be
        // UTF-8 (see `Utf8Check::finish`), and `bytes` is never changed after.
        Ok(unsafe { std::str::from_utf8_unchecked(&self.bytes) })
    }

    /// A body of `bytes` checked whole, for tests.
    #[cfg(test)]
    pub fn of(bytes: impl Into<Bytes>) -> Received {
        let bytes = bytes.into();
        let mut check = Utf8Check::default();
        check.advance(&bytes);
        Received { utf8: check.finish(&bytes), bytes }
    }
}

/// How far a growing buffer is known to be UTF-8.
#[derive(Debug, Default)]
struct Utf8Check {
    /// The bytes before this offset are UTF-8 and end on a character boundary.
    valid: usize,
    /// The offset of the first byte that is not UTF-8, once one is found.
    invalid: Option<usize>,
}

impl Utf8Check {
    /// Checks what `buffer` holds past what was checked before (a character cut at its end
    /// is left for the next call).
    fn advance(&mut self, buffer: &[u8]) {
        if self.invalid.is_some() {
            return;
        }
        let Some(rest) = buffer.get(self.valid..) else { return };
        match simdutf8::compat::from_utf8(rest) {
            Ok(_) => self.valid = buffer.len(),
            Err(err) => {
                let at = self.valid + err.valid_up_to();
                match err.error_len() {
                    // A character cut at the end of what has arrived so far.
                    None => self.valid = at,
                    Some(_) => self.invalid = Some(at),
                }
            }
        }
    }

    /// `Ok` when all of `buffer` (the one `advance` saw last) is UTF-8.
    fn finish(self, buffer: &[u8]) -> Result<(), usize> {
        match self.invalid {
            Some(at) => Err(at),
            None if self.valid == buffer.len() => Ok(()),
            // A character cut at the end of the body.
            None => Err(self.valid),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Checks `bytes` as if it arrived in pieces ending at `cuts`.
    fn checked_in_pieces(bytes: &[u8], cuts: &[usize]) -> Result<(), usize> {
        let mut check = Utf8Check::default();
        let mut ends: Vec<usize> = cuts.iter().map(|cut| cut % (bytes.len() + 1)).collect();
        ends.sort_unstable();
        ends.push(bytes.len());
        for end in ends {
            check.advance(&bytes[..end]);
        }
        check.finish(bytes)
    }

    proptest! {
        /// However a body is cut into pieces, the check finds what a check of the whole finds.
        #[test]
        fn pieces_are_checked_as_the_whole(
            text in "[a-zé€😀\\\\\"{}\\[\\]:, ]{0,40}",
            bad in proptest::option::of((0usize..64, prop_oneof![Just(0x80u8), Just(0xC3), Just(0xF0), Just(0xFF)])),
            cuts in proptest::collection::vec(0usize..64, 0..8),
        ) {
            let mut bytes = text.into_bytes();
            if let Some((at, byte)) = bad {
                bytes.insert(at % (bytes.len() + 1), byte);
            }
            let whole = std::str::from_utf8(&bytes).map(|_| ()).map_err(|err| err.valid_up_to());
            prop_assert_eq!(checked_in_pieces(&bytes, &cuts), whole);
        }
    }

    #[test]
    fn a_character_cut_between_pieces_is_text_and_one_cut_at_the_end_is_not() {
        let text = "caf\u{e9} \u{1F600}".as_bytes();
        for cut in 0..=text.len() {
            assert_eq!(checked_in_pieces(text, &[cut]), Ok(()), "cut at {cut}");
        }
        assert_eq!(checked_in_pieces(&text[..text.len() - 1], &[3]), Err(6));
        assert_eq!(Received::of(&b"ok \xff"[..]).text(), Err(3));
        assert_eq!(Received::of("caf\u{e9}").text(), Ok("caf\u{e9}"));
    }

    #[tokio::test]
    async fn pieces_are_read_whole_up_to_the_limit_whatever_length_is_declared() {
        let pieces = ["{\"a\":\"caf", "\u{e9}", "\"}"].map(|piece| Bytes::from_static(piece.as_bytes()));
        let body = || Body::from_stream(futures_util::stream::iter(pieces.clone().map(Ok::<_, std::io::Error>)));
        let received = Received::read(body(), 64, None).await.unwrap();
        assert_eq!(received.text(), Ok("{\"a\":\"caf\u{e9}\"}"));
        assert_eq!(Received::read(body(), 12, Some(12)).await.unwrap_err().status, 413);
        assert_eq!(Received::read(body(), 13, Some(13)).await.unwrap().bytes().len(), 13);
        // A length declared past what can be reserved is read as the bytes come.
        assert_eq!(Received::read(body(), usize::MAX, Some(u64::MAX)).await.unwrap().bytes().len(), 13);
    }
}
