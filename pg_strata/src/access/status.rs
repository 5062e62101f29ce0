//! The status pages (the paper's §5.2–5.3) in the index relation: strata-lsm's
//! [`PageStore`] over PostgreSQL buffers, changed through GenericXLog.
//!
//! Byte layouts are [`strata_lsm::status`]; the operations, their lock order (metadata page →
//! array page → list pages) and what they guarantee are [`strata_lsm::status::pages`]. This
//! module does the buffer locking and logging, and raises damaged pages as SQL errors. Every
//! change is a generic WAL record, so PostgreSQL restores the pages after a crash (and replays
//! them on physical standbys) without pg_strata's help.
//!
//! The index's manifest LWLock is taken before the array and list pages (VACUUM) and, by
//! recovery only, while holding the metadata page — no path holds the manifest lock and then
//! waits for the metadata page; the directory LWLock comes after all status pages. The metadata
//! page's exclusive lock serialises registering memtables, allocating and freeing list pages, and
//! recovery.
//!
//! A memtable's list is released only after its rows are in a published (fsynced) segment, and
//! the release is flushed to WAL before the index service may merge that segment.

use pgrx::pg_sys;
use strata_lsm::status::pages::{self, Contents, PageStore, MAX_PAGES_PER_CHANGE};
use strata_lsm::status::{self as layout, StatusError, ARRAY_BLOCK, META_BLOCK};

use crate::fmgr::error;

/// A pinned and locked buffer of the index; unlocked and unpinned on drop.
pub struct PageBuffer {
    buffer: pg_sys::Buffer,
    exclusive: bool,
}

impl PageBuffer {
    /// Pins block `block` of `index`'s main fork and locks it.
    ///
    /// # Safety
    /// `index` must be an open relation with at least `block + 1` blocks.
    unsafe fn lock(index: pg_sys::Relation, block: u32, exclusive: bool) -> Self {
        // SAFETY: `index` is an open relation with at least `block + 1` blocks (this function's
        // contract: block 0 exists from ambuild, and strata_lsm locks only blocks below `blocks()`);
        // the buffer stays pinned until drop.
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
            Self { buffer, exclusive }
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
            Self { buffer, exclusive: true }
        }
    }

    /// The block number.
    fn block(&self) -> u32 {
        // SAFETY: a pinned buffer.
        unsafe { pg_sys::BufferGetBlockNumber(self.buffer) }
    }

    /// The page image (read-only; changes go through [`PageStore::change`]).
    fn page(&self) -> &[u8] {
        // SAFETY: the buffer is pinned and locked, so its BLCKSZ bytes are stable for reading.
        unsafe { std::slice::from_raw_parts(pg_sys::BufferGetPage(self.buffer).cast::<u8>(), pg_sys::BLCKSZ as usize) }
    }
}

impl Drop for PageBuffer {
    fn drop(&mut self) {
        // SAFETY: the content lock and the pin taken in lock()/extend().
        unsafe { pg_sys::UnlockReleaseBuffer(self.buffer) };
    }
}

/// The status pages of one open index as [`PageStore`]: its buffers, changed through GenericXLog.
pub struct Pages {
    index: pg_sys::Relation,
}

impl Pages {
    /// The status pages of `index`.
    ///
    /// # Safety
    /// `index` must be an open strata index for as long as the value is used, on the backend's
    /// main thread.
    pub unsafe fn of(index: pg_sys::Relation) -> Self {
        Self { index }
    }
}

// One change is one generic WAL record.
const _: () = assert!(MAX_PAGES_PER_CHANGE == pg_sys::MAX_GENERIC_XLOG_PAGES as usize);

impl PageStore for Pages {
    type Page = PageBuffer;
    type Image<'a> = &'a [u8];

    fn lock(&self, block: u32, exclusive: bool) -> PageBuffer {
        // SAFETY: an open strata index (contract of `of`); strata_lsm locks only blocks that exist
        // (0, 1 and blocks the pages link, which it checks against `blocks` when walking).
        unsafe { PageBuffer::lock(self.index, block, exclusive) }
    }

    fn extend(&self) -> PageBuffer {
        // SAFETY: an open relation (contract of `of`).
        unsafe { PageBuffer::extend(self.index) }
    }

