//! Reading and writing conversation files: plain or gzip, a path or standard input.
//!
//! Input is streamed and bounded: bytes are read (and gzip inflated) as they come, and an
//! input larger than [`ReadOptions::max_bytes`] (after decompression) is refused as soon as
//! the limit is passed, so a small gzip bomb cannot take the memory of the machine. A
//! caller may watch the bytes arrive ([`ReadOptions::progress`]) to show progress.
//!
//! Errors name the file and the place in it (line and column for bad JSON or bad UTF-8,
//! message and block for a bad conversation), so a user can go straight to the fault.

use contextfold_core::format::lost::Loss;
use contextfold_core::format::{self, Format, FormatError, Layout, Parsed};
use contextfold_core::Conversation;
use flate2::read::MultiGzDecoder;
use std::fmt;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// The most bytes an input may hold by default, after decompression: 256 MB.
pub const DEFAULT_MAX_INPUT_BYTES: u64 = 256_000_000;

/// How often, in bytes read, [`ReadOptions::progress`] is called.
const PROGRESS_EVERY: u64 = 1 << 20;

/// How an input is read.
#[derive(Clone, Copy)]
pub struct ReadOptions<'a> {
    /// The most bytes the input may hold, after decompression; a larger input is an error
    /// ([`LoadError::TooLarge`]). Default [`DEFAULT_MAX_INPUT_BYTES`].
    pub max_bytes: u64,
    /// Called every megabyte read and once at the end, with the raw (compressed) bytes read
    /// so far and the file's size when it is known (not for standard input).
    pub progress: Option<&'a dyn Fn(ReadProgress)>,
}

impl Default for ReadOptions<'_> {
    fn default() -> Self {
        ReadOptions { max_bytes: DEFAULT_MAX_INPUT_BYTES, progress: None }
    }
}

impl fmt::Debug for ReadOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadOptions")
            .field("max_bytes", &self.max_bytes)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// How far reading an input has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadProgress {
    /// Bytes read from the file or standard input so far (compressed bytes for gzip).
    pub read: u64,
    /// The file's size, when known.
    pub total: Option<u64>,
}

/// What a path names: a file, or standard input/output for `-`.
fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// A file that could not be read or written as a conversation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file could not be opened, read or written. The message says what went wrong in
    /// full, so the I/O error is not given again as a source.
    #[error("{path}: {}", describe_io(.error))]
    Io {
        /// The file.
        path: Shown,
        /// The underlying error.
        error: io::Error,
    },
    /// The path names a pipe, socket or device, not a file: opening a pipe would wait for a
    /// writer that may never come.
    #[error("{path}: not a regular file (a pipe, socket or device); give a file, or `-` to read standard input")]
    NotAFile {
        /// The path.
        path: Shown,
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
    /// The input holds more bytes than the limit allows.
    #[error(
        "{path}: the input holds more than {limit} bytes{}, the limit (--max-input-bytes); raise the limit to read it",
        if *.gzip { " once decompressed" } else { "" }
    )]
    TooLarge {
        /// The file.
        path: Shown,
        /// The limit, in bytes.
        limit: u64,
        /// Whether the input was gzip (the limit counts its decompressed bytes).
        gzip: bool,
    },
    /// The text is not a conversation in the expected format. The message says what is
    /// wrong in full, so the format error is not given again as a source.
    #[error("{path}: {error}")]
    Format {
        /// The file.
        path: Shown,
        /// What is wrong.
        error: FormatError,
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

/// An I/O error as the end of a sentence that names the file, with what to do where it helps.
fn describe_io(err: &io::Error) -> String {
    match err.kind() {
        io::ErrorKind::NotFound => "no such file or directory (check the path)".into(),
        io::ErrorKind::PermissionDenied => "permission denied (check the file's permissions)".into(),
        io::ErrorKind::IsADirectory => "is a directory, not a conversation file".into(),
        io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof => {
            format!("the gzip data is damaged or cut short ({err})")
        }
        _ => err.to_string(),
    }
}

/// A reader that counts the bytes through it and reports them.
struct Counted<'a, R> {
    inner: R,
    read: u64,
    reported: u64,
    total: Option<u64>,
    progress: Option<&'a dyn Fn(ReadProgress)>,
}

impl<R> Counted<'_, R> {
    fn report(&mut self) {
        if let Some(progress) = self.progress {
            self.reported = self.read;
            progress(ReadProgress { read: self.read, total: self.total });
        }
    }
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read - self.reported >= PROGRESS_EVERY {
            self.report();
        }
        Ok(n)
    }
}

