//! Thread pools for builds whose threads have all ended when the pool is dropped.
//!
//! Dropping a [`rayon::ThreadPool`] only asks its threads to stop; they end a moment later. A
//! build that is cancelled (a backend's `pg_cancel_backend`, the index service's shutdown) must
//! leave no thread behind once it returns, so builds use [`JoinedPool`], whose drop waits until
//! every pool thread has left rayon's worker loop.

use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// Pool threads still running, and the condition their exits signal.
type Live = Arc<(Mutex<usize>, Condvar)>;

/// A rayon pool (dereferences to [`rayon::ThreadPool`]) whose drop returns only after every one of
/// its threads has finished the jobs queued on it and left rayon's worker loop.
pub struct JoinedPool {
    pool: Option<rayon::ThreadPool>,
    live: Live,
}

impl JoinedPool {
    /// A pool of `threads` threads (`0`: rayon's default count), named as the calling thread.
    ///
    /// # Errors
    /// When the operating system cannot start the threads (rayon's error).
    pub fn new(threads: usize) -> Result<Self, rayon::ThreadPoolBuildError> {
        let live: Live = Arc::new((Mutex::new(0), Condvar::new()));
        let exits = live.clone();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .exit_handler(move |_| {
                let (count, ended) = &*exits;
                *count.lock().unwrap_or_else(PoisonError::into_inner) -= 1;
                ended.notify_all();
            })
            .build()?;
        // No thread can exit before the pool is dropped, so counting after the build is exact.
        *live.0.lock().unwrap_or_else(PoisonError::into_inner) = pool.current_num_threads();
        Ok(Self { pool: Some(pool), live })
    }
}

impl std::ops::Deref for JoinedPool {
    type Target = rayon::ThreadPool;

    fn deref(&self) -> &rayon::ThreadPool {
        self.pool.as_ref().expect("present until dropped")
    }
}

impl Drop for JoinedPool {
    fn drop(&mut self) {
        drop(self.pool.take());
        let (count, ended) = &*self.live;
        let mut running = count.lock().unwrap_or_else(PoisonError::into_inner);
        while *running > 0 {
            running = ended.wait(running).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[test]
    fn dropping_the_pool_waits_for_its_threads_and_their_queued_jobs() {
        let finished = Arc::new(AtomicUsize::new(0));
        let pool = JoinedPool::new(3).unwrap();
        assert_eq!(pool.current_num_threads(), 3);
        for _ in 0..6 {
            let finished = finished.clone();
            // Detached jobs: a plain rayon pool's drop returns while they still run.
            pool.spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                finished.fetch_add(1, Ordering::SeqCst);
            });
        }
        drop(pool);
        assert_eq!(finished.load(Ordering::SeqCst), 6);
    }

    #[test]
    fn the_pool_runs_work_on_the_requested_threads() {
        let pool = JoinedPool::new(2).unwrap();
        let sum: u64 = pool.install(|| {
            use rayon::prelude::*;
            (1..=100u64).into_par_iter().sum()
        });
        assert_eq!(sum, 5050);
    }
}
