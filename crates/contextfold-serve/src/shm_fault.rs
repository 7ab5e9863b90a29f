//! SIGBUS from a SQLite store's WAL index. SQLite maps `<store>-shm` into memory; a page of it
//! that another program truncated away raises SIGBUS when touched, which would kill the proxy
//! with nothing logged. The store checks the file before each use ([`contextfold::store`]),
//! but a truncation can land between that check and SQLite's access, and the proxy writes to
//! its store after almost every answer.
//!
//! This handler closes that gap: on SIGBUS at an address mapped from a file whose name ends in
//! `-shm`, it grows the file back over the mapping and returns, so the access is retried and
//! reads zeros, from which SQLite rebuilds its index from the WAL (as when a store is first
//! opened). Any other SIGBUS goes to the handler that was there before, by default the end of
//! the process. The handler allocates nothing and calls only async-signal-safe functions.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;

/// The handler that was installed before ours, as the address of its `sigaction`.
static PREVIOUS: AtomicUsize = AtomicUsize::new(0);
/// How many times a truncated index was grown back (read and reset by [`take_recovered`]).
static RECOVERED: AtomicU64 = AtomicU64::new(0);
/// Retries of a fault whose file was already large enough: bounded, so a SIGBUS of another
/// cause on such a mapping cannot loop forever.
static RETRIES: AtomicU64 = AtomicU64::new(0);
const MAX_RETRIES: u64 = 1_000;

/// Installs the handler, once per process.
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: the new action is fully initialised, the old one is kept for ever (leaked),
        // and the handler below is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_bus as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
            libc::sigemptyset(&mut action.sa_mask);
            let previous = Box::leak(Box::new(std::mem::zeroed::<libc::sigaction>()));
            if libc::sigaction(libc::SIGBUS, &action, previous) == 0 {
                PREVIOUS.store(previous as *mut libc::sigaction as usize, Ordering::SeqCst);
            }
        }
    });
}

/// How many times a truncated WAL index was grown back since the last call.
pub fn take_recovered() -> u64 {
    RECOVERED.swap(0, Ordering::Relaxed)
}

extern "C" fn on_bus(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid `siginfo_t` to an `SA_SIGINFO` handler.
    let address = unsafe { (*info).si_addr() } as usize;
    // SAFETY: `grow_back` only reads /proc/self/maps and grows a file, with syscalls.
    if unsafe { grow_back(address) } {
        return;
    }
    let previous = PREVIOUS.load(Ordering::SeqCst) as *const libc::sigaction;
    // SAFETY: `previous` is null or the leaked action saved at installation.
    unsafe {
        match previous.as_ref().map(|previous| (previous.sa_sigaction, previous.sa_flags)) {
            Some((handler, flags)) if handler != libc::SIG_DFL && handler != libc::SIG_IGN => {
                if flags & libc::SA_SIGINFO != 0 {
                    let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(handler);
                    handler(signal, info, context);
                } else {
                    let handler: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
                    handler(signal);
                }
            }
            // The default action: returning retries the access, which faults again and ends the
            // process as SIGBUS does.
            _ => {
                libc::signal(libc::SIGBUS, libc::SIG_DFL);
            }
        }
    }
}

/// Grows the `-shm` file mapped at `address` back over its whole mapping; whether the access
/// may be retried.
unsafe fn grow_back(address: usize) -> bool {
    let mut path = [0u8; 4096];
    let Some((length, needed)) = (unsafe { mapping_of(address, &mut path) }) else { return false };
    if !path[..length].ends_with(b"-shm") {
        return false;
    }
    path[length] = 0;
    // SAFETY: `path` is NUL-terminated; the descriptor is closed before returning.
    unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDWR | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let mut stat: libc::stat = std::mem::zeroed();
        let size = if libc::fstat(fd, &mut stat) == 0 { stat.st_size as u64 } else { u64::MAX };
        let grown = size < needed && libc::ftruncate(fd, needed as libc::off_t) == 0;
        libc::close(fd);
        if grown {
            RECOVERED.fetch_add(1, Ordering::Relaxed);
            contextfold::store::note_shm_grown_back();
            RETRIES.store(0, Ordering::Relaxed);
            return true;
        }
        // Another thread grew it first: retry, a bounded number of times.
        size != u64::MAX && size >= needed && RETRIES.fetch_add(1, Ordering::Relaxed) < MAX_RETRIES
    }
}

