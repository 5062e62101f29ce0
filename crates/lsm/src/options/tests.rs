//! Option resolution, opclass codes and configurations against hand-computed ones.

use super::*;

#[test]
fn filter_opclasses_are_told_apart() {
    assert_eq!(opclass_role(FILTER_OPCLASS_CODE), Ok(OpclassRole::Filter));
    let code = opclass_code(Metric::Cosine, ColumnType::Vector);
    assert_eq!(opclass_role(code), Ok(OpclassRole::Vector { metric: Metric::Cosine, column: ColumnType::Vector }));
    assert!(opclass_role(FILTER_OPCLASS_CODE + 1).is_err(), "bit 12 names no vector opclass");
}

#[test]
fn opclass_codes_round_trip() {
    for metric in Metric::ALL {
        for column in ColumnType::ALL {
            assert_eq!(decode_opclass_code(opclass_code(metric, column)), Ok((metric, column)));
        }
    }
    // Codes of indexes made when the code held an element type (only f32 and f16 existed then)
    // read back as the same types.
    for element in [ElementKind::F32, ElementKind::F16] {
        let code = (Metric::Cosine as i32) | ((element as i32) << 4);
        assert_eq!(decode_opclass_code(code), Ok((Metric::Cosine, ColumnType::of_element(element))));
    }
    assert!(decode_opclass_code(0xF).is_err(), "no metric has code 15");
    assert!(decode_opclass_code(0xF0).is_err(), "no column type has code 15");
}

#[test]
fn each_access_method_defaults_to_its_kind_and_stored_options_resolve_like_given_ones() {
    let kinds = Flavor::ALL.map(|flavor| kind(&IndexOptions::without_clause(flavor)));
    assert_eq!(
        kinds,
        [
            IndexKind::Hnsw { m: 16, ef_construction: 64 },
            IndexKind::Hnsw { m: 16, ef_construction: 64 },
            IndexKind::Ivf { lists: 0, bits: 4 }
        ]
    );
    for (at, flavor) in Flavor::ALL.into_iter().enumerate() {
        assert_eq!(flavor as usize, at);
    }
    let defaults = INT_OPTIONS.map(|o| o.default);
    assert_eq!(IndexOptions::stored(None, defaults, None).resolve(), IndexOptions::default().resolve());
    let stored = IndexOptions::stored(Some("flat".into()), [2, 16, 64, 0, 500, 32, 0], Some("index".into()));
    let given = IndexOptions { bits: Some(2), memtable_rows: Some(500), ..with_kind("flat") };
    assert_eq!(stored.resolve(), given.resolve());
    assert_eq!(stored.resolve().unwrap().kind, IndexKind::QuantizedFlat { bits: 2 });
    let bad = IndexOptions::stored(None, [-1, 16, 8, 0, 500, 32, 0], None);
    assert_eq!(bad.resolve(), Err(OptionError::EfConstructionBelowM { m: 16, ef_construction: 8 }));
}

fn config(options: &IndexOptions) -> Result<IndexConfig, String> {
    IndexConfig::from_options(3, Metric::Cosine, ColumnType::Halfvec, options).map_err(|e| e.to_string())
}

fn kind(options: &IndexOptions) -> IndexKind {
    options.resolve().unwrap().kind
}

fn with_kind(name: &str) -> IndexOptions {
    IndexOptions { kind: Some(name.into()), ..IndexOptions::default() }
}

#[test]
fn defaults() {
    let config = config(&IndexOptions::default()).unwrap();
    assert_eq!(
        config,
        IndexConfig {
            dims: 3,
            metric: Metric::Cosine,
            element: ElementKind::F16,
            kind: IndexKind::Hnsw { m: 16, ef_construction: 64 }.into(),
            memtable_rows: 100_000,
            rerank_from_heap: false,
            filters: strata_engine::filter::FilterSchema::default(),
        }
    );
    assert_eq!(kind(&with_kind("ivf")), IndexKind::Ivf { lists: 0, bits: 4 });
    assert_eq!(kind(&with_kind("flat")), IndexKind::Flat);
    // PostgreSQL hands over the registered defaults of options not given.
    let registered = IndexOptions {
        kind: Some("hnsw".into()),
        bits: Some(BITS.default),
        m: Some(M.default),
        ef_construction: Some(EF_CONSTRUCTION.default),
        lists: Some(LISTS.default),
        memtable_rows: Some(MEMTABLE_ROWS.default),
        rerank: Some("index".into()),
        max_array_elements: Some(MAX_ARRAY_ELEMENTS.default),
        max_nnz: Some(MAX_NNZ.default),
    };
    assert_eq!(registered.resolve(), IndexOptions::default().resolve());
    for kind in ["ivf", "flat"] {
        let registered = IndexOptions { kind: Some(kind.into()), ..registered.clone() };
        assert_eq!(registered.resolve(), with_kind(kind).resolve());
    }
}

