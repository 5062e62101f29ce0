//! Rows as an index takes them in: a row's key (its heap TID packed into 64 bits) and the stored
//! form of a row's vector (what INSERT, CREATE INDEX and heap reads put in memtables and
//! segments). CREATE INDEX's chunks of rows are in [`crate::build_rows`].

use strata_engine::filter::{FilterValue, RowError};
use strata_engine::metric::Metric;
use strata_engine::vector_math::normalize_in_place;
use thiserror::Error;

use crate::manifest::IndexConfig;

/// A heap TID packed into the 64-bit row key memtables, segments and status lists hold: the block
/// number in bits 16–47, the offset in the low 16 bits (so keys order as TIDs do, and a valid
/// TID, whose offset is at least 1, is never 0, the status lists' "removed").
pub fn pack_tid(block: u32, offset: u16) -> u64 {
    (u64::from(block) << 16) | u64::from(offset)
}

/// The `(block, offset)` of a key [`pack_tid`] made.
pub fn unpack_tid(packed: u64) -> (u32, u16) {
    ((packed >> 16) as u32, (packed & 0xFFFF) as u16)
}

/// A row whose vector has other dimensions than its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("expected {expected} dimensions, not {found}")]
pub struct WrongDimensions {
    /// The index's dimensions.
    pub expected: usize,
    /// The row's.
    pub found: usize,
}

/// `values` in stored form for an index configured as `config`: as given, normalised under
/// cosine distance unless the index stores `halfvec` rows (those stay as given, see
/// [`strata_engine::store`]). `None` for a vector with a NaN or infinite element, which no index can
/// order, and for a zero vector under cosine, which has no direction (neither is indexed, as in
/// pgvector); an error when the dimensions are not the index's.
pub fn stored_form(config: &IndexConfig, mut values: Vec<f32>) -> Result<Option<Vec<f32>>, WrongDimensions> {
    if values.len() != config.dims as usize {
        return Err(WrongDimensions { expected: config.dims as usize, found: values.len() });
    }
    // Packed bit rows hold raw bit patterns, not numbers.
    if config.element != strata_engine::store::ElementKind::Bits && values.iter().any(|v| !v.is_finite()) {
        return Ok(None);
    }
    let normalised = |values: &mut [f32]| match config.element {
        strata_engine::store::ElementKind::SparseF32 => strata_engine::sparse_rows::normalize_in_place(values),
        strata_engine::store::ElementKind::F16 => values.iter().any(|&v| v != 0.0),
        _ => normalize_in_place(values),
    };
    if config.metric == Metric::Cosine && !normalised(&mut values) {
        return Ok(None);
    }
    Ok(Some(values))
}

/// The memtable row of a row whose vector in stored form ([`stored_form`]) is `vector` and
/// whose filter columns hold `filters`: the vector, then [`FilterSchema::encode_row`]'s words as
/// `f32` bit patterns ([`IndexConfig::row_words`] in all). An error, naming the column, for
/// filter values the index cannot hold (an array longer than `max_array_elements`).
///
/// [`FilterSchema::encode_row`]: strata_engine::filter::FilterSchema::encode_row
pub fn memtable_row(
    config: &IndexConfig,
    mut vector: Vec<f32>,
    filters: &[FilterValue<'_>],
) -> Result<Vec<f32>, RowError> {
    if config.filters.is_empty() && filters.is_empty() {
        return Ok(vector);
    }
    let mut words = Vec::with_capacity(config.filters.row_words());
    config.filters.encode_row(filters, &mut words)?;
    vector.extend(words.into_iter().map(f32::from_bits));
    Ok(vector)
}

#[cfg(test)]
mod tests {
    use strata_engine::segment::IndexKind;
    use strata_engine::store::ElementKind;

    use super::*;

    fn config(metric: Metric) -> IndexConfig {
        IndexConfig {
            dims: 2,
            metric,
            element: ElementKind::F32,
            kind: IndexKind::Flat.into(),
            memtable_rows: 8,
            rerank_from_heap: false,
            filters: strata_engine::filter::FilterSchema::default(),
        }
    }

    #[test]
    fn stored_form_checks_and_normalises() {
        let (l2, cosine) = (config(Metric::L2), config(Metric::Cosine));
        assert_eq!(stored_form(&l2, vec![3.0, 4.0]), Ok(Some(vec![3.0, 4.0])));
        assert_eq!(stored_form(&cosine, vec![3.0, 4.0]), Ok(Some(vec![0.6, 0.8])));
        assert_eq!(stored_form(&cosine, vec![0.0, 0.0]), Ok(None), "a zero vector has no direction");
        assert_eq!(stored_form(&l2, vec![0.0, 0.0]), Ok(Some(vec![0.0, 0.0])));
        assert_eq!(stored_form(&l2, vec![f32::NAN, 1.0]), Ok(None));
        assert_eq!(stored_form(&l2, vec![f32::INFINITY, 1.0]), Ok(None));
        let wrong = stored_form(&l2, vec![1.0; 3]);
        assert_eq!(wrong, Err(WrongDimensions { expected: 2, found: 3 }));
        assert_eq!(wrong.unwrap_err().to_string(), "expected 2 dimensions, not 3");
    }

    #[test]
    fn halfvec_rows_stay_as_given_under_cosine() {
        let halfvec = IndexConfig { element: ElementKind::F16, ..config(Metric::Cosine) };
        assert_eq!(stored_form(&halfvec, vec![3.0, 4.0]), Ok(Some(vec![3.0, 4.0])));
        assert_eq!(stored_form(&halfvec, vec![0.0, 0.0]), Ok(None), "a zero vector has no direction");
        assert_eq!(stored_form(&halfvec, vec![f32::NAN, 1.0]), Ok(None));
    }

    proptest::proptest! {
        #[test]
        fn packed_tids_round_trip_and_order_as_tids(a: (u32, u16), b: (u32, u16)) {
            proptest::prop_assert_eq!(unpack_tid(pack_tid(a.0, a.1)), a);
            proptest::prop_assert_eq!(pack_tid(a.0, a.1).cmp(&pack_tid(b.0, b.1)), a.cmp(&b));
        }
    }

    #[test]
    fn the_largest_tid_keeps_its_bits() {
        assert_eq!(pack_tid(u32::MAX, u16::MAX), 0xFFFF_FFFF_FFFF);
        assert_eq!(pack_tid(1, 1), 0x1_0001);
        assert_ne!(pack_tid(0, 1), 0, "offsets start at 1: no valid TID packs to 0");
    }
}
