//! `cargo xtask fuzz`: the fuzz smoke run of the engine's untrusted-input parsers, and the seed
//! corpus it starts from.
//!
//! ```text
//! cargo xtask fuzz [--seconds N]   build the fuzz targets, fuzz each for N / 5 s (default 75 s total)
//! cargo xtask fuzz seeds           rewrite the committed seed corpus (crates/engine/fuzz/seeds)
//! ```
//!
//! The targets live in `crates/engine/fuzz` (a cargo-fuzz crate outside the workspace):
//! `segment_decode` (vector segment files of every kind), `vector_text` (pgvector's text
//! format), `text_segment` (strata-text's segment files), `manifest` (strata-lsm's manifest JSON)
//! and `status_pages` (strata-lsm's status page readers over written, then damaged, pages).
//! They are built on the stable toolchain with the coverage instrumentation that `cargo fuzz
//! build -s none` adds (no sanitizer, no `-Z` flags) into `target/fuzz`, so the main build is
//! untouched, and linked against libFuzzer (compiled by `libfuzzer-sys`). Each run starts from a
//! copy of `crates/engine/fuzz/seeds/<target>` (generated) and `regressions/<target>` (inputs
//! that once failed, added by hand) in a directory under /tmp (libFuzzer adds the new inputs it
//! finds to its first corpus directory; the repository is never written); failing inputs go to
//! that directory's `artifacts/`, which is kept and printed when a run fails.
//! `cargo xtask test` runs the smoke after the pure-Rust tests.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use strata_engine::cancel::Cancel;
use strata_engine::metric::Metric;
use strata_engine::segment::{build_segment, structured, BuildOptions, IndexKind, Segment};
use strata_engine::store::ElementKind;
use strata_lsm::manifest::{ConfigKind, IndexConfig, Manifest, SegmentEntry};
use strata_text::segment::layout::{TAG_IDS, TAG_LENS, TAG_META, TAG_POSTINGS, TAG_SKIPS, TAG_TERMINFO, TAG_TERMS};
use strata_text::{Document, TextSegment};

use crate::process;
use crate::{repo_root, Result};

/// Seconds of fuzzing in `cargo xtask test`, shared evenly by the targets (15 s each).
pub const SMOKE_SECONDS: u32 = 75;

/// The fuzz targets (binaries of `crates/engine/fuzz`), in run order.
const TARGETS: [&str; 5] = ["segment_decode", "vector_text", "text_segment", "manifest", "status_pages"];

/// The flags `cargo fuzz build -s none` passes (cargo-fuzz `src/project.rs`), all stable:
/// libFuzzer's coverage feedback (8-bit counters, PC table, comparison tracing, stack depth),
/// `cfg(fuzzing)`, and debug assertions (overflow checks included) in the optimised build.
const INSTRUMENTATION: &str = "-Cpasses=sancov-module \
    -Cllvm-args=-sanitizer-coverage-level=4 \
    -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
    -Cllvm-args=-sanitizer-coverage-pc-table \
    -Cllvm-args=-sanitizer-coverage-trace-compares \
    -Cllvm-args=-sanitizer-coverage-stack-depth \
    -Cllvm-args=-simplifycfg-branch-fold-threshold=0 \
    --cfg fuzzing -Clink-dead-code -Cdebug-assertions";

/// Seconds one input may run before libFuzzer reports it as a timeout (a failure).
const INPUT_TIMEOUT_S: u32 = 10;

/// `cargo xtask fuzz [--seconds N]` and `cargo xtask fuzz seeds`.
pub fn command(args: &[String]) -> Result {
    match args.first().map(String::as_str) {
        Some("seeds") if args.len() == 1 => write_seeds(),
        _ => smoke(crate::parse_options(args)?.seconds.unwrap_or(SMOKE_SECONDS)),
    }
}

fn fuzz_dir() -> PathBuf {
    repo_root().join("crates/engine/fuzz")
}

/// The generated seed corpus of `target` (`cargo xtask fuzz seeds` rewrites it).
fn seeds_dir(target: &str) -> PathBuf {
    fuzz_dir().join("seeds").join(target)
}

/// Inputs that once failed `target`, kept by hand so that every smoke run replays them.
fn regressions_dir(target: &str) -> PathBuf {
    fuzz_dir().join("regressions").join(target)
}

