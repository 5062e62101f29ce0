//! Running pure computation on helper threads inside a PostgreSQL process.
//!
//! Threads PostgreSQL did not create must never call PostgreSQL, and must never run its signal
//! handlers (which call PostgreSQL functions). Every helper thread is therefore created while
//! the creating thread blocks all signals — new threads inherit that mask — and only ever
//! touches plain memory (slices, mmap'd segments, shared-memory slabs).

use std::sync::OnceLock;

/// Runs `work` with every signal blocked in the calling thread, so that threads it creates
/// inherit a fully blocked mask. Signals arriving meanwhile stay pending and are handled after.
pub fn with_signals_blocked<R>(work: impl FnOnce() -> R) -> R {
    struct Restore(libc::sigset_t);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: restores the mask saved when the guard was made.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &raw const self.0, std::ptr::null_mut()) };
        }
    }
    // SAFETY: sigfillset/pthread_sigmask only read and write the local sigset_t values; the old
    // mask is restored before returning (also on unwinding, via the guard).
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut previous: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&raw mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const all, &raw mut previous);
        let _restore = Restore(previous);
        work()
    }
}

/// The process's search pool (created on first use with signals blocked), or `None` when
/// searches run single-threaded.
pub fn search_pool(threads: usize) -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    if threads <= 1 {
        return None;
    }
    POOL.get_or_init(|| {
        with_signals_blocked(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("strata-search-{i}"))
                .build()
                .ok()
        })
    })
    .as_ref()
}
