//! Byte layouts of the status pages (the paper's §5.2), as pure functions over page images.
//!
//! The status pages live in the index relation's own main fork, in PostgreSQL's standard page
//! layout, so PostgreSQL WAL-logs them (the extension changes them through GenericXLog) and
//! restores them after a crash — and ships them to standbys and archives. They are the index's
//! *membership log* ([`crate::membership`]): per group (a memtable, or a chunk of CREATE INDEX),
//! the heap TIDs appended to it, kept for the index's life. A flush *settles* its group; VACUUM
//! zeroes removed TIDs and then bumps the group's `vacuum_gen`; a settled group whose TIDs are all
//! removed leaves the catalog and its pages go to a free list.
//!
//! ```text
//! every page:  0..24  PostgreSQL page header (pd_lower at 12, pd_upper at 14, pd_special at 16)
//!              24..pd_lower   contents (below)
//!              pd_special..   opaque: next block u32 | page kind u16 | magic 0x5354 u16
//!
//! block 0, META:   magic "STM1" u32 | version u32 (2) | max_memtable_id u64 | free_head u32 |
//!                  flags u32 | text_config u32   (pd_lower = 52; 48 in pages written before
//!                  text_config existed, read as text_config 0)
//! ARRAY pages:     the group catalog, block 1 first, more chained by `next`:
//!                  n × { group id u64 | head block u32 | tail block u32 | vacuum_gen u32 |
//!                        state u8 (1 open, 2 settled) | 3 zero bytes }        (24 bytes each)
//! LIST pages:      TIDs as u64 (block << 16 | offset), 0 = removed by VACUUM; `next` chains
//!                  the group's pages from head to tail
//! FREE pages:      empty; `next` chains the free list from META.free_head
//! ```
//!
//! The header fields are PostgreSQL's, in host byte order; everything pg_strata writes (contents
//! and opaque area) is little-endian, so the layout is the same byte for byte on every machine.
//!
//! [`pages`] holds the operations on these pages (register a group, append TIDs, settle flushed
//! groups, VACUUM, read the unsettled groups back for crash recovery and every group for a node
//! that derives its index) over the [`pages::PageStore`] trait, which pg_strata implements with
//! buffers and GenericXLog.

pub mod pages;
#[cfg(test)]
pub(crate) mod pages_model;

use thiserror::Error;

use crate::membership::GroupState;

/// Size of PostgreSQL's page header.
pub const PAGE_HEADER_BYTES: usize = 24;
/// Size of the opaque (special) area of every status page.
pub const OPAQUE_BYTES: usize = 8;
/// "No block": PostgreSQL's InvalidBlockNumber.
pub const NO_BLOCK: u32 = u32::MAX;
/// Block number of the metadata page.
pub const META_BLOCK: u32 = 0;
/// Block number of the first group catalog (array) page.
pub const ARRAY_BLOCK: u32 = 1;
/// Bytes per catalog entry.
pub const ARRAY_ENTRY_BYTES: usize = 24;
/// Magic number at the start of the metadata contents ("STM1").
pub const META_MAGIC: u32 = 0x314D_5453;
/// Layout version written by this code: 2, the membership log. Version 1 released flushed
/// memtables' lists and cannot be read by this code ([`StatusError::OldLayout`]).
pub const META_VERSION: u32 = 2;
/// Magic number in every page's opaque area ("ST").
pub const OPAQUE_MAGIC: u16 = 0x5453;
/// Metadata flag: this page image is the unlogged index's init fork (or a copy of it made by
/// crash recovery), so every segment on disk predates the reset and must be dropped.
pub const FLAG_INIT_FORK: u32 = 1;
/// Bytes of metadata contents written.
const META_CONTENT_BYTES: usize = 28;
/// Bytes of metadata contents before `text_config` was added (still read).
const META_CONTENT_BYTES_BEFORE_TEXT_CONFIG: usize = 24;

/// What a status page holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum PageKind {
    /// Block 0.
    Meta = 1,
    /// A page of the group catalog (block 1 and its chain).
    Array = 2,
    /// A page of a group's TID list.
    List = 3,
    /// A page on the free list.
    Free = 4,
}

impl PageKind {
    fn from_u16(value: u16) -> Option<Self> {
        match value {
            1 => Some(Self::Meta),
            2 => Some(Self::Array),
            3 => Some(Self::List),
            4 => Some(Self::Free),
            _ => None,
        }
    }
}

