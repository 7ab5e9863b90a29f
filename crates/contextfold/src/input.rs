//! Reading and writing conversation files: plain or gzip, a path or standard input.
//!
//! Errors name the file and the place in it (line and column for bad JSON or bad UTF-8,
//! message and block for a bad conversation), so a user can go straight to the fault.

use contextfold_core::format::{self, Format, FormatError, Layout, Parsed};
use contextfold_core::Conversation;
use flate2::read::MultiGzDecoder;
use std::fmt;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// What a path names: a file, or standard input/output for `-`.
fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// A file that could not be read or written as a conversation.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: Shown,
        /// The underlying error.
        source: io::Error,
    },
    /// The file is not UTF-8 text.
    #[error("{path}: not UTF-8 text at line {line}, column {column}")]
    NotUtf8 {
        /// The file.
        path: Shown,
        /// 1-based line of the first bad byte.
        line: usize,
        /// 1-based column (in bytes) of the first bad byte.
        column: usize,
    },
    /// The text is not a conversation in the expected format.
    #[error("{path}: {source}")]
    Format {
        /// The file.
        path: Shown,
        /// What is wrong.
        source: FormatError,
    },
}

/// A path as shown in messages (`<stdin>` for `-`).
#[derive(Debug, Clone)]
pub struct Shown(pub PathBuf);

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if is_stdio(&self.0) {
            f.write_str("<stdin>")
        } else {
            write!(f, "{}", self.0.display())
        }
    }
}

/// Reads the bytes of `path` (`-` for standard input), un-gzipping when they are gzip.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, LoadError> {
    let io_error = |source| LoadError::Io { path: Shown(path.to_path_buf()), source };
    let mut raw = Vec::new();
    if is_stdio(path) {
        io::stdin().lock().read_to_end(&mut raw).map_err(io_error)?;
    } else {
        raw = std::fs::read(path).map_err(io_error)?;
    }
    // Gzip by its magic number, whatever the file is called.
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut text = Vec::new();
        MultiGzDecoder::new(raw.as_slice()).read_to_end(&mut text).map_err(io_error)?;
        return Ok(text);
    }
    Ok(raw)
}

/// Reads `path` as UTF-8 text (gzip and `-` handled).
pub fn read_text(path: &Path) -> Result<String, LoadError> {
    let bytes = read_bytes(path)?;
    String::from_utf8(bytes).map_err(|err| {
        let valid = &err.as_bytes()[..err.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|&&byte| byte == b'\n').count() + 1;
        let column = valid.len() - valid.iter().rposition(|&byte| byte == b'\n').map_or(0, |at| at + 1) + 1;
        LoadError::NotUtf8 { path: Shown(path.to_path_buf()), line, column }
    })
}

/// Reads a conversation from `path`, as `format` or the detected format.
pub fn load(path: &Path, format: Option<Format>) -> Result<Parsed, LoadError> {
    let text = read_text(path)?;
    format::parse(&text, format).map_err(|source| LoadError::Format { path: Shown(path.to_path_buf()), source })
}

/// Writes `conversation` to `path` (`-` for standard output) as `format`; a path ending in
/// `.gz` is gzip-compressed.
pub fn save(path: &Path, conversation: &Conversation, format: Format, layout: Layout) -> Result<(), LoadError> {
    let text = format::write(conversation, format, layout)
        .map_err(|source| LoadError::Format { path: Shown(path.to_path_buf()), source })?;
    let io_error = |source| LoadError::Io { path: Shown(path.to_path_buf()), source };
    if is_stdio(path) {
        let mut stdout = io::stdout().lock();
        return stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()).map_err(io_error);
    }
    let bytes = if path.extension().is_some_and(|ext| ext == "gz") {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(text.as_bytes()).map_err(io_error)?;
        encoder.finish().map_err(io_error)?
    } else {
        text.into_bytes()
    };
    std::fs::write(path, bytes).map_err(io_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str, bytes: &[u8]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("contextfold-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn reads_gzip_transparently() {
        let text = br#"[{"role": "user", "content": "hi"}]"#;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(text).unwrap();
        let path = temp("a.json.gz", &encoder.finish().unwrap());
        assert_eq!(load(&path, None).unwrap().conversation.messages.len(), 1);
    }

    #[test]
    fn bad_utf8_names_line_and_column() {
        let path = temp("bad.json", b"[\n  {\"a\": \"\xff\"}]");
        let err = load(&path, None).unwrap_err().to_string();
        assert!(err.ends_with("bad.json: not UTF-8 text at line 2, column 10"), "{err}");
    }

    #[test]
    fn missing_file_names_the_path() {
        let err = load(Path::new("/nonexistent/x.json"), None).unwrap_err().to_string();
        assert!(err.starts_with("/nonexistent/x.json: "), "{err}");
    }
}