/// `sparsevec` beyond 16,000 dimensions, or with `max_nnz`, stores packed rows (flat and hnsw
/// only); `max_nnz` means nothing for other columns.
#[test]
fn wide_sparsevec_indexes_store_packed_rows() {
    use strata_engine::store::ElementKind;
    let splade =
        IndexConfig::from_options(30_522, Metric::InnerProduct, ColumnType::Sparsevec, &IndexOptions::default())
            .unwrap();
    assert_eq!((splade.element, splade.dims), (ElementKind::SparseF32, 1 + 2 * 256));
    let wider = IndexOptions { max_nnz: Some(1000), ..with_kind("flat") };
    let config = IndexConfig::from_options(30_522, Metric::Cosine, ColumnType::Sparsevec, &wider).unwrap();
    assert_eq!((config.element, config.dims, config.vector_kind()), (ElementKind::SparseF32, 2001, IndexKind::Flat));
    let narrow = IndexOptions { max_nnz: Some(8), ..IndexOptions::default() };
    assert_eq!(IndexConfig::from_options(100, Metric::L2, ColumnType::Sparsevec, &narrow).unwrap().dims, 17);
    assert_eq!(
        IndexConfig::from_options(100, Metric::L2, ColumnType::Sparsevec, &IndexOptions::default()).unwrap().element,
        ElementKind::F32,
        "densified when it fits and max_nnz is not given"
    );
    let ivf = IndexConfig::from_options(30_522, Metric::L2, ColumnType::Sparsevec, &with_kind("ivf")).unwrap_err();
    assert_eq!(ivf, OptionError::PackedSparseKind("ivf"));
    assert_eq!(
        IndexConfig::from_options(3, Metric::L2, ColumnType::Vector, &narrow).unwrap_err(),
        OptionError::MaxNnzNotSparse
    );
    let too_many = IndexOptions { max_nnz: Some(8000), ..IndexOptions::default() };
    assert!(IndexConfig::from_options(30_522, Metric::L2, ColumnType::Sparsevec, &too_many).is_err());
}

#[test]
fn filter_columns_take_the_array_option() {
    use strata_engine::filter::ColumnType as Filter;
    let base = config(&IndexOptions::default()).unwrap();
    let types = [Filter::Int8, Filter::TextArray];
    let config = base.with_filter_columns(&types, &IndexOptions::default()).unwrap();
    let slots: Vec<(Filter, u16)> = config.filters.columns().iter().map(|s| (s.ty, s.slots)).collect();
    assert_eq!(slots, vec![(Filter::Int8, 0), (Filter::TextArray, 32)]);
    assert_eq!(config.row_words(), 3 + 1 + 2 + 65);
    let options = IndexOptions { max_array_elements: Some(4), ..IndexOptions::default() };
    assert_eq!(base.with_filter_columns(&types, &options).unwrap().filters.columns()[1].slots, 4);
    let options = IndexOptions { max_array_elements: Some(0), ..IndexOptions::default() };
    assert_eq!(
        base.with_filter_columns(&types, &options).unwrap_err().to_string(),
        "value 0 out of bounds for option \"max_array_elements\""
    );
    let too_many = base.with_filter_columns(&[Filter::Int4; 32], &IndexOptions::default()).unwrap_err();
    assert_eq!(too_many.to_string(), "an index can have at most 31 filter columns, not 32");
    assert_eq!(base.with_filter_columns(&[], &IndexOptions::default()).unwrap(), base);
}

#[test]
fn values_given() {
    let ivf = IndexOptions {
        kind: Some("ivf".into()),
        bits: Some(2),
        lists: Some(100),
        memtable_rows: Some(64),
        rerank: Some("heap".into()),
        ..IndexOptions::default()
    };
    assert_eq!(
        ivf.resolve().unwrap(),
        ResolvedOptions { kind: IndexKind::Ivf { lists: 100, bits: 2 }, memtable_rows: 64, rerank_from_heap: true }
    );
    let flat = |bits| IndexOptions { bits: Some(bits), ..with_kind("flat") };
    assert_eq!(kind(&flat(0)), IndexKind::Flat);
    for bits in [1, 2, 4] {
        assert_eq!(kind(&flat(bits)), IndexKind::QuantizedFlat { bits: bits as u8 });
    }
    let hnsw = IndexOptions { m: Some(8), ef_construction: Some(8), ..IndexOptions::default() };
    assert_eq!(kind(&hnsw), IndexKind::Hnsw { m: 8, ef_construction: 8 });
    let rerank_index = IndexOptions { rerank: Some("index".into()), ..with_kind("flat") };
    assert!(!rerank_index.resolve().unwrap().rerank_from_heap);
}