/// Reads the bytes of `path` (`-` for standard input), un-gzipping when they are gzip, up to
/// [`DEFAULT_MAX_INPUT_BYTES`].
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, LoadError> {
    read_bytes_with(path, &ReadOptions::default())
}

/// Reads the bytes of `path` as [`read_bytes`] does, with `options`' limit and progress.
///
/// Gzip is recognised by its magic number, whatever the file is called, and inflated as it
/// is read; reading stops one byte past the limit.
pub fn read_bytes_with(path: &Path, options: &ReadOptions<'_>) -> Result<Vec<u8>, LoadError> {
    let shown = || Shown(path.to_path_buf());
    let io_error = |source| LoadError::Io { path: shown(), error: source };
    let (source, total): (Box<dyn Read>, Option<u64>) = if is_stdio(path) {
        (Box::new(io::stdin().lock()), None)
    } else {
        // Looked at before it is opened: opening a pipe blocks until something writes to it.
        let kind = std::fs::metadata(path).map_err(io_error)?.file_type();
        if kind.is_dir() {
            return Err(io_error(io::Error::from(io::ErrorKind::IsADirectory)));
        }
        if !kind.is_file() {
            return Err(LoadError::NotAFile { path: shown() });
        }
        let file = std::fs::File::open(path).map_err(io_error)?;
        let metadata = file.metadata().map_err(io_error)?;
        if !metadata.is_file() {
            return Err(LoadError::NotAFile { path: shown() });
        }
        (Box::new(file), Some(metadata.len()))
    };
    let mut counted = Counted { inner: source, read: 0, reported: 0, total, progress: options.progress };
    let mut magic = Vec::with_capacity(2);
    (&mut counted).take(2).read_to_end(&mut magic).map_err(io_error)?;
    let gzip = magic == [0x1f, 0x8b];
    let too_large = || LoadError::TooLarge { path: shown(), limit: options.max_bytes, gzip };
    if !gzip && total.is_some_and(|total| total > options.max_bytes) {
        return Err(too_large());
    }
    let limit = options.max_bytes.saturating_add(1);
    let capacity = if gzip { 0 } else { total.unwrap_or(0).min(limit) as usize };
    let mut bytes = Vec::with_capacity(capacity);
    let stream = io::Cursor::new(magic).chain(&mut counted);
    if gzip {
        MultiGzDecoder::new(stream).take(limit).read_to_end(&mut bytes).map_err(io_error)?;
    } else {
        stream.take(limit).read_to_end(&mut bytes).map_err(io_error)?;
    }
    counted.report();
    if bytes.len() as u64 > options.max_bytes {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Reads `path` as UTF-8 text (gzip and `-` handled), up to [`DEFAULT_MAX_INPUT_BYTES`].
pub fn read_text(path: &Path) -> Result<String, LoadError> {
    read_text_with(path, &ReadOptions::default())
}

/// Reads `path` as UTF-8 text with `options`' limit and progress.
pub fn read_text_with(path: &Path, options: &ReadOptions<'_>) -> Result<String, LoadError> {
    let bytes = read_bytes_with(path, options)?;
    String::from_utf8(bytes).map_err(|err| {
        let valid = &err.as_bytes()[..err.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|&&byte| byte == b'\n').count() + 1;
        let column = valid.len() - valid.iter().rposition(|&byte| byte == b'\n').map_or(0, |at| at + 1) + 1;
        LoadError::NotUtf8 { path: Shown(path.to_path_buf()), line, column }
    })
}

/// Reads a conversation from `path`, as `format` or the detected format, up to
/// [`DEFAULT_MAX_INPUT_BYTES`].
pub fn load(path: &Path, format: Option<Format>) -> Result<Parsed, LoadError> {
    load_with(path, format, &ReadOptions::default())
}

/// [`load`] with `options`' limit and progress.
pub fn load_with(path: &Path, format: Option<Format>, options: &ReadOptions<'_>) -> Result<Parsed, LoadError> {
    parse(path, &read_text_with(path, options)?, format)
}

/// Parses `text`, read from `path`, as a conversation: `format`, or the one it looks like;
/// an error names `path`.
pub fn parse(path: &Path, text: &str, format: Option<Format>) -> Result<Parsed, LoadError> {
    format::parse(text, format).map_err(|error| LoadError::Format { path: Shown(path.to_path_buf()), error })
}

/// Writes `conversation` to `path` (`-` for standard output) as `format`; a path ending in
/// `.gz` is gzip-compressed. Returns what `format` could not carry (see
/// [`format::lost`]).
pub fn save(path: &Path, conversation: &Conversation, format: Format, layout: Layout) -> Result<Vec<Loss>, LoadError> {
    let (text, lost) = format::write_with_losses(conversation, format, layout)
        .map_err(|error| LoadError::Format { path: Shown(path.to_path_buf()), error })?;
    let io_error = |error| LoadError::Io { path: Shown(path.to_path_buf()), error };
    if is_stdio(path) {
        let mut stdout = io::stdout().lock();
        stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()).map_err(io_error)?;
        return Ok(lost);
    }
    let bytes = if path.extension().is_some_and(|ext| ext == "gz") {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(text.as_bytes()).map_err(io_error)?;
        encoder.finish().map_err(io_error)?
    } else {
        text.into_bytes()
    };
    std::fs::write(path, bytes).map_err(io_error)?;
    Ok(lost)
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

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn inputs_over_the_limit_are_refused_plain_and_gzip() {
        let text = br#"[{"role": "user", "content": "hi"}]"#;
        let options = |max_bytes| ReadOptions { max_bytes, progress: None };
        let plain = temp("limit.json", text);
        assert_eq!(read_bytes_with(&plain, &options(text.len() as u64)).unwrap(), text);
        let err = read_bytes_with(&plain, &options(text.len() as u64 - 1)).unwrap_err().to_string();
        assert!(err.ends_with(&format!("limit.json: the input holds more than {} bytes, the limit (--max-input-bytes); raise the limit to read it", text.len() - 1)), "{err}");
        // 64 MB of zeros in a few kilobytes: refused at the limit, never inflated whole.
        let bomb = temp("bomb.json.gz", &gzip(&vec![0u8; 64 << 20]));
        let err = read_bytes_with(&bomb, &options(1_000_000)).unwrap_err().to_string();
        assert!(err.contains("more than 1000000 bytes once decompressed"), "{err}");
        assert_eq!(read_bytes_with(&temp("small.json.gz", &gzip(text)), &options(text.len() as u64)).unwrap(), text);
    }

    #[test]
    fn progress_reports_raw_bytes_read_of_the_total() {
        let text = vec![b' '; 3 << 20];
        let path = temp("progress.json", &text);
        let seen = std::cell::RefCell::new(Vec::new());
        let record = |progress: ReadProgress| seen.borrow_mut().push(progress);
        let options = ReadOptions { max_bytes: DEFAULT_MAX_INPUT_BYTES, progress: Some(&record) };
        read_bytes_with(&path, &options).unwrap();
        let seen = seen.into_inner();
        assert!(seen.len() >= 3, "{seen:?}");
        assert!(seen.windows(2).all(|pair| pair[0].read <= pair[1].read));
        assert_eq!(seen.last(), Some(&ReadProgress { read: text.len() as u64, total: Some(text.len() as u64) }));
    }

    #[test]
    fn a_format_error_is_said_once_in_its_chain() {
        for (name, text, said) in [
            ("roleless.json", r#"{"messages": [{"content": "hi"}]}"#.to_string(), "the message has no `role`"),
            ("nested.json", format!("{}{}", "[".repeat(200), "]".repeat(200)), "nests deeper than 128 levels"),
        ] {
            let err = load(&temp(name, text.as_bytes()), None).unwrap_err();
            let mut chain = vec![err.to_string()];
            let mut cause = std::error::Error::source(&err);
            while let Some(inner) = cause {
                chain.push(inner.to_string());
                cause = inner.source();
            }
            assert_eq!(chain.join(": ").matches(said).count(), 1, "{chain:?}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn what_is_not_a_regular_file_is_refused_naming_it() {
        let err = read_bytes(Path::new("/dev/null")).unwrap_err();
        assert!(matches!(err, LoadError::NotAFile { .. }), "{err:?}");
        assert!(err.to_string().starts_with("/dev/null: not a regular file"), "{err}");
    }

    #[test]
    fn a_directory_and_damaged_gzip_say_so() {
        let dir = std::env::temp_dir();
        let err = read_bytes(&dir).unwrap_err().to_string();
        assert!(err.ends_with("is a directory, not a conversation file"), "{err}");
        let mut cut = gzip(&vec![b'x'; 100_000]);
        cut.truncate(cut.len() / 2);
        let err = read_bytes(&temp("cut.json.gz", &cut)).unwrap_err().to_string();
        assert!(err.contains("the gzip data is damaged or cut short"), "{err}");
    }
}