/// A status page that does not have the expected shape.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum StatusError {
    /// The page is shorter than a header plus opaque area, or its header offsets are out of range.
    #[error("status page {block}: header offsets out of range")]
    BadHeader {
        /// The block.
        block: u32,
    },
    /// The opaque area does not carry pg_strata's magic or a known kind.
    #[error("status page {block}: not a pg_strata status page")]
    NotStatusPage {
        /// The block.
        block: u32,
    },
    /// The page is of another kind than expected.
    #[error("status page {block}: expected a {expected:?} page, found {found:?}")]
    WrongKind {
        /// The block.
        block: u32,
        /// Expected kind.
        expected: PageKind,
        /// Found kind.
        found: PageKind,
    },
    /// The metadata magic or version is unknown.
    #[error("status metadata page: unknown magic {magic:#x} or version {version}")]
    BadMeta {
        /// Magic read.
        magic: u32,
        /// Version read.
        version: u32,
    },
    /// A page list loops or is longer than the relation.
    #[error("status page list of memtable {memtable} is malformed")]
    BadList {
        /// The memtable whose list it is.
        memtable: u64,
    },
    /// The index was built by a pg_strata whose status pages released flushed memtables'
    /// lists (layout version 1): this code cannot tell which rows its segments hold.
    #[error("status pages of layout version {version}, which this pg_strata cannot read")]
    OldLayout {
        /// The version found.
        version: u32,
    },
    /// A TID was appended to a group the catalog does not list.
    #[error("status catalog lists no group {group}")]
    NoSuchGroup {
        /// The group.
        group: u64,
    },
    /// A catalog entry names a group state that does not exist.
    #[error("status catalog entry of group {group}: unknown state {state}")]
    BadState {
        /// The group.
        group: u64,
        /// The byte read.
        state: u8,
    },
}

/// The metadata page's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// SegmentID of the newest memtable registered.
    pub max_memtable_id: u64,
    /// First page of the free list, or [`NO_BLOCK`].
    pub free_head: u32,
    /// [`FLAG_INIT_FORK`] or 0.
    pub flags: u32,
    /// The text search configuration (a `regconfig` OID) a bm25 index tokenises with, fixed at
    /// CREATE INDEX; 0 for a vector index, and for a bm25 index built before it was stored.
    pub text_config: u32,
}

/// One group in the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArrayEntry {
    /// The group's id (its memtable's SegmentID).
    pub id: u64,
    /// First page of its TID list, or [`NO_BLOCK`] while it has none.
    pub head: u32,
    /// Last page of its TID list, or [`NO_BLOCK`].
    pub tail: u32,
    /// Bumped after VACUUM zeroed TIDs in the list.
    pub vacuum_gen: u32,
    /// Open or settled.
    pub state: GroupState,
}

fn u16_at(page: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([page[at], page[at + 1]])
}