/// Every error, with the message `CREATE INDEX` reports (tests/regress/expected/06_index.out).
#[test]
fn errors() {
    let cases = [
        (with_kind("bogus"), "invalid value for strata option \"kind\": \"bogus\" (expected hnsw, ivf or flat)"),
        (
            IndexOptions { rerank: Some("disk".into()), ..IndexOptions::default() },
            "invalid value for strata option \"rerank\": \"disk\" (expected index or heap)",
        ),
        (
            IndexOptions { rerank: Some("heap".into()), ..with_kind("hnsw") },
            "rerank = 'heap' applies to kind = 'ivf' only, not kind = 'hnsw'",
        ),
        (
            IndexOptions { rerank: Some("heap".into()), ..with_kind("flat") },
            "rerank = 'heap' applies to kind = 'ivf' only, not kind = 'flat'",
        ),
        (IndexOptions { bits: Some(4), ..IndexOptions::default() }, "option \"bits\" does not apply to kind = 'hnsw'"),
        (
            IndexOptions { bits: Some(3), ..with_kind("ivf") },
            "option \"bits\" must be 1, 2 or 4 for kind = 'ivf', not 3",
        ),
        (
            IndexOptions { bits: Some(0), ..with_kind("ivf") },
            "option \"bits\" must be 1, 2 or 4 for kind = 'ivf', not 0",
        ),
        (
            IndexOptions { bits: Some(3), ..with_kind("flat") },
            "option \"bits\" must be 0, 1, 2 or 4 for kind = 'flat', not 3",
        ),
        (
            IndexOptions { m: Some(16), ef_construction: Some(8), ..IndexOptions::default() },
            "ef_construction (8) must be at least m (16)",
        ),
        (IndexOptions { m: Some(1000), ..IndexOptions::default() }, "value 1000 out of bounds for option \"m\""),
        (
            IndexOptions { memtable_rows: Some(1), ..IndexOptions::default() },
            "value 1 out of bounds for option \"memtable_rows\"",
        ),
        (
            IndexOptions { ef_construction: Some(5000), ..IndexOptions::default() },
            "value 5000 out of bounds for option \"ef_construction\"",
        ),
        (IndexOptions { lists: Some(-1), ..with_kind("ivf") }, "value -1 out of bounds for option \"lists\""),
        (IndexOptions { bits: Some(8), ..with_kind("flat") }, "value 8 out of bounds for option \"bits\""),
    ];
    for (options, message) in cases {
        assert_eq!(config(&options).unwrap_err(), message, "{options:?}");
    }
    let no_dims = IndexConfig::from_options(0, Metric::L2, ColumnType::Vector, &IndexOptions::default());
    assert_eq!(no_dims.unwrap_err().to_string(), "column does not have dimensions");
    let too_many = IndexConfig::from_options(16_001, Metric::L2, ColumnType::Vector, &IndexOptions::default());
    assert_eq!(too_many.unwrap_err(), OptionError::TooManyDimensions(16_001));
}

#[test]
fn l1_only_with_exact_kinds() {
    let l1 = |options: &IndexOptions| IndexConfig::from_options(3, Metric::L1, ColumnType::Vector, options);
    assert!(matches!(l1(&IndexOptions::default()).unwrap().vector_kind(), IndexKind::Hnsw { .. }));
    assert_eq!(l1(&with_kind("flat")).unwrap().vector_kind(), IndexKind::Flat);
    assert_eq!(
        l1(&with_kind("ivf")).unwrap_err().to_string(),
        "kind = 'ivf' does not support the <+> distance (L1); use kind = 'hnsw' or kind = 'flat' without bits"
    );
    let quantized = IndexOptions { bits: Some(4), ..with_kind("flat") };
    assert_eq!(
        l1(&quantized).unwrap_err(),
        OptionError::MetricNotSupported { kind: "flat", bits: " with bits", operator: "<+>", name: "L1" }
    );
    for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
        assert!(IndexConfig::from_options(3, metric, ColumnType::Vector, &quantized).is_ok());
        assert!(IndexConfig::from_options(3, metric, ColumnType::Sparsevec, &quantized).is_ok());
    }
}