/// Builds the fuzz targets and fuzzes each for its share of `total_seconds`, starting from the
/// committed seeds; fails when any target crashes, times out or runs out of memory, naming the
/// saved input.
pub fn smoke(total_seconds: u32) -> Result {
    let per_target = (total_seconds / TARGETS.len() as u32).max(1);
    let binaries = build()?;
    let work = PathBuf::from(format!("/tmp/pg_strata-fuzz-{}", std::process::id()));
    let mut failures = Vec::new();
    for target in TARGETS {
        println!("==> fuzz {target} for {per_target} s (seeds: {})", seeds_dir(target).display());
        if let Err(error) = run_target(&binaries.join(target), target, per_target, &work.join(target)) {
            eprintln!("xtask: fuzz target {target} failed: {error}");
            failures.push(target);
        }
    }
    if failures.is_empty() {
        let _ = fs::remove_dir_all(&work);
        Ok(())
    } else {
        Err(format!("fuzz target(s) {} failed; inputs and corpora kept in {}", failures.join(", "), work.display()))
    }
}

/// Builds every target with libFuzzer instrumentation; returns the directory of the binaries.
fn build() -> Result<PathBuf> {
    let host = process::output(Command::new("rustc").arg("-vV"))?
        .lines()
        .find_map(|line| line.strip_prefix("host: ").map(str::to_owned))
        .ok_or("`rustc -vV` names no host triple")?;
    let target_dir = repo_root().join("target/fuzz");
    println!("==> building fuzz targets (libFuzzer, coverage-instrumented) in {}", target_dir.display());
    let mut rustflags = INSTRUMENTATION.to_owned();
    if let Ok(extra) = std::env::var("RUSTFLAGS") {
        rustflags.push(' ');
        rustflags.push_str(&extra);
    }
    // `--target` keeps the instrumentation away from build scripts and proc macros, which
    // would not link without libFuzzer.
    process::run(
        Command::new("cargo")
            .arg("build")
            .arg("--manifest-path")
            .arg(fuzz_dir().join("Cargo.toml"))
            .args(["--release", "--bins", "--target", &host, "--config", "profile.release.debug=\"line-tables-only\""])
            .arg("--target-dir")
            .arg(&target_dir)
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env("RUSTFLAGS", rustflags),
    )?;
    Ok(target_dir.join(host).join("release"))
}

/// Fuzzes `target` for `seconds` from a copy of its seeds in `work`.
fn run_target(binary: &Path, target: &str, seconds: u32, work: &Path) -> Result {
    let corpus = work.join("corpus");
    let artifacts = work.join("artifacts");
    let _ = fs::remove_dir_all(work);
    for dir in [&corpus, &artifacts] {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let seeds = seeds_dir(target);
    if !seeds.is_dir() {
        return Err(format!("no seed corpus at {}; write it with `cargo xtask fuzz seeds`", seeds.display()));
    }
    for dir in [seeds, regressions_dir(target)].iter().filter(|dir| dir.is_dir()) {
        for entry in fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
            if path.is_file() {
                let copy = corpus.join(path.file_name().expect("a file has a name"));
                fs::copy(&path, &copy).map_err(|e| format!("copying {} to {}: {e}", path.display(), copy.display()))?;
            }
        }
    }
    let mut command = Command::new(binary);
    command
        .arg(&corpus)
        .arg(format!("-max_total_time={seconds}"))
        .arg(format!("-timeout={INPUT_TIMEOUT_S}"))
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .arg("-print_final_stats=1")
        .env("RUST_BACKTRACE", "1");
    let output = process::capture(&mut command)?;
    let log = String::from_utf8_lossy(&output.stderr);
    if output.status.success() {
        println!("    {}", summary(&log));
        return Ok(());
    }
    let lines: Vec<&str> = log.lines().collect();
    eprintln!("{}", lines[lines.len().saturating_sub(60)..].join("\n"));
    let mut saved: Vec<PathBuf> =
        fs::read_dir(&artifacts).into_iter().flatten().filter_map(|entry| Some(entry.ok()?.path())).collect();
    saved.sort();
    let saved: Vec<String> =
        saved.iter().map(|path| format!("{}  (reproduce: {} {0})", path.display(), binary.display())).collect();
    Err(format!(
        "{} exited with {}; saved input(s):\n  {}",
        process::describe(&command),
        output.status,
        if saved.is_empty() { "none".to_owned() } else { saved.join("\n  ") }
    ))
}

