//! Fuzzes the status pages' readers (strata-lsm `status`): on arbitrary page bytes every reader
//! either fails with a typed [`StatusError`](strata_lsm::status::StatusError) or returns, and
//! never panics or loops; on pages that real operations wrote, without damage, every reader
//! succeeds.
//!
//! The input drives a store of 256-byte pages (the layout depends on no page size; pg_strata's
//! are PostgreSQL's 8 KB blocks):
//!
//! ```text
//! 1 byte        n: the number of operations that follow (at most 64 are run)
//! n × 3 bytes   operation: kind % 4 (register the next group, append a TID to the newest
//!               group, settle the oldest open group, zero the TIDs whose low byte is the
//!               argument), then a u16 argument (the TID's low bits)
//! rest          damage: (u16 LE byte offset into the pages, u8 value) triples, each
//!               overwriting one byte (offset modulo the pages' total size)
//! ```
//!
//! Then the metadata, the open groups with their TIDs (`pages::read`, what crash recovery
//! reads), every group with its list (`pages::read_groups`, what a standby reads) and each
//! page's decoder are run. The seeds in `seeds/status_pages` are inputs of that form
//! (`cargo xtask fuzz seeds`).
//!
//! Smoke run (stable toolchain, no cargo-fuzz): `cargo xtask fuzz --seconds 50`. With cargo-fuzz:
//! `cd crates/engine/fuzz && cargo fuzz run -s none status_pages seeds/status_pages`.

#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use strata_lsm::status::pages::{self, PageStore};
use strata_lsm::status::{self, ARRAY_BLOCK, META_BLOCK, OPAQUE_BYTES, PAGE_HEADER_BYTES};

/// Bytes per page.
const PAGE: usize = 256;

/// Pages in memory, changed in place (no locks: one thread, and the readers' lock order is
/// checked by strata-lsm's own model store).
struct Store {
    pages: RefCell<Vec<Vec<u8>>>,
}

/// PostgreSQL's `PageInit` with an [`OPAQUE_BYTES`] special area.
fn page_init(page: &mut [u8]) {
    let size = page.len();
    page.fill(0);
    let mut header = |at: usize, value: u16| page[at..at + 2].copy_from_slice(&value.to_ne_bytes());
    header(12, PAGE_HEADER_BYTES as u16);
    header(14, (size - OPAQUE_BYTES) as u16);
    header(16, (size - OPAQUE_BYTES) as u16);
    header(18, size as u16 | 4);
}

impl Store {
    /// A new index's metadata and catalog pages.
    fn new() -> Self {
        let (mut meta, mut array) = (vec![0; PAGE], vec![0; PAGE]);
        page_init(&mut meta);
        page_init(&mut array);
        pages::format_new_page(&mut meta, META_BLOCK, 0, 0);
        pages::format_new_page(&mut array, ARRAY_BLOCK, 0, 0);
        Self { pages: RefCell::new(vec![meta, array]) }
    }
}

impl PageStore for Store {
    type Page = u32;

    fn lock(&self, block: u32, _exclusive: bool) -> u32 {
        assert!((block as usize) < self.pages.borrow().len(), "block {block} does not exist");
        block
    }

    fn extend(&self) -> u32 {
        let mut pages = self.pages.borrow_mut();
        pages.push(vec![0xA5; PAGE]);
        pages.len() as u32 - 1
    }

    fn block(&self, page: &u32) -> u32 {
        *page
    }

    type Image<'a> = std::cell::Ref<'a, [u8]>;

    fn bytes<'a>(&'a self, page: &'a u32) -> Self::Image<'a> {
        std::cell::Ref::map(self.pages.borrow(), |pages| pages[*page as usize].as_slice())
    }

    fn blocks(&self) -> u32 {
        self.pages.borrow().len() as u32
    }

    fn change(&self, pages: &[(&u32, bool)], edit: &mut dyn FnMut(&mut [&mut [u8]])) -> u64 {
        let mut images: Vec<Vec<u8>> = pages
            .iter()
            .map(|(block, fresh)| {
                let mut image = self.pages.borrow()[**block as usize].clone();
                if *fresh {
                    page_init(&mut image);
                }
                image
            })
            .collect();
        let mut views: Vec<&mut [u8]> = images.iter_mut().map(Vec::as_mut_slice).collect();
        edit(&mut views);
        let mut stored = self.pages.borrow_mut();
        for ((block, _), image) in pages.iter().zip(images) {
            stored[**block as usize] = image;
        }
        0
    }

    fn make_durable(&self, _position: u64) {}
}

/// Runs the operations the input's first part describes; returns the rest of the input.
fn operate<'d>(store: &Store, data: &'d [u8]) -> &'d [u8] {
    let Some((&count, mut rest)) = data.split_first() else { return data };
    let (mut next_group, mut open) = (1u64, Vec::new());
    for _ in 0..count.min(64) {
        let Some((op, after)) = rest.split_first_chunk::<3>() else { break };
        rest = after;
        let argument = u64::from(u16::from_le_bytes([op[1], op[2]]));
        let meta = store.lock(META_BLOCK, true);
        let result = match op[0] % 4 {
            0 => {
                open.push(next_group);
                next_group += 1;
                pages::register(store, &meta, next_group - 1)
            }
            1 => match open.last() {
                // A TID: block in the high bits, offset (never 0) in the low 16.
                Some(&group) => pages::append(store, group, (argument << 16) | 1),
                None => Ok(()),
            },
            2 if !open.is_empty() => pages::settle(store, &meta, &[open.remove(0)]).map(drop),
            2 => Ok(()),
            _ => pages::zero_dead(store, |tid| (tid >> 16) & 0xFF == argument & 0xFF).map(drop),
        };
        result.expect("operations on undamaged pages succeed");
    }
    rest
}

/// Every reader over `store`; `intact` when no byte was damaged, so that each must succeed.
fn read_all(store: &Store, intact: bool) {
    let meta = store.lock(META_BLOCK, false);
    let contents = pages::read(store, &meta);
    let groups = pages::read_groups(store);
    if intact {
        let contents = contents.expect("undamaged pages read");
        let groups = groups.expect("undamaged groups read");
        assert!(contents.status.memtables.len() <= groups.len(), "more open groups than groups");
    }
    let pages = store.pages.borrow();
    for (block, page) in pages.iter().enumerate() {
        let block = block as u32;
        if let Ok(kind) = status::kind(page, block) {
            let _ = (kind, status::lower(page), status::special(page), status::next(page));
        }
        let _ = status::read_meta(page);
        let _ = status::array_entries(page, block);
        let _ = status::list_tids(page, block);
    }
}

fuzz_target!(|data: &[u8]| {
    let store = Store::new();
    let damage = operate(&store, data);
    read_all(&store, true);
    let mut damaged = false;
    {
        let mut pages = store.pages.borrow_mut();
        let total = pages.len() * PAGE;
        for triple in damage.chunks_exact(3) {
            let at = usize::from(u16::from_le_bytes([triple[0], triple[1]])) % total;
            damaged |= pages[at / PAGE][at % PAGE] != triple[2];
            pages[at / PAGE][at % PAGE] = triple[2];
        }
    }
    read_all(&store, !damaged);
});
