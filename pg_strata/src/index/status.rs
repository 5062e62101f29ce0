//! The status pages (the paper's §5.2–5.3) in the index relation, changed through GenericXLog.
//!
//! Byte layouts are in [`strata_lsm::status`]; this module does the buffer locking and logging.
//! Every change is a generic WAL record, so PostgreSQL restores the pages after a crash (and
//! replays them on physical standbys) without pg_strata's help.
//!
//! Lock order: the metadata page (block 0) → the memtable array page (block 1) → list pages →
//! the directory LWLock; the index's manifest LWLock is taken before the array and list pages
//! (VACUUM) and, by recovery only, while holding the metadata page — no path holds the manifest
//! lock and then waits for the metadata page. The metadata page's exclusive lock serialises
//! registering memtables, allocating and freeing list pages, and recovery.
//!
//! What the pages guarantee:
//! - a memtable is registered (and `max_memtable_id` raised) before any TID is appended to it,
//!   so a committed row's memtable is always known after a crash;
//! - a TID is appended in the inserting transaction, after the row is in the memtable, so the
//!   commit record's WAL flush makes it durable;
//! - a memtable's list is released only after its rows are in a published (fsynced) segment,
//!   and the release is flushed to WAL before the index service may merge that segment.

use pgrx::pg_sys;
use strata_lsm::status::{self as layout, ArrayEntry, Meta, PageKind, ARRAY_BLOCK, META_BLOCK, NO_BLOCK};

use crate::fmgr::error;

/// A pinned buffer of the index, locked or not; unlocked and unpinned on drop.
pub struct PageBuffer {
    buffer: pg_sys::Buffer,
    locked: bool,
}

impl PageBuffer {
    /// Pins block `block` of `index`'s main fork and locks it.
    ///
    /// # Safety
    /// `index` must be an open relation with at least `block + 1` blocks.
    pub unsafe fn lock(index: pg_sys::Relation, block: u32, exclusive: bool) -> Self {
        // SAFETY: guaranteed by the caller; the buffer stays pinned until drop.
        unsafe {
            let buffer = pg_sys::ReadBufferExtended(
                index,
                pg_sys::ForkNumber::MAIN_FORKNUM,
                block,
                pg_sys::ReadBufferMode::RBM_NORMAL,
                std::ptr::null_mut(),
            );
            let mode = if exclusive { pg_sys::BUFFER_LOCK_EXCLUSIVE } else { pg_sys::BUFFER_LOCK_SHARE };
            pg_sys::LockBuffer(buffer, mode as i32);
            Self { buffer, locked: true }
        }
    }

    /// A new block at the end of the relation, locked exclusively.
    ///
    /// # Safety
    /// `index` must be an open relation.
    unsafe fn extend(index: pg_sys::Relation) -> Self {
        // SAFETY: the standard PostgreSQL 15 extension protocol: hold the relation extension
        // lock while reading P_NEW, then lock the (new, zeroed) buffer.
        unsafe {
            pg_sys::LockRelationForExtension(index, pg_sys::ExclusiveLock as pg_sys::LOCKMODE);
            let buffer = pg_sys::ReadBufferExtended(
                index,
                pg_sys::ForkNumber::MAIN_FORKNUM,
                pg_sys::InvalidBlockNumber,
                pg_sys::ReadBufferMode::RBM_NORMAL,
                std::ptr::null_mut(),
            );
            pg_sys::UnlockRelationForExtension(index, pg_sys::ExclusiveLock as pg_sys::LOCKMODE);
            pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_EXCLUSIVE as i32);
            Self { buffer, locked: true }
        }
    }

    /// The block number.
    pub fn block(&self) -> u32 {
        // SAFETY: a pinned buffer.
        unsafe { pg_sys::BufferGetBlockNumber(self.buffer) }
    }

    /// The page image (read-only; changes go through [`Change`]).
    pub fn page(&self) -> &[u8] {
        // SAFETY: the buffer is pinned and locked, so its BLCKSZ bytes are stable for reading.
        unsafe { std::slice::from_raw_parts(pg_sys::BufferGetPage(self.buffer).cast::<u8>(), pg_sys::BLCKSZ as usize) }
    }

    /// Releases the content lock but keeps the pin.
    fn unlock(&mut self) {
        if self.locked {
            // SAFETY: we hold the content lock.
            unsafe { pg_sys::LockBuffer(self.buffer, pg_sys::BUFFER_LOCK_UNLOCK as i32) };
            self.locked = false;
        }
    }
}

