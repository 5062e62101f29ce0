//! Stored-form tests: sections round trip, and corrupt sections give errors, never panics.

use std::sync::OnceLock;

use proptest::prelude::*;

use super::tests::{base_store, graph, queries, stored_rows, DIMS};
use super::*;
use crate::bitset::RowPredicate;
use crate::metric::Metric;
use crate::store::{Elements, Query, VectorStore};

/// Sections copied into 8-byte aligned buffers, as a segment file would place them.
pub(super) struct Stored {
    sections: Vec<(u32, Vec<u64>, usize)>,
}

impl Stored {
    pub fn new(sections: Vec<(u32, Vec<u8>)>) -> Self {
        let sections = sections
            .into_iter()
            .map(|(tag, bytes)| {
                let mut words = vec![0u64; bytes.len().div_ceil(8)];
                bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(&bytes);
                (tag, words, bytes.len())
            })
            .collect();
        Self { sections }
    }

    pub fn get(&self, tag: u32) -> Option<&[u8]> {
        self.sections
            .iter()
            .find(|(t, _, _)| *t == tag)
            .map(|(_, words, len)| &bytemuck::cast_slice::<u64, u8>(words)[..*len])
    }

    pub fn view(&self, rows: usize) -> Result<HnswView<'_>, HnswError> {
        HnswView::from_sections(|tag| self.get(tag), rows)
    }
}

/// graph → sections → view → owned graph.
pub(super) fn round_trip(graph: &HnswGraph) -> HnswGraph {
    let stored = Stored::new(graph.sections());
    stored.view(graph.rows()).expect("a built graph's sections are valid").to_graph()
}

fn with_section(graph: &HnswGraph, tag: u32, edit: impl FnOnce(&mut Vec<u8>)) -> Stored {
    let mut sections = graph.sections();
    edit(&mut sections.iter_mut().find(|(t, _)| *t == tag).unwrap().1);
    Stored::new(sections)
}

fn set_u32(bytes: &mut [u8], index: usize, value: u32) {
    bytes[index * 4..index * 4 + 4].copy_from_slice(&value.to_le_bytes());
}

#[test]
fn sections_round_trip_and_search_identically() {
    let graph = graph(Metric::Cosine);
    let sections = graph.sections();
    let tags: Vec<u32> = sections.iter().map(|s| s.0).collect();
    assert_eq!(tags, vec![TAG_HEADER, TAG_LEVELS, TAG_LAYER0, TAG_UPPER_OFFSETS, TAG_UPPER]);
    assert_eq!(sections.iter().map(|s| s.1.len()).sum::<usize>(), graph.memory_bytes() + 32);
    let stored = Stored::new(sections);
    let view = stored.view(graph.rows()).unwrap();
    assert_eq!(view.to_graph(), *graph);
    let store = base_store(Metric::Cosine);
    for query in queries(Metric::Cosine).iter().take(20) {
        for ef in [10, DEFAULT_EF_SEARCH] {
            assert_eq!(
                view.search(&store, query, 10, ef, RowPredicate::default()),
                graph.view().search(&store, query, 10, ef, RowPredicate::default())
            );
        }
    }
}