fn u32_at(page: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(page[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(page: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(page[at..at + 8].try_into().expect("8 bytes"))
}

fn put_u16(page: &mut [u8], at: usize, value: u16) {
    page[at..at + 2].copy_from_slice(&value.to_le_bytes());
}

fn put_u32(page: &mut [u8], at: usize, value: u32) {
    page[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

fn put_u64(page: &mut [u8], at: usize, value: u64) {
    page[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

/// `pd_lower`: the end of the page's contents.
pub fn lower(page: &[u8]) -> usize {
    usize::from(header_u16(page, 12))
}

/// A field of PostgreSQL's page header (host byte order).
fn header_u16(page: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([page[at], page[at + 1]])
}

fn set_lower(page: &mut [u8], lower: usize) {
    let value = u16::try_from(lower).expect("pd_lower fits a page");
    page[12..14].copy_from_slice(&value.to_ne_bytes());
}

/// `pd_special`: the start of the opaque area.
pub fn special(page: &[u8]) -> usize {
    usize::from(header_u16(page, 16))
}

/// Checks the header and opaque area of `page` (block `block`) and returns its kind.
pub fn kind(page: &[u8], block: u32) -> Result<PageKind, StatusError> {
    if page.len() < PAGE_HEADER_BYTES + OPAQUE_BYTES {
        return Err(StatusError::BadHeader { block });
    }
    let (low, spec) = (lower(page), special(page));
    if spec + OPAQUE_BYTES != page.len() || low < PAGE_HEADER_BYTES || low > spec {
        return Err(StatusError::BadHeader { block });
    }
    if u16_at(page, spec + 6) != OPAQUE_MAGIC {
        return Err(StatusError::NotStatusPage { block });
    }
    PageKind::from_u16(u16_at(page, spec + 4)).ok_or(StatusError::NotStatusPage { block })
}

fn expect_kind(page: &[u8], block: u32, expected: PageKind) -> Result<(), StatusError> {
    let found = kind(page, block)?;
    if found == expected {
        Ok(())
    } else {
        Err(StatusError::WrongKind { block, expected, found })
    }
}

/// The `next` link of a page (list or free-list chain).
pub fn next(page: &[u8]) -> u32 {
    u32_at(page, special(page))
}

/// Sets the `next` link.
pub fn set_next(page: &mut [u8], block: u32) {
    let at = special(page);
    put_u32(page, at, block);
}

/// Formats the contents of a page that PostgreSQL's `PageInit` has just initialised with an
/// [`OPAQUE_BYTES`] special area: empty contents, kind `kind`, no next page.
pub fn format(page: &mut [u8], kind: PageKind) {
    let at = special(page);
    set_lower(page, PAGE_HEADER_BYTES);
    put_u32(page, at, NO_BLOCK);
    put_u16(page, at + 4, kind as u16);
    put_u16(page, at + 6, OPAQUE_MAGIC);
}

/// Writes the metadata contents into a META page.
pub fn write_meta(page: &mut [u8], meta: &Meta) {
    let at = PAGE_HEADER_BYTES;
    put_u32(page, at, META_MAGIC);
    put_u32(page, at + 4, META_VERSION);
    put_u64(page, at + 8, meta.max_memtable_id);
    put_u32(page, at + 16, meta.free_head);
    put_u32(page, at + 20, meta.flags);
    put_u32(page, at + 24, meta.text_config);
    set_lower(page, PAGE_HEADER_BYTES + META_CONTENT_BYTES);
}

/// Reads the metadata contents of block 0.
pub fn read_meta(page: &[u8]) -> Result<Meta, StatusError> {
    expect_kind(page, META_BLOCK, PageKind::Meta)?;
    let at = PAGE_HEADER_BYTES;
    let (magic, version) = (u32_at(page, at), u32_at(page, at + 4));
    if magic == META_MAGIC && version == 1 {
        return Err(StatusError::OldLayout { version });
    }
    if magic != META_MAGIC || version != META_VERSION || lower(page) < at + META_CONTENT_BYTES_BEFORE_TEXT_CONFIG {
        return Err(StatusError::BadMeta { magic, version });
    }
    let text_config = if lower(page) >= at + META_CONTENT_BYTES { u32_at(page, at + 24) } else { 0 };
    Ok(Meta {
        max_memtable_id: u64_at(page, at + 8),
        free_head: u32_at(page, at + 16),
        flags: u32_at(page, at + 20),
        text_config,
    })
}

/// The entries of catalog page `block`.
pub fn array_entries(page: &[u8], block: u32) -> Result<Vec<ArrayEntry>, StatusError> {
    expect_kind(page, block, PageKind::Array)?;
    let count = (lower(page) - PAGE_HEADER_BYTES) / ARRAY_ENTRY_BYTES;
    (0..count)
        .map(|i| {
            let at = PAGE_HEADER_BYTES + i * ARRAY_ENTRY_BYTES;
            let id = u64_at(page, at);
            let state =
                GroupState::try_from(page[at + 20]).map_err(|state| StatusError::BadState { group: id, state })?;
            Ok(ArrayEntry {
                id,
                head: u32_at(page, at + 8),
                tail: u32_at(page, at + 12),
                vacuum_gen: u32_at(page, at + 16),
                state,
            })
        })
        .collect()
}

fn write_entry(page: &mut [u8], index: usize, entry: &ArrayEntry) {
    let at = PAGE_HEADER_BYTES + index * ARRAY_ENTRY_BYTES;
    put_u64(page, at, entry.id);
    put_u32(page, at + 8, entry.head);
    put_u32(page, at + 12, entry.tail);
    put_u32(page, at + 16, entry.vacuum_gen);
    page[at + 20] = entry.state as u8;
    page[at + 21..at + 24].fill(0);
}

/// Entries the array page can hold.
pub fn array_capacity(page: &[u8]) -> usize {
    (special(page) - PAGE_HEADER_BYTES) / ARRAY_ENTRY_BYTES
}

/// Appends `entry`; false when the page is full.
pub fn array_push(page: &mut [u8], entry: &ArrayEntry) -> bool {
    let count = (lower(page) - PAGE_HEADER_BYTES) / ARRAY_ENTRY_BYTES;
    if count >= array_capacity(page) {
        return false;
    }
    write_entry(page, count, entry);
    set_lower(page, PAGE_HEADER_BYTES + (count + 1) * ARRAY_ENTRY_BYTES);
    true
}

/// Replaces the entry with `entry.id`; false when there is none.
pub fn array_update(page: &mut [u8], entry: &ArrayEntry) -> bool {
    let Ok(entries) = array_entries(page, NO_BLOCK) else {
        return false;
    };
    match entries.iter().position(|e| e.id == entry.id) {
        Some(index) => {
            write_entry(page, index, entry);
            true
        }
        None => false,
    }
}

/// Removes the entry of group `id` (the last entry takes its place) and returns it.
pub fn array_remove(page: &mut [u8], id: u64) -> Option<ArrayEntry> {
    let entries = array_entries(page, NO_BLOCK).ok()?;
    let index = entries.iter().position(|e| e.id == id)?;
    let last = entries.len() - 1;
    if index != last {
        write_entry(page, index, &entries[last]);
    }
    let at = PAGE_HEADER_BYTES + last * ARRAY_ENTRY_BYTES;
    page[at..at + ARRAY_ENTRY_BYTES].fill(0);
    set_lower(page, at);
    Some(entries[index])
}

/// TIDs a list page can hold.
pub fn list_capacity(page: &[u8]) -> usize {
    (special(page) - PAGE_HEADER_BYTES) / 8
}

/// The TIDs stored on a LIST page (0 = removed).
pub fn list_tids(page: &[u8], block: u32) -> Result<Vec<u64>, StatusError> {
    expect_kind(page, block, PageKind::List)?;
    let count = (lower(page) - PAGE_HEADER_BYTES) / 8;
    Ok((0..count).map(|i| u64_at(page, PAGE_HEADER_BYTES + 8 * i)).collect())
}

/// Appends `tid` to a LIST page; false when the page is full.
pub fn list_append(page: &mut [u8], tid: u64) -> bool {
    let at = lower(page);
    if at + 8 > special(page) {
        return false;
    }
    put_u64(page, at, tid);
    set_lower(page, at + 8);
    true
}

/// Zeroes every TID on a LIST page for which `dead` is true; returns how many.
pub fn list_remove_where(page: &mut [u8], mut dead: impl FnMut(u64) -> bool) -> usize {
    let count = (lower(page) - PAGE_HEADER_BYTES) / 8;
    let mut removed = 0;
    for i in 0..count {
        let at = PAGE_HEADER_BYTES + 8 * i;
        let tid = u64_at(page, at);
        if tid != 0 && dead(tid) {
            put_u64(page, at, 0);
            removed += 1;
        }
    }
    removed
}

/// What PostgreSQL's `PageInit(page, size, OPAQUE_BYTES)` does to `page` (for tests: the real
/// one is PostgreSQL's).
#[cfg(test)]
pub(crate) fn page_init(page: &mut [u8]) {
    let size = page.len();
    page.fill(0);
    let mut header = |at: usize, value: u16| page[at..at + 2].copy_from_slice(&value.to_ne_bytes());
    header(12, PAGE_HEADER_BYTES as u16);
    header(14, (size - OPAQUE_BYTES) as u16);
    header(16, (size - OPAQUE_BYTES) as u16);
    header(18, size as u16 | 4);
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: usize = 8192;

    /// An 8 kB page as PostgreSQL's `PageInit` leaves it.
    fn page_init() -> Vec<u8> {
        let mut page = vec![0u8; PAGE];
        super::page_init(&mut page);
        page
    }

    #[test]
    fn meta_round_trip_and_bytes() {
        let mut page = page_init();
        format(&mut page, PageKind::Meta);
        let meta =
            Meta { max_memtable_id: 0x0102_0304_0506_0708, free_head: 7, flags: FLAG_INIT_FORK, text_config: 3748 };
        write_meta(&mut page, &meta);
        assert_eq!(read_meta(&page), Ok(meta));
        assert_eq!(&page[24..28], b"STM1");
        assert_eq!(&page[32..40], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(&page[48..52], &3748u32.to_le_bytes());
        assert_eq!(lower(&page), 52);
        // A page written before text_config existed ends at 48: read as no configuration.
        set_lower(&mut page, 48);
        assert_eq!(read_meta(&page), Ok(Meta { text_config: 0, ..meta }));
        set_lower(&mut page, 44);
        assert!(matches!(read_meta(&page), Err(StatusError::BadMeta { .. })), "too short");
        set_lower(&mut page, 52);
        assert_eq!(&page[PAGE - 8..], &[0xFF, 0xFF, 0xFF, 0xFF, 1, 0, b'S', b'T']);
        page[28] = 1;
        assert_eq!(read_meta(&page), Err(StatusError::OldLayout { version: 1 }));
        page[24] ^= 1;
        assert!(matches!(read_meta(&page), Err(StatusError::BadMeta { .. })));
    }

    #[test]
    fn kinds_are_checked() {
        let mut page = page_init();
        assert_eq!(kind(&page, 3), Err(StatusError::NotStatusPage { block: 3 }));
        format(&mut page, PageKind::List);
        assert_eq!(kind(&page, 3), Ok(PageKind::List));
        assert!(matches!(read_meta(&page), Err(StatusError::WrongKind { .. })));
        page[12..14].copy_from_slice(&9000u16.to_ne_bytes());
        assert_eq!(kind(&page, 3), Err(StatusError::BadHeader { block: 3 }));
        assert_eq!(kind(&page[..20], 3), Err(StatusError::BadHeader { block: 3 }));
    }

    #[test]
    fn array_push_update_remove() {
        let mut page = page_init();
        format(&mut page, PageKind::Array);
        let capacity = array_capacity(&page);
        assert_eq!(capacity, (PAGE - 32) / 24);
        let entry = |id, head, tail| ArrayEntry { id, head, tail, vacuum_gen: 0, state: GroupState::Open };
        for id in 0..capacity as u64 {
            assert!(array_push(&mut page, &entry(id, NO_BLOCK, NO_BLOCK)));
        }
        assert!(!array_push(&mut page, &entry(9999, 1, 1)));
        let settled = ArrayEntry { vacuum_gen: 7, state: GroupState::Settled, ..entry(5, 10, 11) };
        assert!(array_update(&mut page, &settled));
        assert!(!array_update(&mut page, &entry(9999, 10, 11)));
        assert_eq!(array_remove(&mut page, 5), Some(settled));
        assert_eq!(array_remove(&mut page, 5), None);
        let entries = array_entries(&page, 1).unwrap();
        assert_eq!(entries.len(), capacity - 1);
        assert_eq!(entries[5].id, capacity as u64 - 1);
        let mut ids: Vec<u64> = entries.iter().map(|e| e.id).collect();
        ids.sort_unstable();
        let expected: Vec<u64> = (0..capacity as u64).filter(|&id| id != 5).collect();
        assert_eq!(ids, expected);
    }

    #[test]
    fn list_append_remove_and_links() {
        let mut page = page_init();
        format(&mut page, PageKind::List);
        assert_eq!(next(&page), NO_BLOCK);
        set_next(&mut page, 42);
        assert_eq!(next(&page), 42);
        let capacity = list_capacity(&page);
        assert_eq!(capacity, 1020);
        for tid in 1..=capacity as u64 {
            assert!(list_append(&mut page, tid));
        }
        assert!(!list_append(&mut page, 5000));
        assert_eq!(list_remove_where(&mut page, |t| t % 2 == 0), capacity / 2);
        assert_eq!(list_remove_where(&mut page, |t| t % 2 == 0), 0, "removed TIDs are 0 and stay removed");
        let tids = list_tids(&page, 9).unwrap();
        assert_eq!(tids.len(), capacity);
        assert!(tids.iter().enumerate().all(|(i, &t)| if i % 2 == 1 { t == 0 } else { t == i as u64 + 1 }));
        format(&mut page, PageKind::Free);
        assert_eq!(lower(&page), PAGE_HEADER_BYTES);
        assert_eq!(next(&page), NO_BLOCK);
    }
}