impl Drop for PageBuffer {
    fn drop(&mut self) {
        self.unlock();
        // SAFETY: the pin taken in lock()/extend().
        unsafe { pg_sys::ReleaseBuffer(self.buffer) };
    }
}

/// One generic WAL record under construction (at most four pages).
struct Change {
    state: *mut pg_sys::GenericXLogState,
    registered: std::cell::RefCell<Vec<pg_sys::Buffer>>,
}

impl Change {
    /// # Safety
    /// `index` must be open; the pages registered must be locked exclusively until `finish`.
    unsafe fn start(index: pg_sys::Relation) -> Self {
        // SAFETY: guaranteed by the caller.
        Self { state: unsafe { pg_sys::GenericXLogStart(index) }, registered: std::cell::RefCell::new(Vec::new()) }
    }

    /// The writable copy of `buffer`'s page; `fresh` logs a full image (for reinitialised pages).
    /// Each buffer may be registered once per change, so the copies never alias; they live until
    /// `finish`, which the borrow of `self` enforces.
    #[allow(clippy::mut_from_ref)]
    fn page(&self, buffer: &PageBuffer, fresh: bool) -> &mut [u8] {
        let mut registered = self.registered.borrow_mut();
        assert!(!registered.contains(&buffer.buffer), "a page registered twice in one WAL record");
        assert!(registered.len() < pg_sys::MAX_GENERIC_XLOG_PAGES as usize, "too many pages in one WAL record");
        registered.push(buffer.buffer);
        let flags = if fresh { pg_sys::GENERIC_XLOG_FULL_IMAGE as i32 } else { 0 };
        // SAFETY: the buffer is locked exclusively (contract of `start`); GenericXLog returns a
        // BLCKSZ copy, distinct per buffer (checked above), that lives until finish/abort.
        unsafe {
            let page = pg_sys::GenericXLogRegisterBuffer(self.state, buffer.buffer, flags);
            std::slice::from_raw_parts_mut(page.cast::<u8>(), pg_sys::BLCKSZ as usize)
        }
    }

    /// Applies the changes to the buffers and writes the WAL record; returns its end position.
    fn finish(self) -> pg_sys::XLogRecPtr {
        // SAFETY: a started change with its buffers still locked.
        unsafe { pg_sys::GenericXLogFinish(self.state) }
    }
}

/// Initialises a page copy: PostgreSQL's standard layout with pg_strata's opaque area.
fn init_page(page: &mut [u8], kind: PageKind) {
    // SAFETY: `page` is a BLCKSZ page image.
    unsafe { pg_sys::PageInit(page.as_mut_ptr().cast(), page.len(), layout::OPAQUE_BYTES) };
    layout::format(page, kind);
}

/// Raises a damaged status page as an SQL error.
fn corrupted(e: &dyn std::fmt::Display) -> ! {
    error(pgrx::PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED, format!("pg_strata status pages: {e}; REINDEX the index"))
}