#[test]
fn corrupt_sections_are_errors() {
    let graph = graph(Metric::Cosine);
    let rows = graph.rows();
    let m = graph.m();
    assert!(matches!(Stored::new(graph.sections()).view(rows + 1), Err(HnswError::BadHeader(_))));

    // Missing and truncated sections.
    for tag in [TAG_HEADER, TAG_LEVELS, TAG_LAYER0, TAG_UPPER_OFFSETS, TAG_UPPER] {
        let mut sections = graph.sections();
        sections.retain(|s| s.0 != tag);
        assert_eq!(Stored::new(sections).view(rows).unwrap_err(), HnswError::MissingSection { tag });
        let truncated = with_section(graph, tag, |b| {
            b.pop();
        });
        assert!(truncated.view(rows).is_err(), "truncated {tag:#x}");
        let shortened = with_section(graph, tag, |b| b.truncate(b.len().saturating_sub(4)));
        assert!(shortened.view(rows).is_err(), "shortened {tag:#x}");
    }

    // A neighbour id out of range, a neighbour after an empty slot, an absent neighbour: opening
    // does not read the lists, verify_links finds each, and a search skips the bad link.
    let links = |stored: &Stored| stored.view(rows).expect("lists are not read at open").verify_links();
    let edit = |index: usize, value: u32| with_section(graph, TAG_LAYER0, |b| set_u32(b, index, value));
    let out_of_range = edit(5 * 2 * m, rows as u32);
    assert!(matches!(links(&out_of_range), Err(HnswError::BadNeighbor { row: 5, layer: 0, .. })));
    assert!(!out_of_range.view(rows).unwrap().neighbors(5, 0).any(|n| n as usize >= rows), "a search skips it");
    assert!(matches!(links(&edit(7 * 2 * m, NO_NODE - 1)), Err(HnswError::BadNeighbor { .. })));
    let row = (0..rows).find(|&r| graph.view().neighbors(r, 0).count() < 2 * m).unwrap();
    let degree = graph.view().neighbors(row, 0).count();
    let mut sections = graph.sections();
    set_u32(&mut sections[2].1, row * 2 * m + degree - 1, NO_NODE);
    assert!(links(&Stored::new(sections.clone())).is_ok(), "a shorter list is valid");
    set_u32(&mut sections[2].1, row * 2 * m + degree, 0);
    assert!(matches!(links(&Stored::new(sections)), Err(HnswError::BadNeighbor { .. })), "a hole in a list");
    let upper_node = (0..rows).find(|&r| graph.view().level(r).unwrap() >= 1).unwrap();
    let low_node = (0..rows).find(|&r| graph.view().level(r).unwrap() == 0).unwrap() as u32;
    let offset = graph.sections()[3].1[upper_node * 4..upper_node * 4 + 4].try_into().map(u32::from_le_bytes).unwrap();
    let upper = with_section(graph, TAG_UPPER, |b| set_u32(b, offset as usize, low_node));
    assert!(matches!(links(&upper), Err(HnswError::BadNeighbor { layer: 1, .. })), "a layer-0 node on layer 1");
    assert!(!upper.view(rows).unwrap().neighbors(upper_node, 1).any(|n| n == low_node), "a search skips it");
    assert!(links(&Stored::new(graph.sections())).is_ok(), "a built graph's links are valid");

    // Entry point: out of range, and a node below the top level.
    let header = |word: usize, value: u32| with_section(graph, TAG_HEADER, |b| set_u32(b, word, value));
    assert_eq!(header(4, rows as u32).view(rows).unwrap_err(), HnswError::BadEntryPoint(rows as u32));
    assert_eq!(header(4, low_node).view(rows).unwrap_err(), HnswError::BadEntryPoint(low_node));
    assert!(matches!(header(0, 2).view(rows), Err(HnswError::BadHeader(_))));
    assert!(matches!(header(1, 1).view(rows), Err(HnswError::BadHeader(_))));
    assert!(header(1, 17).view(rows).is_err());
    assert!(matches!(header(3, 0).view(rows), Err(HnswError::BadHeader(_))));
    assert!(matches!(header(5, 40).view(rows), Err(HnswError::BadHeader(_))));
    assert!(matches!(header(7, 2).view(rows), Err(HnswError::BadHeader(_))), "an unknown flag");
    assert!(header(7, super::FLAG_UPPER_LIST).view(rows).unwrap().upper_list, "the upper-list flag is read");
    // Levels above the maximum; offsets that disagree with levels.
    let levels = with_section(graph, TAG_LEVELS, |b| b[3] = graph.view().max_level() + 1);
    assert!(matches!(levels.view(rows), Err(HnswError::BadLevel { row: 3, .. })));
    let offsets = with_section(graph, TAG_UPPER_OFFSETS, |b| set_u32(b, 10, 1 << 30));
    assert!(matches!(offsets.view(rows), Err(HnswError::BadOffset { .. })));

    // Misaligned bytes cannot be read in place.
    let sections = graph.sections();
    let stored = Stored::new(
        sections
            .iter()
            .map(|(t, b)| {
                let mut shifted = vec![0u8];
                shifted.extend_from_slice(b);
                (*t, shifted)
            })
            .collect(),
    );
    let misaligned = HnswView::from_sections(|tag| stored.get(tag).map(|b| &b[1..]), rows);
    assert!(matches!(misaligned, Err(HnswError::Unaligned { .. })));
}

/// A small graph (M = 4) for the fuzz test, over 300 rows.
/// A built graph with its sections.
type BuiltGraph = (HnswGraph, Vec<(u32, Vec<u8>)>);

fn small() -> &'static BuiltGraph {
    static SMALL: OnceLock<BuiltGraph> = OnceLock::new();
    SMALL.get_or_init(|| {
        let store = small_store();
        let graph = HnswGraph::build(&store, None, &HnswParams { m: 4, ef_construction: 16, seed: 3 }, 1).unwrap();
        let sections = graph.sections();
        (graph, sections)
    })
}

fn small_store() -> VectorStore<'static> {
    VectorStore::new(Elements::F32(&stored_rows(Metric::L2)[..300 * DIMS]), DIMS, Metric::L2).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn flipped_bytes_never_panic(section in 0usize..5, flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4)) {
        let (graph, sections) = small();
        let mut sections = sections.clone();
        let bytes = &mut sections[section].1;
        if !bytes.is_empty() {
            for (index, xor) in &flips {
                let i = index.index(bytes.len());
                bytes[i] ^= xor;
            }
        }
        let stored = Stored::new(sections);
        // Validation must return, Ok or Err; an accepted view must search without panicking and
        // return only nodes of the graph, and a full list when its links verify too (damaged
        // links are skipped, which may leave fewer nodes reachable).
        if let Ok(view) = stored.view(graph.rows()) {
            let store = small_store();
            let query = Query::new(&stored_rows(Metric::L2)[9900 * DIMS..9901 * DIMS], Metric::L2);
            let found = view.search(&store, &query, 10, 20, RowPredicate::default());
            prop_assert!(found.len() <= 10);
            if view.verify_links().is_ok() {
                prop_assert_eq!(found.len(), 10.min(view.node_count()));
            }
            prop_assert!(found.iter().all(|n| view.level(n.row as usize).is_some()));
        }
    }
}
