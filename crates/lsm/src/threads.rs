//! Running pure computation on helper threads inside a process whose signal handlers must not run
//! on them (a PostgreSQL backend or background worker).
//!
//! Threads the host did not create must never call into the host, and must never run its signal
//! handlers (PostgreSQL's call PostgreSQL functions). Every helper thread is therefore created
//! while the creating thread blocks all signals — new threads inherit that mask — and only ever
//! touches plain memory (slices, mmap'd segments, shared-memory slabs).

use std::sync::Mutex;

use strata_engine::cancel::Cancel;

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

/// Runs `work` on a helper thread (created with every signal blocked, so it never runs a
/// PostgreSQL signal handler) and calls `between` on the calling thread until it finishes.
///
/// `between` waits a little (on the process latch) and may request `cancel` (the service at
/// shutdown) or unwind (a backend's `CHECK_FOR_INTERRUPTS` raising a cancel error). In both cases
/// `work` is asked to stop through `cancel` and is joined before this returns or the unwinding
/// continues, so no helper thread outlives the call; `work` must poll `cancel`.
pub fn run_on_helper<R: Send>(
    cancel: &Cancel,
    work: impl FnOnce() -> R + Send,
    mut between: impl FnMut(&Cancel),
) -> Result<R, String> {
    /// The helper, joined (after its cancellation is requested) when dropped: on unwinding the
    /// thread has ended — not only its work — before the error goes on.
    struct JoinOnDrop<'scope, 'a, R> {
        cancel: &'a Cancel,
        helper: Option<std::thread::ScopedJoinHandle<'scope, R>>,
    }
    impl<R> Drop for JoinOnDrop<'_, '_, R> {
        fn drop(&mut self) {
            if let Some(helper) = self.helper.take() {
                self.cancel.request();
                let _ = helper.join();
            }
        }
    }
    std::thread::scope(|scope| {
        let helper = with_signals_blocked(|| {
            std::thread::Builder::new().name("pg_strata build".into()).spawn_scoped(scope, work)
        })
        .map_err(|e| format!("cannot start a build thread: {e}"))?;
        let mut guard = JoinOnDrop { cancel, helper: Some(helper) };
        while guard.helper.as_ref().is_some_and(|h| !h.is_finished()) {
            between(cancel);
        }
        let helper = guard.helper.take().expect("the helper is joined only here or on unwinding");
        helper.join().map_err(|_| "a build thread panicked".to_owned())
    })
}

/// The process's search pool for `threads` threads (created with signals blocked; rebuilt when
/// `strata.search_threads` changes), or `None` when searches run single-threaded.
pub fn search_pool(threads: usize) -> Option<std::sync::Arc<rayon::ThreadPool>> {
    static POOL: Mutex<Option<(usize, std::sync::Arc<rayon::ThreadPool>)>> = Mutex::new(None);
    if threads <= 1 {
        return None;
    }
    let mut pool = POOL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((size, existing)) = pool.as_ref() {
        if *size == threads {
            return Some(existing.clone());
        }
    }
    let built = with_signals_blocked(|| {
        rayon::ThreadPoolBuilder::new().num_threads(threads).thread_name(|i| format!("strata-search-{i}")).build().ok()
    })?;
    let built = std::sync::Arc::new(built);
    *pool = Some((threads, built.clone()));
    Some(built)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// Whether the calling thread blocks `signal`.
    fn blocks(signal: i32) -> bool {
        // SAFETY: pthread_sigmask with a null new mask only reads the calling thread's mask into
        // the local set, which sigismember then reads.
        unsafe {
            let mut current: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &raw mut current);
            libc::sigismember(&raw const current, signal) == 1
        }
    }

    #[test]
    fn helper_threads_block_every_signal_and_the_caller_gets_its_mask_back() {
        let before = blocks(libc::SIGTERM);
        let helper =
            with_signals_blocked(|| std::thread::spawn(|| [libc::SIGTERM, libc::SIGINT, libc::SIGUSR1].map(blocks)));
        assert_eq!(helper.join().unwrap(), [true; 3]);
        assert_eq!(blocks(libc::SIGTERM), before);
    }

    #[test]
    fn run_on_helper_returns_the_work_and_calls_between_while_it_runs() {
        let cancel = Cancel::new();
        let mut waits = 0;
        let result = run_on_helper(
            &cancel,
            || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                [libc::SIGTERM, libc::SIGHUP].map(blocks)
            },
            |_| {
                waits += 1;
                std::thread::sleep(std::time::Duration::from_millis(1));
            },
        );
        assert_eq!(result, Ok([true, true]));
        assert!(waits > 0);
    }

    #[test]
    fn an_unwinding_caller_cancels_and_joins_the_helper_first() {
        let cancel = Cancel::new();
        let stopped = AtomicBool::new(false);
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_on_helper(
                &cancel,
                || {
                    while !cancel.is_requested() {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    stopped.store(true, Ordering::SeqCst);
                },
                |_| panic!("interrupted"),
            )
        }));
        assert!(unwound.is_err());
        assert!(stopped.load(Ordering::SeqCst), "the helper ended before the unwinding went on");
    }

    #[test]
    fn a_panicking_helper_is_an_error() {
        let result = run_on_helper(&Cancel::new(), || panic!("boom"), |_| {});
        assert_eq!(result, Err("a build thread panicked".to_owned()));
    }

    #[test]
    fn search_pools_exist_for_two_threads_or_more_and_are_reused() {
        assert!(search_pool(1).is_none());
        let pool = search_pool(3).unwrap();
        assert_eq!(pool.current_num_threads(), 3);
        assert!(std::sync::Arc::ptr_eq(&pool, &search_pool(3).unwrap()));
        assert_eq!(search_pool(2).unwrap().current_num_threads(), 2);
    }
}