/// Writes the metadata and array pages (blocks 0 and 1) of an empty `fork`, logged as full
/// images when the fork needs WAL. `flags` goes into the metadata page.
///
/// # Safety
/// `index` must be a relation locked for writing whose `fork` is empty.
pub unsafe fn initialise(index: pg_sys::Relation, fork: pg_sys::ForkNumber::Type, flags: u32) {
    // SAFETY: standard new-page protocol on a fork nobody else can see yet: extend by one
    // buffer, lock it, initialise, mark dirty, log a full image.
    unsafe {
        let logged = fork == pg_sys::ForkNumber::INIT_FORKNUM
            || (*(*index).rd_rel).relpersistence as u8 == pg_sys::RELPERSISTENCE_PERMANENT;
        for kind in [PageKind::Meta, PageKind::Array] {
            let buffer = pg_sys::ReadBufferExtended(
                index,
                fork,
                pg_sys::InvalidBlockNumber,
                pg_sys::ReadBufferMode::RBM_NORMAL,
                std::ptr::null_mut(),
            );
            pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_EXCLUSIVE as i32);
            let page =
                std::slice::from_raw_parts_mut(pg_sys::BufferGetPage(buffer).cast::<u8>(), pg_sys::BLCKSZ as usize);
            init_page(page, kind);
            if kind == PageKind::Meta {
                layout::write_meta(page, &Meta { max_memtable_id: 0, free_head: NO_BLOCK, flags });
            }
            pg_sys::MarkBufferDirty(buffer);
            if logged {
                pg_sys::log_newpage_buffer(buffer, true);
            }
            pg_sys::UnlockReleaseBuffer(buffer);
        }
    }
}

/// The metadata page, locked; the handle that serialises status changes of one index.
pub struct MetaLock {
    buffer: PageBuffer,
}

impl MetaLock {
    /// Locks the metadata page (exclusive for changes and recovery).
    ///
    /// # Safety
    /// `index` must be an open strata index.
    pub unsafe fn acquire(index: pg_sys::Relation, exclusive: bool) -> Self {
        // SAFETY: every strata index has block 0 (written by ambuild).
        Self { buffer: unsafe { PageBuffer::lock(index, META_BLOCK, exclusive) } }
    }

    /// The metadata contents.
    pub fn meta(&self) -> Meta {
        layout::read_meta(self.buffer.page()).unwrap_or_else(|e| corrupted(&e))
    }
}

fn entries(array: &PageBuffer) -> Vec<ArrayEntry> {
    layout::array_entries(array.page()).unwrap_or_else(|e| corrupted(&e))
}

/// Whether the array page can register one more memtable.
///
/// # Safety
/// `index` must be an open strata index; the caller holds no array page lock.
pub unsafe fn array_has_room(index: pg_sys::Relation) -> bool {
    // SAFETY: guaranteed by the caller.
    let array = unsafe { PageBuffer::lock(index, ARRAY_BLOCK, false) };
    entries(&array).len() < layout::array_capacity(array.page())
}

/// Registers memtable `id` (raising `max_memtable_id`). The caller has checked
/// [`array_has_room`] under the same metadata lock.
///
/// # Safety
/// `index` must be open and `meta` its exclusively locked metadata page.
pub unsafe fn register_memtable(index: pg_sys::Relation, meta: &MetaLock, id: u64) {
    // SAFETY: guaranteed by the caller; block 1 exists in every strata index.
    unsafe {
        let array = PageBuffer::lock(index, ARRAY_BLOCK, true);
        let entries = entries(&array);
        if entries.iter().any(|e| e.id == id) {
            return;
        }
        if entries.len() >= layout::array_capacity(array.page()) {
            error(pgrx::PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, "pg_strata: status array page full while registering");
        }
        let change = Change::start(index);
        let meta_page = change.page(&meta.buffer, false);
        let mut contents = meta.meta();
        contents.max_memtable_id = contents.max_memtable_id.max(id);
        layout::write_meta(meta_page, &contents);
        let array_page = change.page(&array, false);
        let pushed = layout::array_push(array_page, &ArrayEntry { id, head: NO_BLOCK, tail: NO_BLOCK });
        debug_assert!(pushed);
        change.finish();
    }
}

/// Outcome of [`append`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// The TID is in the memtable's list.
    Done,
    /// The memtable's list was already released: its rows (this one included) are in a
    /// published segment, so nothing needs recording.
    Released,
}

/// Whether a LIST page has room for one more TID.
fn has_room(page: &[u8]) -> bool {
    layout::lower(page) + 8 <= layout::special(page)
}

