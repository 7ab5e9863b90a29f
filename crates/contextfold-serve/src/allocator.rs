//! The C allocator set for a proxy whose request bodies run to tens of megabytes.
//!
//! A long session's client sends its whole history on every call. glibc's allocator gives
//! each such body fresh pages from the system and hands them back when the body is freed
//! (an allocation over its dynamic mmap threshold, or a free heap top over its trim
//! threshold), so every call paid a page fault for each 4 KB of its body: at 20 MB, about
//! half of what the proxy added to the call. The bodies are kept on the heap, and up to
//! [`KEEP_FREE`] of freed heap stays in the process for the next call; bodies larger than
//! [`HEAP_LARGEST`] still come from the system.

/// The largest allocation served from the heap (glibc caps its own dynamic threshold here).
pub const HEAP_LARGEST: usize = 32 << 20;

/// Free heap kept for reuse before it goes back to the system.
pub const KEEP_FREE: usize = 64 << 20;

/// Sets the allocator as the module doc says, once per process; nothing where the allocator
/// is not glibc's.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: mallopt only sets the allocator's parameters; it is called once, and a
            // refused value (0) leaves them as they were.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, HEAP_LARGEST as libc::c_int);
                libc::mallopt(libc::M_TRIM_THRESHOLD, KEEP_FREE as libc::c_int);
            }
        });
    }
}
