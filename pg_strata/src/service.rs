//! The index service: one background worker that turns sealed memtables into segments, frees
//! their slabs once no scan reads them, flushes everything at shutdown, and removes the files of
//! dropped indexes.
//!
//! It needs no database connection: everything it touches is shared memory and files under
//! `$PGDATA/pg_strata`. Builds run on helper threads created with all signals blocked; only this
//! process's main thread calls PostgreSQL.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, SignalWakeFlags};
use pgrx::pg_sys;

use crate::index::publish;
use crate::index::state::{self, IndexHandle, ROOT_DIR};
use crate::memtable::Memtable;
use crate::shmem::{self, slab_state};

/// Registers the service with the postmaster; called from `_PG_init`.
pub fn register() {
    BackgroundWorkerBuilder::new("pg_strata index service")
        .set_type("pg_strata index service")
        .set_library("pg_strata")
        .set_function("strata_service_main")
        .enable_shmem_access(None)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

/// Writes a LOG line prefixed with the service's name.
pub fn log(message: &str) {
    pgrx::log!("pg_strata index service: {message}");
}

/// The handle of directory slot `slot` (which must be in use).
pub fn handle_of(slot: usize) -> IndexHandle {
    let entry = &shmem::shared().indexes[slot];
    IndexHandle { slot, key: entry.key, config: entry.config.to_config() }
}

/// Flushes one sealed, complete memtable if there is one; returns whether it did work.
fn flush_one() -> bool {
    let shared = shmem::shared();
    let candidate = (0..shared.slab_count as usize).find(|&slab| {
        let header = shmem::slab_header(slab);
        header.state.load(Ordering::Acquire) == slab_state::SEALED
            && header.writers.load(Ordering::Acquire) == 0
            && Memtable::open(slab).is_complete()
    });
    let Some(slab) = candidate else {
        return false;
    };
    let memtable = Memtable::open(slab);
    let header = memtable.header();
    let slot = header.index_slot.load(Ordering::Acquire) as usize;
    let segment_id = header.segment_id.load(Ordering::Acquire);
    let handle = handle_of(slot);
    // Serialise with VACUUM and rebuilds of this index; re-check that the slab is still ours.
    let _manifest_lock = shmem::manifest_lock(slot);
    {
        let _lock = shmem::directory_lock(true);
        if header.state.load(Ordering::Acquire) != slab_state::SEALED
            || header.index_slot.load(Ordering::Acquire) as usize != slot
            || header.segment_id.load(Ordering::Acquire) != segment_id
            || header.writers.load(Ordering::Acquire) != 0
        {
            return true;
        }
        header.state.store(slab_state::FLUSHING, Ordering::Release);
    }
    let mut ids = Vec::new();
    let mut vectors = Vec::new();
    memtable.for_each_live(|tid, vector| {
        ids.push(tid);
        vectors.extend_from_slice(vector);
    });
    // Flushed: scans stop reading the slab, and the next writer releases its status list.
    let mark_flushed = || {
        header.state.store(slab_state::FLUSHED, Ordering::Release);
        handle.shared().release_pending.store(1, Ordering::Release);
    };
    if ids.is_empty() {
        let _lock = shmem::directory_lock(true);
        mark_flushed();
        return true;
    }
    let threads = crate::gucs::BUILD_THREADS.get() as usize;
    // A fresh file id: one memtable may be flushed as several segments (recovery can refill it
    // in more than one slab), and a segment id is never reused.
    let file_id = handle.shared().next_id.fetch_add(1, Ordering::AcqRel);
    let outcome = publish::build(&handle, ids, vectors, threads)
        .and_then(|built| publish::publish_segment(&handle, &built, file_id, vec![segment_id], mark_flushed));
    if let Err(e) = outcome {
        log(&format!("flushing memtable {segment_id} failed, will retry: {e}"));
        let _lock = shmem::directory_lock(true);
        header.state.store(slab_state::SEALED, Ordering::Release);
        return false;
    }
    true
}

/// Frees slabs whose rows are published and that no scan reads any more.
fn free_flushed() {
    let _lock = shmem::directory_lock(true);
    for slab in 0..shmem::shared().slab_count as usize {
        let header = shmem::slab_header(slab);
        if header.state.load(Ordering::Acquire) == slab_state::FLUSHED
            && header.readers.load(Ordering::Acquire) == 0
            && header.writers.load(Ordering::Acquire) == 0
        {
            header.state.store(slab_state::FREE, Ordering::Release);
        }
    }
}

/// Seals every active memtable (at shutdown, so that everything gets flushed).
fn seal_all() {
    let _lock = shmem::directory_lock(true);
    for slab in 0..shmem::shared().slab_count as usize {
        let header = shmem::slab_header(slab);
        if header.state.load(Ordering::Acquire) == slab_state::ACTIVE {
            header.state.store(slab_state::SEALED, Ordering::Release);
        }
    }
    for entry in &shmem::shared().indexes {
        entry.active_slab.store(-1, Ordering::Release);
    }
}

fn unflushed_memtables() -> bool {
    (0..shmem::shared().slab_count as usize).any(|slab| {
        matches!(shmem::slab_header(slab).state.load(Ordering::Acquire), slab_state::ACTIVE | slab_state::SEALED)
    })
}

/// Whether the index relation stored under `key` still exists (its main fork has data).
fn relation_exists(key: shmem::IndexKey) -> bool {
    // SAFETY: GetRelationPath is a pure path computation returning a palloc'd string, called on
    // the service's main thread.
    let path = unsafe {
        let raw = pg_sys::GetRelationPath(
            pg_sys::Oid::from(key.db),
            pg_sys::Oid::from(key.spc),
            pg_sys::Oid::from(key.relnode),
            -1,
            pg_sys::ForkNumber::MAIN_FORKNUM,
        );
        let path = std::ffi::CStr::from_ptr(raw).to_string_lossy().into_owned();
        pg_sys::pfree(raw.cast());
        path
    };
    std::fs::metadata(path).is_ok_and(|m| m.len() > 0)
}

/// Removes the directories and registrations of dropped indexes. Not while WAL is being replayed:
/// relation files may be missing until replay recreates them (unlogged indexes get their main
/// fork back from the init fork only at the end).
fn sweep_dropped() {
    // SAFETY: a plain query of the startup process's state.
    if unsafe { pg_sys::RecoveryInProgress() } {
        return;
    }
    let shared = shmem::shared();
    for slot in 0..shmem::MAX_INDEXES {
        let entry = &shared.indexes[slot];
        if entry.in_use.load(Ordering::Acquire) != 1 || relation_exists(entry.key) {
            continue;
        }
        let key = entry.key;
        let _manifest_lock = shmem::manifest_lock(slot);
        {
            let _lock = shmem::directory_lock(true);
            if entry.in_use.load(Ordering::Acquire) != 1 || entry.key != key {
                continue;
            }
            state::release_memtables_locked(slot);
            entry.in_use.store(0, Ordering::Release);
        }
        let _ = std::fs::remove_dir_all(state::index_dir(key));
    }
    let Ok(entries) = std::fs::read_dir(ROOT_DIR) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(key) = state::parse_index_dir(&name) else {
            continue;
        };
        let registered = shared.indexes.iter().any(|s| s.in_use.load(Ordering::Acquire) == 1 && s.key == key);
        if !registered && !relation_exists(key) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Promotes every segment file into the page cache (the memory every backend's mmap shares) in
/// the background, once after the service starts: after a restart the index answers at once
/// through mmap, reading pages on demand, and gets faster as the kernel's read-ahead proceeds;
/// no query waits for it. Returns the bytes requested.
fn promote_segments() -> u64 {
    use std::os::fd::AsRawFd;
    let mut bytes = 0;
    let Ok(dirs) = std::fs::read_dir(ROOT_DIR) else {
        return 0;
    };
    for dir in dirs.flatten() {
        let Ok(files) = std::fs::read_dir(dir.path()) else {
            continue;
        };
        for file in files.flatten() {
            if !file.file_name().to_string_lossy().ends_with(".seg") {
                continue;
            }
            if let Ok(opened) = std::fs::File::open(file.path()) {
                bytes += opened.metadata().map_or(0, |m| m.len());
                // SAFETY: posix_fadvise only schedules asynchronous read-ahead on a descriptor
                // we own for the duration of the call.
                unsafe { libc::posix_fadvise(opened.as_raw_fd(), 0, 0, libc::POSIX_FADV_WILLNEED) };
            }
        }
    }
    bytes
}

/// The service's entry point.
#[pgrx::pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn strata_service_main(_argument: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    // SAFETY: MyLatch is this process's latch, valid for the life of the process.
    shmem::shared().service_latch.store(unsafe { pg_sys::MyLatch }, Ordering::Release);
    if let Err(e) = std::fs::create_dir_all(ROOT_DIR) {
        log(&format!("cannot create {ROOT_DIR}: {e}"));
    }
    let promoted = promote_segments();
    if promoted > 0 {
        log(&format!("reading {promoted} bytes of segments into the page cache in the background"));
    }
    let mut last_sweep = Instant::now().checked_sub(Duration::from_hours(1)).unwrap();
    let mut stopping = false;
    let mut maintenance = crate::maintenance::Maintenance::default();
    loop {
        stopping |= BackgroundWorker::sigterm_received();
        if stopping {
            seal_all();
        }
        while flush_one() {
            free_flushed();
        }
        free_flushed();
        if stopping {
            if !unflushed_memtables() {
                maintenance.abandon();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        maintenance.step();
        if last_sweep.elapsed() > Duration::from_secs(2) {
            sweep_dropped();
            last_sweep = Instant::now();
        }
        // SAFETY: the standard latch wait of a background worker's main thread.
        let events = unsafe {
            let events = pg_sys::WaitLatch(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_POSTMASTER_DEATH) as i32,
                if maintenance.busy() { 20 } else { 500 },
                pg_sys::PG_WAIT_EXTENSION,
            );
            pg_sys::ResetLatch(pg_sys::MyLatch);
            events
        };
        if events & pg_sys::WL_POSTMASTER_DEATH as i32 != 0 {
            // Everything unflushed is rebuilt by crash recovery; exit at once.
            break;
        }
    }
    shmem::shared().service_latch.store(std::ptr::null_mut(), Ordering::Release);
}