/// Appends heap TID `tid` to the list of memtable `id`, in the caller's transaction.
///
/// # Safety
/// `index` must be an open strata index; the caller holds no status page lock.
pub unsafe fn append(index: pg_sys::Relation, id: u64, tid: u64) -> Appended {
    // SAFETY: guaranteed by the caller; array (shared) → tail page (exclusive).
    unsafe {
        let mut waited = false;
        loop {
            let array = PageBuffer::lock(index, ARRAY_BLOCK, false);
            let Some(entry) = entries(&array).into_iter().find(|e| e.id == id) else {
                if waited {
                    return Appended::Released;
                }
                // The memtable may be being registered right now: its allocator holds the
                // metadata page exclusively until the entry exists. Wait for it, then look again.
                drop(array);
                drop(MetaLock::acquire(index, false));
                waited = true;
                continue;
            };
            if entry.tail != NO_BLOCK {
                let tail = PageBuffer::lock(index, entry.tail, true);
                if has_room(tail.page()) {
                    let change = Change::start(index);
                    let appended = layout::list_append(change.page(&tail, false), tid);
                    debug_assert!(appended);
                    change.finish();
                    return Appended::Done;
                }
            }
            drop(array);
            return append_on_new_page(index, id, tid);
        }
    }
}

/// The slow path of [`append`]: the memtable has no list page yet or its tail is full.
///
/// # Safety
/// As for [`append`].
unsafe fn append_on_new_page(index: pg_sys::Relation, id: u64, tid: u64) -> Appended {
    // SAFETY: guaranteed by the caller; meta → array → list pages, all exclusive.
    unsafe {
        let meta = MetaLock::acquire(index, true);
        let array = PageBuffer::lock(index, ARRAY_BLOCK, true);
        let Some(mut entry) = entries(&array).into_iter().find(|e| e.id == id) else {
            return Appended::Released;
        };
        let tail = (entry.tail != NO_BLOCK).then(|| PageBuffer::lock(index, entry.tail, true));
        if let Some(tail) = tail.as_ref().filter(|t| has_room(t.page())) {
            // Another backend added a page meanwhile.
            let change = Change::start(index);
            let appended = layout::list_append(change.page(tail, false), tid);
            debug_assert!(appended);
            change.finish();
            return Appended::Done;
        }
        let mut contents = meta.meta();
        let fresh = match contents.free_head {
            NO_BLOCK => PageBuffer::extend(index),
            free => {
                let buffer = PageBuffer::lock(index, free, true);
                contents.free_head = layout::next(buffer.page());
                buffer
            }
        };
        let change = Change::start(index);
        let new_page = change.page(&fresh, true);
        init_page(new_page, PageKind::List);
        let appended = layout::list_append(new_page, tid);
        debug_assert!(appended);
        if let Some(tail) = &tail {
            layout::set_next(change.page(tail, false), fresh.block());
        } else {
            entry.head = fresh.block();
        }
        entry.tail = fresh.block();
        layout::write_meta(change.page(&meta.buffer, false), &contents);
        layout::array_update(change.page(&array, false), &entry);
        change.finish();
        Appended::Done
    }
}

/// The ids of the memtables the array page lists.
///
/// # Safety
/// `index` must be an open strata index; the caller holds no array page lock.
pub unsafe fn listed(index: pg_sys::Relation) -> Vec<u64> {
    // SAFETY: guaranteed by the caller.
    let array = unsafe { PageBuffer::lock(index, ARRAY_BLOCK, false) };
    entries(&array).into_iter().map(|e| e.id).collect()
}

/// Releases the lists of memtables `ids` (whose rows are in published segments), putting their
/// pages on the free list, and flushes the WAL so the release is durable before anything relies
/// on it. Returns the ids still listed.
///
/// # Safety
/// `index` must be open and `meta` its exclusively locked metadata page.
pub unsafe fn release(index: pg_sys::Relation, meta: &MetaLock, ids: &[u64]) -> Vec<u64> {
    // SAFETY: guaranteed by the caller; meta → array → tail page, all exclusive.
    unsafe {
        let array = PageBuffer::lock(index, ARRAY_BLOCK, true);
        let mut last_lsn = 0;
        for &id in ids {
            let Some(entry) = entries(&array).into_iter().find(|e| e.id == id) else {
                continue;
            };
            let mut contents = meta.meta();
            let tail = (entry.tail != NO_BLOCK).then(|| PageBuffer::lock(index, entry.tail, true));
            let change = Change::start(index);
            if let Some(tail) = &tail {
                layout::set_next(change.page(tail, false), contents.free_head);
                contents.free_head = entry.head;
            }
            layout::write_meta(change.page(&meta.buffer, false), &contents);
            layout::array_remove(change.page(&array, false), id);
            last_lsn = change.finish();
        }
        if last_lsn != 0 {
            pg_sys::XLogFlush(last_lsn);
        }
        entries(&array).iter().map(|e| e.id).collect()
    }
}