/// One line from libFuzzer's final report: runs, runs per second, coverage, new inputs.
fn summary(log: &str) -> String {
    let stat = |name: &str| {
        log.lines()
            .find_map(|line| line.strip_prefix(name).map(|value| value.trim().to_owned()))
            .unwrap_or_else(|| "?".to_owned())
    };
    let coverage = log
        .lines()
        .rev()
        .find_map(|line| {
            line.split_once("cov: ").map(|(_, rest)| rest.split_whitespace().next().unwrap_or("?").to_owned())
        })
        .unwrap_or_else(|| "?".to_owned());
    format!(
        "ok: {} runs, {} runs/s, coverage {coverage} edges, {} new inputs, peak RSS {} MB",
        stat("stat::number_of_executed_units:"),
        stat("stat::average_exec_per_sec:"),
        stat("stat::new_units_added:"),
        stat("stat::peak_rss_mb:"),
    )
}

/// One small segment of the seed corpus.
struct SegmentSeed {
    name: &'static str,
    kind: IndexKind,
    metric: Metric,
    element: ElementKind,
    rows: usize,
    dims: usize,
    store_vectors: bool,
}

const fn seed(
    name: &'static str,
    kind: IndexKind,
    metric: Metric,
    element: ElementKind,
    rows: usize,
    dims: usize,
) -> SegmentSeed {
    SegmentSeed { name, kind, metric, element, rows, dims, store_vectors: true }
}

/// Every kind, metric and element type at least once, each a few KB.
const SEGMENT_SEEDS: [SegmentSeed; 9] = [
    seed("flat_l2_f32", IndexKind::Flat, Metric::L2, ElementKind::F32, 12, 4),
    seed("flat_cosine_f16", IndexKind::Flat, Metric::Cosine, ElementKind::F16, 12, 4),
    seed("qflat1_ip_f32", IndexKind::QuantizedFlat { bits: 1 }, Metric::InnerProduct, ElementKind::F32, 16, 8),
    seed("qflat2_l2_f16", IndexKind::QuantizedFlat { bits: 2 }, Metric::L2, ElementKind::F16, 16, 8),
    seed("qflat4_cosine_f32", IndexKind::QuantizedFlat { bits: 4 }, Metric::Cosine, ElementKind::F32, 16, 8),
    seed("ivf3x4_l2_f32", IndexKind::Ivf { lists: 3, bits: 4 }, Metric::L2, ElementKind::F32, 32, 8),
    SegmentSeed {
        store_vectors: false,
        ..seed("ivf2x1_cosine_novectors", IndexKind::Ivf { lists: 2, bits: 1 }, Metric::Cosine, ElementKind::F32, 24, 8)
    },
    seed("hnsw4_l2_f32", IndexKind::Hnsw { m: 4, ef_construction: 16 }, Metric::L2, ElementKind::F32, 40, 8),
    seed("hnsw2_ip_f16", IndexKind::Hnsw { m: 2, ef_construction: 8 }, Metric::InnerProduct, ElementKind::F16, 24, 4),
];

/// Text inputs of the `vector_text` target: valid values, pgvector's edge cases, each error.
const TEXT_SEEDS: [(&str, &str); 22] = [
    ("simple", "[1,2,3]"),
    ("spaces", "  [ 1 , -2.5 ,3 ]  "),
    ("all_whitespace", "\t[\n1\r,\x0b2\x0c]\n"),
    ("number_syntax", "[.5,1.,+2E2,-0,0,1e-3,1E+3]"),
    ("float4out_layout", "[0.0001,1e-05,100000,1e+06,1.5e+07,1.2345678e-05,123.456]"),
    ("f32_limits", "[3.4028235e+38,-3.4028235e+38,1.1754944e-38,1e-45]"),
    ("underflow", "[1e-50,-1e-60]"),
    ("f16_limits", "[65504,-65504,6e-08,65519.99]"),
    ("f16_out_of_range", "[65520]"),
    ("f32_out_of_range", "[1e39]"),
    ("nan", "[NaN]"),
    ("infinity", "[1,-Infinity]"),
    ("inf_short", "[inf]"),
    ("empty", "[ ]"),
    ("trailing_comma", "[1,]"),
    ("missing_comma", "[1 2]"),
    ("double_comma", "[1,,2]"),
    ("missing_open", "1,2]"),
    ("missing_close", "[1,2"),
    ("junk_after", "[1] x"),
    ("not_a_number", "[1,abc]"),
    ("unicode", "[1,\u{e9}]"),
];