    fn block(&self, page: &PageBuffer) -> u32 {
        page.block()
    }

    fn bytes<'a>(&'a self, page: &'a PageBuffer) -> &'a [u8] {
        page.page()
    }

    fn blocks(&self) -> u32 {
        // SAFETY: an open relation (contract of `of`).
        unsafe { pg_sys::RelationGetNumberOfBlocksInFork(self.index, pg_sys::ForkNumber::MAIN_FORKNUM) }
    }

    fn change(&self, pages: &[(&PageBuffer, bool)], edit: &mut dyn FnMut(&mut [&mut [u8]])) -> u64 {
        pages::check_change(&pages.iter().map(|(p, _)| (p.block(), p.exclusive)).collect::<Vec<_>>());
        // SAFETY: the pages are locked exclusively and distinct (checked above), so each
        // registration returns its own BLCKSZ copy of a page, not aliased, that lives until
        // GenericXLogFinish applies and logs them.
        unsafe {
            let state = pg_sys::GenericXLogStart(self.index);
            let mut images: Vec<&mut [u8]> = pages
                .iter()
                .map(|(page, fresh)| {
                    let flags = if *fresh { pg_sys::GENERIC_XLOG_FULL_IMAGE as i32 } else { 0 };
                    let image = pg_sys::GenericXLogRegisterBuffer(state, page.buffer, flags);
                    let image = std::slice::from_raw_parts_mut(image.cast::<u8>(), pg_sys::BLCKSZ as usize);
                    if *fresh {
                        init_page(image);
                    }
                    image
                })
                .collect();
            edit(&mut images);
            pg_sys::GenericXLogFinish(state)
        }
    }

    fn make_durable(&self, position: u64) {
        // SAFETY: flushing WAL up to a position this backend wrote.
        unsafe { pg_sys::XLogFlush(position) };
    }
}

/// PostgreSQL's empty page with pg_strata's opaque area (contents formatted by strata_lsm).
fn init_page(page: &mut [u8]) {
    // SAFETY: `page` is a BLCKSZ page image.
    unsafe { pg_sys::PageInit(page.as_mut_ptr().cast(), page.len(), layout::OPAQUE_BYTES) };
}

/// Raises a damaged status page as an SQL error.
fn corrupted(e: &dyn std::fmt::Display) -> ! {
    error(pgrx::PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED, format!("pg_strata status pages: {e}; REINDEX the index"))
}

/// The value of a status page operation, or its error raised as an SQL error.
fn ok<T>(result: Result<T, StatusError>) -> T {
    result.unwrap_or_else(|e| raise_status(e))
}

/// Raises a status page error as an SQL error.
pub fn raise_status(e: StatusError) -> ! {
    match e {
        StatusError::OldLayout { .. } => error(
            pgrx::PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            "this index was built by an older pg_strata, whose status pages this version cannot read; REINDEX it",
        ),
        e => corrupted(&e),
    }
}