/// The file of the mapping of /proc/self/maps that holds `address`: its path's length in
/// `path`, and the file size that covers the whole mapping.
unsafe fn mapping_of(address: usize, path: &mut [u8; 4096]) -> Option<(usize, u64)> {
    // SAFETY: a plain read-only open of a NUL-terminated path, closed below.
    let fd = unsafe { libc::open(c"/proc/self/maps".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut chunk = [0u8; 4096];
    let mut line = [0u8; 4096 + 256];
    let mut used = 0;
    let mut found = None;
    'read: loop {
        // SAFETY: reads into a buffer of the length given.
        let read = unsafe { libc::read(fd, chunk.as_mut_ptr().cast(), chunk.len()) };
        if read <= 0 {
            break;
        }
        for &byte in &chunk[..read as usize] {
            if byte != b'\n' {
                if used < line.len() {
                    line[used] = byte;
                    used += 1;
                }
                continue;
            }
            if let Some(hit) = parse_line(&line[..used], address, path) {
                found = Some(hit);
                break 'read;
            }
            used = 0;
        }
    }
    // SAFETY: closes the descriptor opened above.
    unsafe { libc::close(fd) };
    found
}

/// One line of /proc/self/maps (`start-end perms offset dev inode path`): when its range holds
/// `address`, its path copied into `path` (its length) and the size covering the mapping.
fn parse_line(line: &[u8], address: usize, path: &mut [u8; 4096]) -> Option<(usize, u64)> {
    let mut rest = line;
    let range = field(&mut rest)?;
    let dash = range.iter().position(|&byte| byte == b'-')?;
    let (start, end) = (hex(&range[..dash])?, hex(&range[dash + 1..])?);
    if !(start..end).contains(&(address as u64)) {
        return None;
    }
    let _perms = field(&mut rest)?;
    let offset = hex(field(&mut rest)?)?;
    let (_device, _inode) = (field(&mut rest)?, field(&mut rest)?);
    // The path is the rest of the line, spaces included.
    let name = rest.trim_ascii_start();
    if name.is_empty() || name.len() >= path.len() {
        return None;
    }
    path[..name.len()].copy_from_slice(name);
    Some((name.len(), offset.checked_add(end - start)?))
}

/// The next space-separated field of `rest`, which is advanced past it.
fn field<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let text = rest.trim_ascii_start();
    let end = text.iter().position(|&byte| byte == b' ').unwrap_or(text.len());
    *rest = &text[end..];
    (end > 0).then(|| &text[..end])
}

/// A hexadecimal number.
fn hex(text: &[u8]) -> Option<u64> {
    let mut value: u64 = 0;
    for &byte in text {
        let digit = (byte as char).to_digit(16)?;
        value = value.checked_mul(16)?.checked_add(u64::from(digit))?;
    }
    (!text.is_empty()).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_of_the_maps_names_the_file_and_the_size_that_covers_the_mapping() {
        let line = b"7f0000000000-7f0000008000 rw-s 00010000 fd:01 1234   /var/lib/my store/store.db-shm";
        let mut path = [0u8; 4096];
        let (length, needed) = parse_line(line, 0x7f0000004000, &mut path).expect("the mapping");
        assert_eq!(&path[..length], b"/var/lib/my store/store.db-shm");
        assert_eq!(needed, 0x10000 + 0x8000);
        assert_eq!(parse_line(line, 0x7f0000008000, &mut path), None, "past the end");
        assert_eq!(parse_line(b"00400000-00452000 r-xp 00000000 08:02 173521", 0x400000, &mut path), None);
        assert_eq!(parse_line(b"garbage", 0, &mut path), None);
    }
}