/// Walks the list of `entry`, calling `visit` with each locked page (exclusive when `exclusive`).
///
/// # Safety
/// `index` must be open; the caller holds the array page (so the list cannot be released).
unsafe fn walk(index: pg_sys::Relation, entry: &ArrayEntry, exclusive: bool, mut visit: impl FnMut(&PageBuffer)) {
    // SAFETY: guaranteed by the caller; blocks are checked against the relation size.
    unsafe {
        let blocks = pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM);
        let mut block = entry.head;
        let mut steps = 0;
        while block != NO_BLOCK {
            if block >= blocks || steps > blocks {
                corrupted(&layout::StatusError::BadList { memtable: entry.id });
            }
            let page = PageBuffer::lock(index, block, exclusive);
            if let Err(e) = layout::list_tids(page.page(), block) {
                corrupted(&e);
            }
            visit(&page);
            if block == entry.tail {
                break;
            }
            block = layout::next(page.page());
            steps += 1;
        }
    }
}

/// The recovered status: `max_memtable_id`, flags, and every listed memtable with its TIDs
/// (removed TIDs left out), plus the number of list pages read.
///
/// # Safety
/// `index` must be open and `meta` its locked metadata page.
pub unsafe fn read(index: pg_sys::Relation, meta: &MetaLock) -> (Meta, Vec<(u64, Vec<u64>)>, usize) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        let contents = meta.meta();
        let array = PageBuffer::lock(index, ARRAY_BLOCK, false);
        let mut memtables = Vec::new();
        let mut pages = 0;
        for entry in entries(&array) {
            let mut tids = Vec::new();
            walk(index, &entry, false, |page| {
                pages += 1;
                let listed = layout::list_tids(page.page(), page.block()).unwrap_or_else(|e| corrupted(&e));
                tids.extend(listed.into_iter().filter(|&t| t != 0));
            });
            memtables.push((entry.id, tids));
        }
        (contents, memtables, pages)
    }
}

/// Removes the TIDs for which `dead` is true from every list (VACUUM of memtable entries);
/// returns how many were removed.
///
/// # Safety
/// `index` must be an open strata index; the caller holds no status page lock.
pub unsafe fn remove_dead(index: pg_sys::Relation, mut dead: impl FnMut(u64) -> bool) -> u64 {
    // SAFETY: guaranteed by the caller; array (shared, pins the lists) → list pages (exclusive).
    unsafe {
        let array = PageBuffer::lock(index, ARRAY_BLOCK, false);
        let mut removed = 0u64;
        for entry in entries(&array) {
            walk(index, &entry, true, |page| {
                let tids = layout::list_tids(page.page(), page.block()).unwrap_or_else(|e| corrupted(&e));
                let dead_here: std::collections::HashSet<u64> =
                    tids.into_iter().filter(|&t| t != 0 && dead(t)).collect();
                if dead_here.is_empty() {
                    return;
                }
                let change = Change::start(index);
                removed += layout::list_remove_where(change.page(page, false), |t| dead_here.contains(&t)) as u64;
                change.finish();
            });
        }
        removed
    }
}

/// Clears the metadata flags (after recovery handled an init-fork reset).
///
/// # Safety
/// `index` must be open and `meta` its exclusively locked metadata page.
pub unsafe fn clear_flags(index: pg_sys::Relation, meta: &MetaLock) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        let mut contents = meta.meta();
        contents.flags = 0;
        let change = Change::start(index);
        layout::write_meta(change.page(&meta.buffer, false), &contents);
        change.finish();
    }
}
