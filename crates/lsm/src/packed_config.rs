//! [`PackedConfig`]: an index's configuration as plain data of fixed layout, for shared memory
//! (pg_strata keeps one in each index's directory slot, readable by every process).

use strata_engine::filter::row::MAX_ROW_COLUMNS;
use strata_engine::filter::{ColumnType, FilterSchema, FilterSpec};
use strata_engine::metric::Metric;
use strata_engine::store::ElementKind;
use strata_engine::UnknownCode;

use crate::manifest::{ConfigKind, IndexConfig};

/// An [`IndexConfig`] as plain data: the metric, element type and kind as their engine codes
/// (`#[repr(u8)]`), the kind's parameters as META stores them. All zeros is a valid value (an
/// unused slot); [`PackedConfig::unpack`] of what [`PackedConfig::pack`] wrote gives back the
/// configuration.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackedConfig {
    dims: u32,
    metric: u8,
    element: u8,
    kind: u8,
    bits: u8,
    kind_a: u32,
    kind_b: u32,
    memtable_rows: u32,
    rerank_from_heap: bool,
    filter_columns: u8,
    filter_types: [u8; MAX_ROW_COLUMNS],
    filter_slots: [u16; MAX_ROW_COLUMNS],
}

impl Default for PackedConfig {
    fn default() -> Self {
        Self {
            dims: 0,
            metric: 0,
            element: 0,
            kind: 0,
            bits: 0,
            kind_a: 0,
            kind_b: 0,
            memtable_rows: 0,
            rerank_from_heap: false,
            filter_columns: 0,
            filter_types: [0; MAX_ROW_COLUMNS],
            filter_slots: [0; MAX_ROW_COLUMNS],
        }
    }
}

impl PackedConfig {
    /// Packs `config`.
    pub fn pack(config: &IndexConfig) -> Self {
        let (code, bits, a, b) = config.kind.parts();
        let (mut filter_types, mut filter_slots) = ([0; MAX_ROW_COLUMNS], [0; MAX_ROW_COLUMNS]);
        for (c, spec) in config.filters.columns().iter().enumerate() {
            filter_types[c] = spec.ty as u8;
            filter_slots[c] = spec.slots;
        }
        Self {
            dims: config.dims,
            metric: config.metric as u8,
            element: config.element as u8,
            kind: code,
            bits,
            kind_a: a,
            kind_b: b,
            memtable_rows: config.memtable_rows,
            rerank_from_heap: config.rerank_from_heap,
            filter_columns: config.filters.columns().len() as u8,
            filter_types,
            filter_slots,
        }
    }

    /// The configuration packed here; an error for a code [`PackedConfig::pack`] does not write.
    pub fn unpack(self) -> Result<IndexConfig, UnknownCode> {
        let columns = usize::from(self.filter_columns).min(MAX_ROW_COLUMNS);
        let specs = (0..columns)
            .map(|c| Ok(FilterSpec { ty: ColumnType::try_from(self.filter_types[c])?, slots: self.filter_slots[c] }))
            .collect::<Result<Vec<_>, UnknownCode>>()?;
        let filters = FilterSchema::new(&specs)
            .map_err(|_| UnknownCode { what: "filter column slots", code: self.filter_columns })?;
        Ok(IndexConfig {
            dims: self.dims,
            metric: Metric::try_from(self.metric)?,
            element: ElementKind::try_from(self.element)?,
            kind: ConfigKind::from_parts(self.kind, self.bits, self.kind_a, self.kind_b)?,
            memtable_rows: self.memtable_rows,
            rerank_from_heap: self.rerank_from_heap,
            filters,
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use strata_engine::segment::IndexKind;

    use super::*;

    fn kinds() -> impl Strategy<Value = ConfigKind> {
        prop_oneof![
            Just(IndexKind::Flat.into()),
            prop::sample::select(vec![1u8, 2, 4]).prop_map(|bits| IndexKind::QuantizedFlat { bits }.into()),
            (0u32..5000, prop::sample::select(vec![1u8, 2, 4])).prop_map(|(lists, bits)| IndexKind::Ivf {
                lists,
                bits
            }
            .into()),
            (2u32..100, 4u32..1000).prop_map(|(m, ef_construction)| IndexKind::Hnsw { m, ef_construction }.into()),
            (0u32..10_000, 0u32..=1000).prop_map(|(k1_milli, b_milli)| ConfigKind::Bm25 { k1_milli, b_milli }),
        ]
    }

    proptest! {
        #[test]
        fn unpack_gives_back_what_pack_wrote(
            dims in 1u32..16_000,
            metric in prop::sample::select(Metric::ALL.to_vec()),
            element in prop::sample::select(vec![ElementKind::F32, ElementKind::F16]),
            kind in kinds(),
            memtable_rows in 1u32..1_000_000,
            rerank_from_heap in any::<bool>(),
            filters in prop::collection::vec((prop::sample::select(ColumnType::ALL.to_vec()), 1u16..1025), 0..=MAX_ROW_COLUMNS),
        ) {
            let specs: Vec<FilterSpec> = filters
                .into_iter()
                .map(|(ty, slots)| FilterSpec { ty, slots: if ty.is_array() { slots } else { 0 } })
                .collect();
            let filters = FilterSchema::new(&specs).unwrap();
            let config = IndexConfig { dims, metric, element, kind, memtable_rows, rerank_from_heap, filters };
            prop_assert_eq!(PackedConfig::pack(&config).unpack().unwrap(), config);
        }
    }

    #[test]
    fn codes_that_pack_never_writes_are_errors() {
        let config = IndexConfig {
            dims: 3,
            metric: Metric::L2,
            element: ElementKind::F32,
            kind: IndexKind::Flat.into(),
            memtable_rows: 10,
            rerank_from_heap: false,
            filters: strata_engine::filter::FilterSchema::default(),
        };
        let mut packed = PackedConfig::pack(&config);
        packed.metric = 200;
        assert!(packed.unpack().is_err());
        let mut packed = PackedConfig::pack(&config);
        packed.kind = 5;
        assert!(packed.unpack().is_err(), "kind 5 names no kind");
    }
}