#[test]
fn bit_columns_take_hamming_and_jaccard_on_exact_kinds_and_ivf() {
    for metric in [Metric::Hamming, Metric::Jaccard] {
        let config = IndexConfig::from_options(64, metric, ColumnType::Bit, &with_kind("flat")).unwrap();
        assert_eq!(
            (config.element, config.vector_kind(), config.dims),
            (ElementKind::Bits, IndexKind::Flat, 3),
            "packed: length + 2 words"
        );
        assert!(matches!(
            IndexConfig::from_options(64, metric, ColumnType::Bit, &IndexOptions::default()).unwrap().vector_kind(),
            IndexKind::Hnsw { .. }
        ));
        // IVF lists of packed bit rows: exact distances, no codes (bits 0), no heap rerank.
        let ivf = IndexConfig::from_options(65, metric, ColumnType::Bit, &with_kind("ivf")).unwrap();
        assert_eq!(
            (ivf.element, ivf.vector_kind(), ivf.dims),
            (ElementKind::Bits, IndexKind::Ivf { lists: 0, bits: 0 }, 4)
        );
        let lists = IndexOptions { lists: Some(7), ..with_kind("ivf") };
        assert_eq!(
            IndexConfig::from_options(65, metric, ColumnType::Bit, &lists).unwrap().vector_kind(),
            IndexKind::Ivf { lists: 7, bits: 0 }
        );
        let bits = IndexOptions { bits: Some(4), ..with_kind("ivf") };
        assert_eq!(
            IndexConfig::from_options(65, metric, ColumnType::Bit, &bits).unwrap_err().to_string(),
            "option \"bits\" does not apply to kind = 'ivf' on bit columns: their lists keep the packed bits"
        );
        let heap = IndexOptions { rerank: Some("heap".into()), ..with_kind("ivf") };
        assert_eq!(
            IndexConfig::from_options(65, metric, ColumnType::Bit, &heap).unwrap_err(),
            OptionError::HeapRerankOnBitColumn
        );
        let quantized = IndexOptions { bits: Some(2), ..with_kind("flat") };
        assert!(IndexConfig::from_options(65, metric, ColumnType::Bit, &quantized)
            .unwrap_err()
            .to_string()
            .ends_with("use kind = 'hnsw', kind = 'ivf' or kind = 'flat' without bits"));
        assert_eq!(
            IndexConfig::from_options(64, metric, ColumnType::Vector, &with_kind("flat")).unwrap_err(),
            OptionError::MetricForColumn { column: "vector", operator: metric.operator() }
        );
    }
    assert!(IndexConfig::from_options(64, Metric::L2, ColumnType::Bit, &with_kind("flat")).is_err());
    let longest =
        IndexConfig::from_options(64_000, Metric::Hamming, ColumnType::Bit, &IndexOptions::default()).unwrap();
    assert_eq!(longest.dims, 2001);
    let too_long =
        IndexConfig::from_options(64_001, Metric::Hamming, ColumnType::Bit, &IndexOptions::default()).unwrap_err();
    assert_eq!(too_long.to_string(), "column cannot have more than 64000 dimensions for strata index");
    assert_eq!(
        too_long.for_access_method("hnsw").to_string(),
        "column cannot have more than 64000 dimensions for hnsw index",
        "pgvector's message"
    );
    let sparse =
        IndexConfig::from_options(1000, Metric::InnerProduct, ColumnType::Sparsevec, &with_kind("flat")).unwrap();
    assert_eq!(sparse.element, ElementKind::F32);
}

#[test]
fn option_names_parse_back() {
    for kind in [KindOption::Hnsw, KindOption::Ivf, KindOption::Flat] {
        assert_eq!(KindOption::parse(kind.name()), Ok(kind));
    }
    for rerank in [RerankOption::Index, RerankOption::Heap] {
        assert_eq!(RerankOption::parse(rerank.name()), Ok(rerank));
    }
    assert!(INT_OPTIONS.iter().all(|o| (o.min..=o.max).contains(&o.default)));
}

#[test]
fn options_of_another_kind_are_refused_when_given() {
    let given = |kind: &str, names: &[&str]| with_kind(kind).check_given(names.iter().copied());
    assert_eq!(given("hnsw", &["m", "ef_construction", "memtable_rows", "kind"]), Ok(()));
    assert_eq!(given("ivf", &["lists", "bits", "rerank", "memtable_rows"]), Ok(()));
    assert_eq!(given("flat", &["bits", "memtable_rows", "max_array_elements"]), Ok(()));
    let refused = [("hnsw", "lists"), ("ivf", "m"), ("ivf", "ef_construction"), ("flat", "m"), ("flat", "lists")];
    for (kind, option) in refused {
        assert_eq!(
            given(kind, &[option]).unwrap_err().to_string(),
            format!("option \"{option}\" does not apply to kind = '{kind}'"),
        );
    }
    // Without a kind the default (hnsw) decides; an unknown kind is resolve's error.
    assert!(IndexOptions::default().check_given(["lists"]).is_err());
    assert_eq!(with_kind("bogus").check_given(["lists"]), Ok(()));
}