/// Writes the seed corpus: `seeds/segment_decode/<name>.seg` (a segment file) and
/// `<name>.sections` (the same sections in the target's structured form,
/// [`strata_engine::segment::structured`]) for every [`SEGMENT_SEEDS`] entry;
/// `seeds/vector_text/<name>.txt` for [`TEXT_SEEDS`] and `floats.bin` (raw `f32` bytes, for the
/// target's writer check).
pub fn write_seeds() -> Result {
    let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    let segments = seeds_dir("segment_decode");
    for seed in &SEGMENT_SEEDS {
        let (file, sections) = build_seed(seed)?;
        files.push((segments.join(format!("{}.seg", seed.name)), file));
        files.push((segments.join(format!("{}.sections", seed.name)), sections));
    }
    let texts = seeds_dir("vector_text");
    for (name, text) in TEXT_SEEDS {
        files.push((texts.join(format!("{name}.txt")), text.as_bytes().to_vec()));
    }
    // No input of `MAX_DIMENSIONS + 1` elements (32 KB): libFuzzer's inputs grow to the largest
    // seed, which slows every run; the unit tests cover that error.
    let floats = [1.0f32, -0.0, 0.1, f32::MAX, f32::MIN_POSITIVE, f32::from_bits(1), 1e-5, 65504.0, f32::NAN];
    files.push((texts.join("floats.bin"), floats.iter().flat_map(|v| v.to_le_bytes()).collect()));
    let text_segments = seeds_dir("text_segment");
    for (name, documents) in TEXT_SEGMENT_SEEDS {
        let (file, sections) = text_segment_seed(documents)?;
        files.push((text_segments.join(format!("{name}.seg")), file));
        files.push((text_segments.join(format!("{name}.sections")), sections));
    }
    let manifests = seeds_dir("manifest");
    for (name, manifest) in manifest_seeds() {
        files.push((manifests.join(format!("{name}.json")), manifest.to_json()));
    }
    let status = seeds_dir("status_pages");
    for (name, input) in STATUS_PAGE_SEEDS {
        files.push((status.join(format!("{name}.bin")), input.to_vec()));
    }

    for dir in [&segments, &texts, &text_segments, &manifests, &status] {
        if dir.exists() {
            fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut total = 0;
    for (path, bytes) in &files {
        fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        total += bytes.len();
    }
    println!("wrote {} seed files ({total} bytes) under {}", files.len(), fuzz_dir().join("seeds").display());
    Ok(())
}

/// Text segments of the `text_segment` seeds: a name and documents (space-separated lexemes).
const TEXT_SEGMENT_SEEDS: [(&str, &[&str]); 3] = [
    ("one_row", &["postgres"]),
    ("small", &["postgres replication lag", "vector index search", "postgres vector", "lag lag lag"]),
    (
        "blocks",
        // 200 rows, so that the frequent lexemes' postings span more than one compressed block.
        &[
            "a b c",
            "a b",
            "a",
            "b c d",
            "c d e",
            "a e",
            "b",
            "a c e",
            "d",
            "a b c d e",
            "e f",
            "f g",
            "a f",
            "g",
            "a g b",
            "c",
            "a a b",
            "d e f g",
            "h",
            "a h",
        ],
    ),
];

/// The documents of a text segment seed, ten copies of `texts` for the `blocks` seed.
fn seed_documents(texts: &[&str]) -> Result<Vec<Document>> {
    let copies = if texts.len() > 10 { 10 } else { 1 };
    (0..copies)
        .flat_map(|_| texts.iter())
        .map(|text| Document::from_tokens(text.split_whitespace()).map_err(|e| format!("text seed: {e}")))
        .collect()
}

/// The sections of a text segment in the `text_segment` target's structured form, in order.
const TEXT_TAGS: [u32; 7] = [TAG_META, TAG_IDS, TAG_LENS, TAG_TERMS, TAG_TERMINFO, TAG_SKIPS, TAG_POSTINGS];

/// A text segment of `texts` as a file and in the `text_segment` target's structured form (each
/// section of [`TEXT_TAGS`] as a little-endian `u16` length and its bytes), both checked to open.
fn text_segment_seed(texts: &[&str]) -> Result<(Vec<u8>, Vec<u8>)> {
    let documents = seed_documents(texts)?;
    let rows = documents.iter().enumerate().map(|(row, document)| (row as u64 * 7 + 3, document));
    let built = strata_text::build_segment(rows).map_err(|e| format!("text seed: {e}"))?;
    let file = built.to_bytes();
    let sections = built.sections();
    let mut structured = Vec::new();
    for tag in TEXT_TAGS {
        let bytes = sections
            .iter()
            .find(|(t, _)| *t == tag)
            .map(|(_, b)| b.as_ref())
            .ok_or("text seed: a section is missing")?;
        let len =
            u16::try_from(bytes.len()).ok().filter(|&len| len != u16::MAX).ok_or("text seed: a section over 64 KB")?;
        structured.extend_from_slice(&len.to_le_bytes());
        structured.extend_from_slice(bytes);
    }
    let opened = TextSegment::from_bytes(&file).map_err(|e| format!("text seed: the built file does not open: {e}"))?;
    if opened.rows() as usize != documents.len() {
        return Err("text seed: rows differ".to_owned());
    }
    let rebuilt: Vec<(u32, &[u8])> = TEXT_TAGS.iter().copied().zip(sections.iter().map(|(_, b)| b.as_ref())).collect();
    let container = strata_engine::format::encode(&rebuilt).map_err(|e| format!("text seed: {e}"))?;
    TextSegment::from_bytes(&container).map_err(|e| format!("text seed: the structured form does not open: {e}"))?;
    Ok((file, structured))
}

/// Manifests of the `manifest` seeds: each index kind, with and without segments and groups.
fn manifest_seeds() -> Vec<(&'static str, Manifest<IndexConfig>)> {
    let config = |kind: ConfigKind, metric: Metric| IndexConfig {
        dims: 384,
        metric,
        element: ElementKind::F32,
        kind,
        memtable_rows: 10_000,
        rerank_from_heap: false,
        filters: strata_engine::filter::FilterSchema::default(),
    };
    let segment = |id: u64, rows: u64, deleted: u64| SegmentEntry {
        id,
        covers: vec![id],
        rows,
        deleted,
        deletion_generation: u64::from(deleted > 0),
        bytes: rows * 200,
    };
    let mut hnsw = Manifest::new(config(IndexKind::Hnsw { m: 16, ef_construction: 64 }.into(), Metric::Cosine));
    hnsw.next_id = 4;
    hnsw.segments = vec![segment(1, 1000, 0), segment(3, 500, 20)];
    let mut ivf = Manifest::new(IndexConfig {
        rerank_from_heap: true,
        ..config(IndexKind::Ivf { lists: 0, bits: 4 }.into(), Metric::L2)
    });
    ivf.next_id = 2;
    ivf.segments = vec![segment(1, 100, 100)];
    ivf.group_generations = [(5, 2), (6, 1)].into();
    let filtered = IndexConfig {
        filters: strata_engine::filter::FilterSchema::new(&[
            strata_engine::filter::FilterSpec::new(strata_engine::filter::ColumnType::Int8),
            strata_engine::filter::FilterSpec::new(strata_engine::filter::ColumnType::TextArray),
        ])
        .expect("two filter columns"),
        ..config(IndexKind::Flat.into(), Metric::InnerProduct)
    };
    vec![
        ("hnsw", hnsw),
        ("ivf_heap", ivf),
        ("flat_filters", Manifest::new(filtered)),
        ("quantized", Manifest::new(config(IndexKind::QuantizedFlat { bits: 1 }.into(), Metric::L2))),
        ("bm25", Manifest::new(config(ConfigKind::Bm25 { k1_milli: 1200, b_milli: 750 }, Metric::InnerProduct))),
    ]
}

/// Inputs of the `status_pages` target (its module docs give the form): operations, then damage.
const STATUS_PAGE_SEEDS: [(&str, &[u8]); 4] = [
    ("register_append", &[3, 0, 0, 0, 1, 7, 0, 1, 8, 0]),
    // Two groups, TIDs in both, the first settled, then the TIDs of one block zeroed.
    (
        "lists",
        &[
            12, 0, 0, 0, 1, 1, 0, 1, 2, 0, 1, 3, 0, 1, 4, 0, 1, 5, 0, 0, 0, 0, 1, 6, 0, 1, 7, 0, 2, 0, 0, 1, 8, 0, 3,
            4, 0,
        ],
    ),
    // A registered group, then its catalog entry's state byte and the metadata magic damaged.
    ("damaged", &[2, 0, 0, 0, 1, 9, 0, 0x2C, 0x01, 0xFF, 0x18, 0x00, 0x00]),
    ("empty", &[0]),
];

/// Builds `seed` and returns it as a segment file and in the structured form, both checked to
/// open.
fn build_seed(seed: &SegmentSeed) -> Result<(Vec<u8>, Vec<u8>)> {
    let options = BuildOptions {
        kind: seed.kind,
        metric: seed.metric,
        element: seed.element,
        seed: 7,
        threads: 1,
        store_vectors: seed.store_vectors,
        cancel: Cancel::default(),
    };
    let mut state = 0x9E37_79B9_7F4A_7C15_u64 ^ seed.name.len() as u64;
    let vectors: Vec<f32> = (0..seed.rows * seed.dims)
        .map(|_| {
            // xorshift64: deterministic values in [-1, 1).
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect();
    let ids = (0..seed.rows as u64).map(|row| row * 3 + 1).collect();
    let built = build_segment(&options, ids, vectors, seed.dims).map_err(|e| format!("seed {}: {e}", seed.name))?;
    let file = built.to_bytes();
    let sections = structured::encode(&built).map_err(|e| format!("seed {}: {e}", seed.name))?;
    Segment::from_bytes(&file).map_err(|e| format!("seed {}: the built file does not open: {e}", seed.name))?;
    let rebuilt =
        structured::decode(&sections).ok_or_else(|| format!("seed {}: structured form invalid", seed.name))?;
    Segment::from_bytes(&rebuilt).map_err(|e| format!("seed {}: the structured form does not open: {e}", seed.name))?;
    Ok((file, sections))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed segment seeds still open: a format change that breaks them needs
    /// `cargo xtask fuzz seeds` (else the smoke run starts from inputs the decoder rejects).
    #[test]
    fn committed_segment_seeds_open() {
        let dir = seeds_dir("segment_decode");
        let mut seen = 0;
        for seed in &SEGMENT_SEEDS {
            let regenerate = "regenerate the seeds with `cargo xtask fuzz seeds`";
            let path = dir.join(format!("{}.seg", seed.name));
            let file = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}; {regenerate}", path.display()));
            Segment::from_bytes(&file)
                .unwrap_or_else(|e| panic!("{} does not open: {e}; {regenerate}", path.display()));
            let path = dir.join(format!("{}.sections", seed.name));
            let sections = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}; {regenerate}", path.display()));
            let rebuilt = structured::decode(&sections).expect("valid container");
            Segment::from_bytes(&rebuilt)
                .unwrap_or_else(|e| panic!("{} does not open: {e}; {regenerate}", path.display()));
            seen += 2;
        }
        assert_eq!(seen, fs::read_dir(&dir).unwrap().count(), "files in {} other than the seeds", dir.display());
    }

    /// The committed text segment seeds open and the manifest seeds parse (else the smoke run
    /// starts from inputs the decoders reject): a format change needs `cargo xtask fuzz seeds`.
    #[test]
    fn committed_text_and_manifest_seeds_are_valid() {
        let regenerate = "regenerate the seeds with `cargo xtask fuzz seeds`";
        for (name, _) in TEXT_SEGMENT_SEEDS {
            let path = seeds_dir("text_segment").join(format!("{name}.seg"));
            let file = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}; {regenerate}", path.display()));
            TextSegment::from_bytes(&file)
                .unwrap_or_else(|e| panic!("{} does not open: {e}; {regenerate}", path.display()));
        }
        for (name, manifest) in manifest_seeds() {
            let path = seeds_dir("manifest").join(format!("{name}.json"));
            let json = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}; {regenerate}", path.display()));
            let parsed = Manifest::<IndexConfig>::from_json(&json)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}; {regenerate}", path.display()));
            assert_eq!(parsed, manifest, "{} differs from its seed; {regenerate}", path.display());
        }
        assert_eq!(fs::read_dir(seeds_dir("status_pages")).unwrap().count(), STATUS_PAGE_SEEDS.len());
    }

    #[test]
    fn summary_reads_libfuzzer_stats() {
        let log = "#4096 pulse cov: 10 ft: 12\n#8192 DONE cov: 321 ft: 900 corp: 5\n\
                   stat::number_of_executed_units: 8192\nstat::average_exec_per_sec:     4096\n\
                   stat::new_units_added:          7\nstat::peak_rss_mb:              40\n";
        assert_eq!(summary(log), "ok: 8192 runs, 4096 runs/s, coverage 321 edges, 7 new inputs, peak RSS 40 MB");
    }
}
