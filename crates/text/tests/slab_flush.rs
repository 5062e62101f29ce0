//! Text rows through strata-lsm's shared-memory memtables: documents are appended as span rows
//! with the writers' insert protocol, VACUUM marks some deleted in their memtable, sealed
//! memtables are flushed by the runtime's `flush_rows` into published text segments, and a
//! search over the segments plus the active memtable equals the reference BM25 over a model of
//! the live rows.
//!
//! The test runs inside a one-schedule shuttle run: strata-lsm's slab atomics are shuttle's in
//! strata-text's tests.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::slabs::{explore, HeapRegion, TestLock};
use common::{assert_matches_reference, corpus, reference, text_config, Row};
use strata_lsm::directory::memory::MemoryDirectory;
use strata_lsm::files::IndexFiles;
use strata_lsm::flush::{flush_rows, FlushTarget, Flushed};
use strata_lsm::memtable::MemtableLayout;
use strata_lsm::segment_set::SegmentSet;
use strata_lsm::segment_type::{BuildWork, SegmentType};
use strata_lsm::slabs::{SlabState, Slabs};
use strata_lsm::writer::insert_span_row;
use strata_text::lsm::slab_rows;
use strata_text::{search, Bm25Params, Bm25Query, Source, TextSegment};

/// Flushes every SEALED memtable of index 0 with the runtime's `flush_rows`; returns how many
/// segments were published.
fn flush_sealed(slabs: Slabs<'_, HeapRegion, TestLock>, files: &IndexFiles<TextSegment>, next_id: &mut u64) -> usize {
    let config = text_config();
    let mut published = 0;
    for info in slabs.infos().into_iter().filter(|info| info.state == SlabState::Sealed) {
        let target = FlushTarget { slab: info.slab, index: 0, segment_id: info.segment_id };
        let id = *next_id;
        let flushed = flush_rows(
            slabs,
            files,
            target,
            slab_rows,
            || id,
            || id + 1,
            |rows| TextSegment::build(files, &config, rows, &BuildWork::new(1)),
            |_| {},
        )
        .unwrap();
        *next_id += 1;
        published += usize::from(matches!(flushed, Flushed::Published(_)));
    }
    slabs.free_unread();
    published
}

#[test]
fn documents_flushed_from_slab_memtables_score_as_the_reference() {
    explore(documents_flushed_from_slab_memtables, 1);
}

fn documents_flushed_from_slab_memtables() {
    // 96 slots of 8 words: a document of up to 48 distinct lexemes takes up to 19 slots, so runs
    // straddle memtable ends often.
    let layout = MemtableLayout::new(96, 8);
    let region = HeapRegion::new(3, layout);
    let lock = TestLock::default();
    let slabs = Slabs::new(&region, &lock);
    let files = IndexFiles::<TextSegment>::new(Arc::new(MemoryDirectory::new()));
    files.create(text_config()).unwrap();
    let rows = corpus(23, 900, 80, 2.0, 6);
    let mut model: BTreeMap<u64, &Row> = BTreeMap::new();
    let (mut next_memtable, mut next_file, mut segments, mut vacuumed) = (1u64, 100u64, 0, 0);
    for (n, row) in rows.iter().enumerate() {
        let pin_active = || loop {
            if let Some(pin) = slabs.pin_active(0) {
                return Box::new(pin);
            }
            match slabs.allocate(0, layout, || {
                next_memtable += 1;
                next_memtable
            }) {
                Ok(allocation) => {
                    allocation.activate();
                }
                Err(_) => segments += flush_sealed(slabs, &files, &mut next_file),
            }
        };
        let mut recorded = None;
        insert_span_row(
            pin_active,
            row.id,
            &row.doc.to_words(),
            |memtable| recorded = Some(memtable),
            |slab, id| {
                slabs.seal(0, slab, id);
            },
        )
        .unwrap();
        assert!(recorded.is_some(), "the writer recorded its row's memtable");
        model.insert(row.id, row);
        // VACUUM of the active memtable: every 7th row so far that is still there.
        if n % 50 == 49 {
            let pin = slabs.pin_active(0).unwrap();
            let dead: Vec<u64> = rows[..=n].iter().step_by(7).map(|r| r.id).collect();
            let mut marked = Vec::new();
            pin.memtable().delete_where(|tid| {
                let is_dead = dead.contains(&tid);
                if is_dead {
                    marked.push(tid);
                }
                is_dead
            });
            drop(pin);
            vacuumed += marked.len();
            for id in &marked {
                model.remove(id);
            }
        }
    }
    assert!(vacuumed > 20, "VACUUM marked rows in memtables ({vacuumed})");
    assert!(segments >= 3, "memtables were flushed as they filled ({segments} segments)");
    // Search: every published segment plus the rows still in memtables (one slab-rows memtable
    // per unflushed slab), with global statistics.
    let set = SegmentSet::open(&files, None).unwrap();
    let unflushed: Vec<_> = slabs
        .infos()
        .into_iter()
        .filter(|info| matches!(info.state, SlabState::Active | SlabState::Sealed))
        .filter_map(|info| slab_rows(&slabs.memtable(info.slab)).unwrap())
        .collect();
    assert!(!unflushed.is_empty(), "some rows are still in memtables");
    let mut sources: Vec<Source<'_>> =
        set.segments.iter().map(|s| Source::segment(&s.segment, s.deleted.as_ref()).unwrap()).collect();
    sources.extend(unflushed.iter().map(|m| Source::memtable(m, None).unwrap()));
    let indexed: usize = sources.iter().map(|s| s.live_stats().docs as usize).sum();
    assert_eq!(indexed, model.len(), "every live row is indexed once");
    let live: Vec<&Row> = model.values().copied().collect();
    for query in [&["t0", "t3"][..], &["t7", "t1", "t50"], &["t2"], &["t79", "t11"]] {
        let all = reference(&live, query, 1.2, 0.75);
        let q = Bm25Query::prepare(&sources, query, Bm25Params::default());
        let got: Vec<(u64, f64)> = search(&sources, &q, 10).hits.iter().map(|h| (h.id, h.score)).collect();
        assert_matches_reference(&got, &all, 10);
    }
}
