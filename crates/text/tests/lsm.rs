//! Text segments in strata-lsm's runtime: published, deleted from, merged and searched through
//! the same code as vector segments, checked against the reference scorer over a model.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{assert_matches_reference, corpus, reference, text_config, Row};
use strata_engine::bitset::Bitset;
use strata_lsm::directory::memory::MemoryDirectory;
use strata_lsm::files::IndexFiles;
use strata_lsm::merge::{self, Prepared};
use strata_lsm::segment_set::SegmentSet;
use strata_lsm::segment_type::{BuildWork, SegmentType};
use strata_text::{search, Bm25Params, Bm25Query, Memtable, Source, TextSegment};

fn global_top(files: &IndexFiles<TextSegment>, query: &[&str], k: usize) -> Vec<(u64, f64)> {
    let set = SegmentSet::open(files, None).unwrap();
    let sources: Vec<Source<'_>> =
        set.segments.iter().map(|s| Source::segment(&s.segment, s.deleted.as_ref()).unwrap()).collect();
    let q = Bm25Query::prepare(&sources, query, Bm25Params::default());
    let hits: Vec<(u64, f64)> = search(&sources, &q, k).hits.iter().map(|h| (h.id, h.score)).collect();
    // The trait's per-segment search, with the same global query, merged by score: same ids.
    let mut merged: Vec<(u64, f32)> = set
        .segments
        .iter()
        .flat_map(|s| {
            s.segment
                .search(&q, k, &(), s.deleted.as_ref())
                .into_iter()
                .map(|n| (s.segment.ids()[n.row as usize], n.distance))
                .collect::<Vec<_>>()
        })
        .collect();
    merged.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    merged.truncate(k);
    for (a, b) in hits.iter().zip(&merged) {
        assert!(common::close(a.1, -f64::from(b.1), 1e-6), "{a:?} vs {b:?}");
    }
    hits
}

#[test]
fn text_segments_publish_delete_merge_and_search_in_the_lsm() {
    let dir = MemoryDirectory::new();
    let files = IndexFiles::<TextSegment>::new(Arc::new(dir));
    let config = text_config();
    files.create(config).unwrap();
    let rows = corpus(11, 1200, 120, 2.0, 25);
    let mut model: BTreeMap<u64, &Row> = BTreeMap::new();
    let mut next_id = 1;
    // Eight flushed memtables of 150 rows.
    for chunk in rows.chunks(150) {
        let mut m = Memtable::new();
        for r in chunk {
            m.insert(r.id, &r.doc).unwrap();
            model.insert(r.id, r);
        }
        let built = TextSegment::build(&files, &config, m, &BuildWork::new(1)).unwrap();
        files.publish_segment(&built, next_id, vec![next_id], next_id + 1, |_| {}).unwrap();
        next_id += 1;
    }
    let queries: [&[&str]; 3] = [&["t0", "t3"], &["t7", "t1", "t50"], &["t2"]];
    let check = |model: &BTreeMap<u64, &Row>| {
        let live: Vec<&Row> = model.values().copied().collect();
        for query in queries {
            let all = reference(&live, query, 1.2, 0.75);
            assert_matches_reference(&global_top(&files, query, 10), &all, 10);
        }
    };
    check(&model);
    // VACUUM: every third row of the first two segments.
    let manifest = files.manifest().unwrap();
    for entry in &manifest.segments[..2] {
        let seg = files.open_segment(entry, true).unwrap();
        let mut deleted = Bitset::new(seg.rows() as usize);
        for row in (0..seg.rows()).step_by(3) {
            deleted.insert(row as usize);
            model.remove(&seg.id(row));
        }
        files.publish_deletions(entry, &deleted, next_id, |_| {}).unwrap();
    }
    check(&model);
    // Merges (and rebuilds) chosen by the runtime's policy until it has none left; each applies
    // the deletions of its inputs.
    let mut actions = 0;
    while let Prepared::Build(plan, work) =
        merge::prepare(&files, 150, merge::NOTHING_PENDING, 1, || next_id, next_id, |_| {}).unwrap()
    {
        next_id += 1;
        let built = (*work).run().unwrap();
        merge::finish(&files, plan, built, next_id, |_| {}).unwrap();
        check(&model);
        actions += 1;
        assert!(actions < 20);
    }
    assert!(actions > 0);
    assert!(files.manifest().unwrap().segments.len() < 8, "segments were merged");
    let set = SegmentSet::open(&files, None).unwrap();
    let live: u64 = set.segments.iter().map(|s| s.live_rows()).sum();
    assert_eq!(live, model.len() as u64);
}
