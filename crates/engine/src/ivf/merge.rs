//! Merging IVF indexes without their vectors.
//!
//! Segments of an index that keeps no vectors (exact distances come from the table) can only be
//! merged from what they hold: codes, factors and list centroids. When every input was encoded by
//! the same [`Quantizer`] (same rotation seed, centre, bits, scheme and metric) and without
//! residuals, a code means the same thing in every input, so the merge **copies codes and factors
//! bit for bit** — every estimate of a kept row is unchanged and quantisation error never
//! compounds, however often a row is merged.
//!
//! Lists are merged, not re-clustered: the kept members of every input list form a list with that
//! input's centroid; empty lists are dropped; then, while there are more lists than the target,
//! the **smallest list is folded into the list with the nearest centroid** (ties: lowest index),
//! whose centroid becomes the size-weighted mean of the two (re-normalised for spherical
//! metrics, as spherical k-means centroids are). Rows never move between clusters other than by
//! whole lists, so each row stays in a list whose centroid was near it. `O(L² · d)` for `L`
//! input lists.
//!
//! The result's position order is its row order (`ids` is the identity), so row `r` of the merged
//! index is [`Merged::origins`]`[r]`.

use half::f16;
use thiserror::Error;

use super::{Ivf, IvfView};
use crate::kernels;
use crate::metric::Metric;
use crate::quant::QuantizedCodes;

/// One input of a merge: an IVF index and which of its rows to keep.
pub struct MergeInput<'a, 'v> {
    /// The index.
    pub view: &'a IvfView<'v>,
    /// Whether row offset `row` of this input goes into the merged index.
    pub keep: &'a dyn Fn(usize) -> bool,
}

/// Why a merge was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MergeError {
    /// No input, or no row kept.
    #[error("an IVF merge needs at least one kept row")]
    Empty,
    /// Codes of different quantizers do not mean the same thing.
    #[error("input {0} was encoded with another quantizer than input 0")]
    QuantizerMismatch(usize),
    /// Residual codes depend on their list's centroid, which a merge changes.
    #[error("input {0} holds residual codes, which cannot be copied into merged lists")]
    Residual(usize),
    /// More rows than `u32` row offsets address.
    #[error("{0} rows exceed the u32 row offsets of an IVF index")]
    TooManyRows(usize),
}

/// A merged index and where each of its rows came from.
#[derive(Debug, Clone)]
pub struct Merged {
    /// The merged index (row order = position order).
    pub ivf: Ivf,
    /// `(input, row offset in that input)` of every merged row, in row order.
    pub origins: Vec<(usize, usize)>,
}

struct List {
    centroid: Vec<f32>,
    /// `(input, position in that input)`.
    members: Vec<(usize, usize)>,
}

/// Merges `inputs` into one index of at most `target_lists` lists (see the module docs).
pub fn merge(inputs: &[MergeInput<'_, '_>], target_lists: usize) -> Result<Merged, MergeError> {
    let first = inputs.first().ok_or(MergeError::Empty)?.view.quantizer();
    for (i, input) in inputs.iter().enumerate() {
        if input.view.quantizer() != first {
            return Err(MergeError::QuantizerMismatch(i));
        }
        if input.view.is_residual() {
            return Err(MergeError::Residual(i));
        }
    }
    let dims = first.dims();
    let mut lists = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        let (offsets, rows) = (input.view.offsets(), input.view.position_rows());
        for l in 0..input.view.lists() {
            let members: Vec<(usize, usize)> = (offsets[l] as usize..offsets[l + 1] as usize)
                .filter(|&pos| (input.keep)(rows[pos] as usize))
                .map(|pos| (i, pos))
                .collect();
            if !members.is_empty() {
                let centroid = input.view.centroids()[l * dims..(l + 1) * dims].iter().map(|h| h.to_f32()).collect();
                lists.push(List { centroid, members });
            }
        }
    }
    let total: usize = lists.iter().map(|l| l.members.len()).sum();
    if total == 0 {
        return Err(MergeError::Empty);
    }
    if u32::try_from(total).is_err() {
        return Err(MergeError::TooManyRows(total));
    }
    // Inner product clusters spherically over rows of equal norms only (`clusters_spherically`):
    // the inputs' centroids tell which (spherical ones have unit norm).
    let spherical = match first.metric() {
        Metric::Cosine => true,
        Metric::InnerProduct => lists.iter().all(|l| (kernels::dot(&l.centroid, &l.centroid) - 1.0).abs() < 1e-2),
        _ => false,
    };
    reduce_lists(&mut lists, target_lists.clamp(1, total), spherical);

    let mut offsets = Vec::with_capacity(lists.len() + 1);
    offsets.push(0u32);
    let mut picks = Vec::with_capacity(total);
    let mut origins = Vec::with_capacity(total);
    let mut centroids = Vec::with_capacity(lists.len() * dims);
    for list in &lists {
        for &(input, pos) in &list.members {
            picks.push((input, pos));
            origins.push((input, inputs[input].view.position_rows()[pos] as usize));
        }
        offsets.push(picks.len() as u32);
        centroids.extend(list.centroid.iter().map(|&v| f16::from_f32(v)));
    }
    let sources: Vec<_> = inputs.iter().map(|input| input.view.codes()).collect();
    let codes = QuantizedCodes::gather(dims, first.bits(), &sources, &picks);
    let ids = (0..total as u32).collect();
    let ivf = Ivf { quantizer: first.clone(), residual: false, centroids, offsets, ids, codes };
    Ok(Merged { ivf, origins })
}

/// Folds the smallest list into its nearest neighbour until at most `target` lists remain.
fn reduce_lists(lists: &mut Vec<List>, target: usize, spherical: bool) {
    while lists.len() > target {
        let smallest = (0..lists.len()).min_by_key(|&i| (lists[i].members.len(), i)).expect("more than one list");
        let from = &lists[smallest].centroid;
        let nearest = (0..lists.len())
            .filter(|&i| i != smallest)
            .map(|i| {
                let to = &lists[i].centroid;
                let distance = if spherical { -kernels::dot(from, to) } else { kernels::l2_squared(from, to) };
                (distance, i)
            })
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
            .map(|(_, i)| i)
            .expect("more than one list");
        let folded = lists.swap_remove(smallest);
        // swap_remove moved the last list into `smallest`; follow it.
        let nearest = if nearest == lists.len() { smallest } else { nearest };
        let into = &mut lists[nearest];
        let (a, b) = (folded.members.len() as f32, into.members.len() as f32);
        for (c, &f) in into.centroid.iter_mut().zip(&folded.centroid) {
            *c = (*c * b + f * a) / (a + b);
        }
        if spherical {
            crate::vector_math::normalize_in_place(&mut into.centroid);
        }
        into.members.extend(folded.members);
    }
}