/// Writes the metadata and array pages (blocks 0 and 1) of an empty `fork`, logged as full
/// images when the fork needs WAL. `flags` and `text_config` (a bm25 index's text search
/// configuration, else 0) go into the metadata page.
///
/// # Safety
/// `index` must be a relation locked for writing whose `fork` is empty.
pub unsafe fn initialise(index: pg_sys::Relation, fork: pg_sys::ForkNumber::Type, flags: u32, text_config: u32) {
    // SAFETY: standard new-page protocol on a fork nobody else can see yet: extend by one
    // buffer, lock it, initialise, mark dirty, log a full image.
    unsafe {
        let logged = fork == pg_sys::ForkNumber::INIT_FORKNUM
            || (*(*index).rd_rel).relpersistence as u8 == pg_sys::RELPERSISTENCE_PERMANENT;
        for block in [META_BLOCK, ARRAY_BLOCK] {
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
            init_page(page);
            pages::format_new_page(page, block, flags, text_config);
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
    pages: Pages,
    buffer: PageBuffer,
}

impl MetaLock {
    /// Locks the metadata page (exclusive for changes and recovery).
    ///
    /// # Safety
    /// `index` must be an open strata index while the lock is held, on the backend's main thread.
    pub unsafe fn acquire(index: pg_sys::Relation, exclusive: bool) -> Self {
        // SAFETY: every strata index has block 0 (written by ambuild).
        unsafe { Self { pages: Pages::of(index), buffer: PageBuffer::lock(index, META_BLOCK, exclusive) } }
    }

    /// Registers group `id` (a memtable or a CREATE INDEX chunk), open, raising
    /// `max_memtable_id`; the lock is held exclusively.
    pub fn register_memtable(&self, id: u64) {
        ok(pages::register(&self.pages, &self.buffer, id));
    }

    /// Appends `tids` to group `id` in as few WAL records as the pages allow (CREATE INDEX); the
    /// lock is held exclusively.
    pub fn append_many(&self, id: u64, tids: &[u64]) {
        ok(pages::append_many(&self.pages, &self.buffer, id, tids));
    }

    /// Settles groups `ids` (whose rows are in published segments) and flushes the WAL so that
    /// is durable before anything relies on it; their lists stay, as the index's membership log.
    /// The lock is held exclusively. Returns the ids of the groups still open.
    pub fn settle(&self, ids: &[u64]) -> Vec<u64> {
        ok(pages::settle(&self.pages, &self.buffer, ids))
    }

    /// The metadata page's contents.
    pub fn meta(&self) -> strata_lsm::status::Meta {
        ok(pages::meta(&self.pages, &self.buffer))
    }

    /// The recovered status: the metadata, every open group with its TIDs (removed TIDs left
    /// out), and the number of list pages read.
    pub fn read(&self) -> Contents {
        ok(pages::read(&self.pages, &self.buffer))
    }

    /// Clears the metadata flags (after recovery handled an init-fork reset); the lock is held
    /// exclusively.
    pub fn clear_flags(&self) {
        ok(pages::clear_flags(&self.pages, &self.buffer));
    }
}

/// Appends heap TID `tid` to the list of open group `id`, in the caller's transaction.
///
/// # Safety
/// `index` must be an open strata index; the caller holds no status page lock.
pub unsafe fn append(index: pg_sys::Relation, id: u64, tid: u64) {
    // SAFETY: `index` is an open strata index (this function's contract: aminsert's own relation)
    // for the life of the temporary `Pages`; no status page lock is held, so `append` may take them.
    ok(pages::append(unsafe { &Pages::of(index) }, id, tid));
}

/// The ids of the open groups.
///
/// # Safety
/// `index` must be an open strata index; the caller holds no array page lock.
pub unsafe fn listed(index: pg_sys::Relation) -> Vec<u64> {
    // SAFETY: `index` is an open strata index (this function's contract) for the life of the
    // temporary `Pages`; no array page lock is held, so `listed` may lock it.
    ok(pages::listed(unsafe { &Pages::of(index) }))
}

/// VACUUM's first step: zeroes the TIDs for which `dead` is true in every group's list
/// (WAL-logged), without the metadata lock, so it may run under the index's manifest lock.
///
/// # Safety
/// `index` must be an open strata index; the caller holds no status page lock.
pub unsafe fn zero_dead(index: pg_sys::Relation, dead: impl FnMut(u64) -> bool) -> pages::Zeroed {
    // SAFETY: `index` is the open strata index of ambulkdelete's IndexVacuumInfo (this function's
    // contract) for the life of the temporary `Pages`; no status page lock is held.
    ok(pages::zero_dead(unsafe { &Pages::of(index) }, dead))
}

/// VACUUM's second step: bumps the generations of the groups `zeroed` touched and drops settled
/// groups left empty, under the metadata lock (so never under the manifest lock).
///
/// # Safety
/// `index` must be an open strata index; the caller holds no status page lock and no manifest
/// lock.
pub unsafe fn finish_vacuum(index: pg_sys::Relation, zeroed: &pages::Zeroed) {
    if zeroed.is_empty() {
        return;
    }
    // SAFETY: `index` is ambulkdelete's open strata index (this function's contract), which keeps
    // block 0; no status page or manifest lock is held, so the metadata page may be locked now.
    let meta = unsafe { MetaLock::acquire(index, true) };
    ok(pages::finish_vacuum(&meta.pages, &meta.buffer, zeroed));
}
