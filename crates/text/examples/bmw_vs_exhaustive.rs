//! Block-Max WAND against exhaustive scoring on a synthetic Zipf corpus of 100,000 documents
//! spread over three segments (with 2 % of rows deleted) and a memtable: documents scored,
//! blocks decoded and time per query, by query length, with every top-10 checked equal.
//!
//! `cargo run --release -p strata-text --example bmw_vs_exhaustive [docs]`

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strata_engine::bitset::Bitset;
use strata_text::{search, search_exhaustive, Bm25Params, Bm25Query, Document, Memtable, Source, TextSegment};

/// Samples ranks 0.. with probability ∝ 1 / (rank + 1)^s.
struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(n: usize, s: f64) -> Self {
        let mut cdf = Vec::with_capacity(n);
        let mut total = 0.0;
        for rank in 0..n {
            total += 1.0 / ((rank + 1) as f64).powf(s);
            cdf.push(total);
        }
        for c in &mut cdf {
            *c /= total;
        }
        Self { cdf }
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> usize {
        let u: f64 = rng.gen();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

fn main() {
    let docs: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let vocab = 50_000;
    let zipf = Zipf::new(vocab, 1.07);
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let t = Instant::now();
    let documents: Vec<Document> = (0..docs)
        .map(|_| {
            // Lengths 5..400, skewed short (most documents are short descriptions).
            let len = 5 + (395.0 * rng.gen::<f64>().powf(3.0)) as usize;
            Document::new((0..len).map(|_| (format!("w{}", zipf.sample(&mut rng)), 1))).unwrap()
        })
        .collect();
    println!("corpus: {docs} documents, vocabulary {vocab} (Zipf s = 1.07), generated in {:?}", t.elapsed());

    // Three segments and a memtable; 2 % of the segments' rows deleted.
    let t = Instant::now();
    let cut = [0, docs * 3 / 10, docs * 6 / 10, docs * 9 / 10, docs];
    let mut segments: Vec<(TextSegment, Bitset)> = Vec::new();
    let mut bytes = 0;
    for part in 0..3 {
        let mut m = Memtable::new();
        for (row, doc) in documents.iter().enumerate().take(cut[part + 1]).skip(cut[part]) {
            m.insert(row as u64, doc).unwrap();
        }
        let built = m.to_segment().unwrap();
        let file = built.to_bytes();
        bytes += file.len();
        let seg = TextSegment::from_bytes(&file).unwrap();
        let mut deleted = Bitset::new(seg.rows() as usize);
        for row in 0..seg.rows() as usize {
            if rng.gen_bool(0.02) {
                deleted.insert(row);
            }
        }
        segments.push((seg, deleted));
    }
    let mut memtable = Memtable::new();
    for (row, doc) in documents.iter().enumerate().skip(cut[3]) {
        memtable.insert(row as u64, doc).unwrap();
    }
    println!(
        "index: 3 segments ({:.1} MiB, {:.1} bytes per lexeme occurrence) + memtable of {} rows, built in {:?}",
        bytes as f64 / 1_048_576.0,
        bytes as f64 / segments.iter().map(|s| s.0.stats().total_len as f64).sum::<f64>(),
        memtable.len(),
        t.elapsed()
    );
    let mut sources: Vec<Source<'_>> = segments.iter().map(|(s, d)| Source::segment(s, Some(d)).unwrap()).collect();
    sources.push(Source::memtable(&memtable, None).unwrap());

    println!();
    println!("top-10, 50 queries per length; query lexemes drawn from the corpus distribution");
    println!(
        "{:>7} | {:>12} {:>12} {:>7} | {:>10} {:>10} | {:>9} {:>9} {:>6}",
        "length", "scored BMW", "scored exh.", "ratio", "blocks BMW", "blocks exh", "µs BMW", "µs exh.", "speed"
    );
    for (label, range) in [("1", 1..2), ("2", 2..3), ("3-4", 3..5), ("5-7", 5..8), ("8-12", 8..13)] {
        let (mut scored, mut blocks, mut time) = ([0u64; 2], [0u64; 2], [Duration::ZERO; 2]);
        for _ in 0..50 {
            let len = rng.gen_range(range.clone());
            let lexemes: Vec<String> = (0..len).map(|_| format!("w{}", zipf.sample(&mut rng))).collect();
            let query = Bm25Query::prepare(&sources, &lexemes, Bm25Params::default());
            let t = Instant::now();
            let bmw = search(&sources, &query, 10);
            time[0] += t.elapsed();
            let t = Instant::now();
            let exhaustive = search_exhaustive(&sources, &query, 10);
            time[1] += t.elapsed();
            assert_eq!(bmw.hits, exhaustive.hits, "BMW equals exhaustive");
            for (i, r) in [&bmw, &exhaustive].into_iter().enumerate() {
                scored[i] += r.stats.docs_scored;
                blocks[i] += r.stats.blocks_decoded;
            }
        }
        let us = |d: Duration| d.as_secs_f64() * 1e6 / 50.0;
        println!(
            "{label:>7} | {:>12} {:>12} {:>6.1}% | {:>10} {:>10} | {:>9.0} {:>9.0} {:>5.1}×",
            scored[0] / 50,
            scored[1] / 50,
            100.0 * scored[0] as f64 / scored[1].max(1) as f64,
            blocks[0] / 50,
            blocks[1] / 50,
            us(time[0]),
            us(time[1]),
            time[1].as_secs_f64() / time[0].as_secs_f64().max(1e-12)
        );
    }
}
