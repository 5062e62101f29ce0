//! Merging segments that keep no vectors.
//!
//! A segment without vectors cannot be rebuilt from its rows, so merges and rebuilds of such
//! segments go through [`crate::ivf::merge`]: codes and factors are copied bit for bit and lists
//! are merged (see that module for the guarantees). Deleted rows are left out. Every input must
//! be an IVF segment without vectors, encoded by the same quantizer; an index guarantees that by
//! encoding every segment with the quantizer of the first one it built.

use super::build::{BuildError, BuildOptions, BuiltSegment};
use super::meta::{IndexKind, SegmentMeta};
use super::{IndexView, Segment};
use crate::bitset::Bitset;
use crate::ivf::{self, MergeInput};

/// One segment to merge and the rows VACUUM deleted from it.
pub struct MergeSource<'a> {
    /// The segment.
    pub segment: &'a Segment,
    /// Rows to leave out (`None`: keep every row).
    pub deleted: Option<&'a Bitset>,
}

/// Merges `sources` into one IVF segment without vectors, with at most the lists of
/// `options.kind` (`Ivf { lists, .. }`; the bits come from the inputs' quantizer). Row
/// identifiers follow their rows. Errors: `options` is not an IVF kind without vectors, an input
/// keeps vectors or is not IVF, the inputs' quantizers differ, or no row is kept.
pub fn merge_segments(options: &BuildOptions, sources: &[MergeSource<'_>]) -> Result<BuiltSegment, BuildError> {
    let refuse = |reason: String| BuildError::Parameters { kind: options.kind.name(), reason };
    let IndexKind::Ivf { lists: target, .. } = options.kind else {
        return Err(refuse("only IVF segments without vectors are merged from their codes".into()));
    };
    if options.store_vectors {
        return Err(refuse("a merge from codes cannot produce stored vectors".into()));
    }
    let mut views = Vec::with_capacity(sources.len());
    for (i, source) in sources.iter().enumerate() {
        let dependent = source.segment.cell.borrow_dependent();
        match (&dependent.index, dependent.store.is_some()) {
            (IndexView::Ivf(view), false) => views.push(view),
            _ => return Err(refuse(format!("merge input {i} is not an IVF segment without vectors"))),
        }
        if dependent.meta.metric != options.metric {
            return Err(refuse(format!("merge input {i} has another metric")));
        }
    }
    let keeps: Vec<Box<dyn Fn(usize) -> bool + '_>> = sources
        .iter()
        .map(|source| -> Box<dyn Fn(usize) -> bool + '_> {
            match source.deleted {
                Some(deleted) => Box::new(move |row| !deleted.contains(row)),
                None => Box::new(|_| true),
            }
        })
        .collect();
    let inputs: Vec<MergeInput<'_, '_>> =
        views.iter().zip(&keeps).map(|(view, keep)| MergeInput { view, keep: keep.as_ref() }).collect();
    let merged = ivf::merge(&inputs, target as usize).map_err(|e| refuse(e.to_string()))?;
    let ids: Vec<u64> = merged.origins.iter().map(|&(input, row)| sources[input].segment.id(row)).collect();
    let quantizer = merged.ivf.view().quantizer().clone();
    let meta = SegmentMeta {
        kind: IndexKind::Ivf { lists: merged.ivf.lists() as u32, bits: quantizer.bits() },
        metric: options.metric,
        element: options.element,
        dims: quantizer.dims() as u32,
        rows: ids.len() as u64,
        seed: quantizer.seed(),
        vectors_stored: false,
    };
    Ok(BuiltSegment::from_parts(meta, ids, merged.ivf.into_sections()))
}
