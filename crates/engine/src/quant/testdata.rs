//! Shared test fixtures: the demo embeddings and brute-force ground truth.
//!
//! `data/demo/embeddings.f16` holds 10,000 × 384 L2-normalised MiniLM embeddings. Rows `0..9900`
//! are the base set and rows `9900..10000` the held-out queries. Debug builds (`cargo test`
//! without `--release`) use a prefix (1,000 base rows, 20 queries) to stay fast; `--release`
//! uses everything.

use std::sync::OnceLock;

use half::f16;

use crate::metric::Metric;
use crate::store::{Elements, VectorStore};
use crate::topk::Neighbor;

/// Dimensions of the demo embeddings.
pub(crate) const DIMS: usize = 384;
const ROWS: usize = 10_000;
const BASE: usize = 9_900;

/// All 10,000 demo rows.
pub(crate) fn demo() -> &'static [f16] {
    static DATA: OnceLock<Vec<f16>> = OnceLock::new();
    DATA.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/demo/embeddings.f16");
        let bytes = std::fs::read(path).expect("data/demo/embeddings.f16 is part of the repository");
        assert_eq!(bytes.len(), ROWS * DIMS * 2);
        bytes.chunks_exact(2).map(|b| f16::from_le_bytes([b[0], b[1]])).collect()
    })
}

/// `(base rows, queries)` used by this build.
pub(crate) fn sizes() -> (usize, usize) {
    if cfg!(debug_assertions) {
        (1_000, 20)
    } else {
        (BASE, ROWS - BASE)
    }
}

/// The base rows as an `f16` store under `metric`.
pub(crate) fn base_store(metric: Metric) -> VectorStore<'static> {
    let (base, _) = sizes();
    VectorStore::new(Elements::F16(&demo()[..base * DIMS]), DIMS, metric).unwrap()
}

/// The held-out queries (as `f32`).
pub(crate) fn queries() -> Vec<Vec<f32>> {
    let (_, n) = sizes();
    (BASE..BASE + n).map(|r| demo()[r * DIMS..(r + 1) * DIMS].iter().map(|x| x.to_f32()).collect()).collect()
}

/// Exact top-`k` by brute force with [`VectorStore::distance`] over accepted rows.
pub(crate) use crate::testdata::brute_force;

/// `|found ∩ truth| / |truth|` by row.
pub(crate) fn recall(found: &[Neighbor], truth: &[Neighbor]) -> f64 {
    if truth.is_empty() {
        return 1.0;
    }
    let hits = truth.iter().filter(|t| found.iter().any(|f| f.row == t.row)).count();
    hits as f64 / truth.len() as f64
}

/// Sections packed into one 64-byte-aligned buffer, as a segment file would hold them.
pub(crate) struct Arena {
    words: Vec<u64>,
    spans: Vec<(u32, usize, usize)>,
}

impl Arena {
    /// Packs `sections`, each starting on a 64-byte boundary.
    pub(crate) fn pack(sections: &[(u32, Vec<u8>)]) -> Self {
        let mut bytes: Vec<u8> = Vec::new();
        let mut spans = Vec::new();
        for (tag, data) in sections {
            bytes.resize(bytes.len().div_ceil(64) * 64, 0);
            spans.push((*tag, bytes.len(), data.len()));
            bytes.extend_from_slice(data);
        }
        // A Vec<u64> is 8-byte aligned; over-allocate to place the base on 64 bytes.
        let mut words = vec![0u64; bytes.len().div_ceil(8) + 8];
        let shift = (64 - (words.as_ptr() as usize % 64)) % 64 / 8;
        bytemuck::cast_slice_mut::<u64, u8>(&mut words[shift..])[..bytes.len()].copy_from_slice(&bytes);
        let spans = spans.into_iter().map(|(t, o, l)| (t, o + shift * 8, l)).collect();
        Self { words, spans }
    }

    /// The section with `tag`.
    pub(crate) fn get(&self, tag: u32) -> Option<&[u8]> {
        let bytes: &[u8] = bytemuck::cast_slice(&self.words);
        self.spans.iter().find(|s| s.0 == tag).map(|&(_, o, l)| &bytes[o..o + l])
    }
}
