//! `strata-bench text-rank IN OUT`: BM25 rankings from strata-text for documents and queries
//! tokenised elsewhere (the IR quality benchmark tokenises with PostgreSQL's `to_tsvector`).
//!
//! The documents are split over three sources — two text segments (built, written to bytes and
//! opened, as a flush does) and one memtable — so the rankings use the engine's global
//! statistics across sources, as an index with flushed and unflushed rows does. Each query is
//! answered by Block-Max WAND and by exhaustive scoring; the command fails if the two differ
//! (ids, order or scores), and reports how many documents each scored.
//!
//! Input: `{"k1": f, "b": f, "k": n, "docs": [{"id": n, "terms": [[lexeme, tf], …]}, …],
//! "queries": [{"id": s, "lexemes": [lexeme, …]}, …]}`. Output: `{"queries": [{"id": s,
//! "hits": [[doc id, score], …], "bmw_docs_scored": n, "exhaustive_docs_scored": n}, …]}`.

use std::path::Path;

use serde::{Deserialize, Serialize};
use strata_text::{
    build_segment, search, search_exhaustive, Bm25Params, Bm25Query, Document, Memtable, Source, TextSegment,
};

#[derive(Deserialize)]
struct Input {
    k1: f64,
    b: f64,
    k: usize,
    docs: Vec<InputDoc>,
    queries: Vec<InputQuery>,
}

#[derive(Deserialize)]
struct InputDoc {
    id: u64,
    terms: Vec<(String, u32)>,
}

#[derive(Deserialize)]
struct InputQuery {
    id: String,
    lexemes: Vec<String>,
}

#[derive(Serialize)]
struct Ranked {
    id: String,
    hits: Vec<(u64, f64)>,
    bmw_docs_scored: u64,
    exhaustive_docs_scored: u64,
}

/// Runs the command (see the module docs).
pub fn run(input: &Path, output: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(input).map_err(|e| format!("{}: {e}", input.display()))?;
    let input: Input = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", input.display()))?;
    let params = Bm25Params::new(input.k1, input.b).map_err(|e| e.to_string())?;
    let docs: Vec<(u64, Document)> = input
        .docs
        .into_iter()
        .map(|d| Document::new(d.terms).map(|doc| (d.id, doc)))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let third = docs.len().div_ceil(3);
    let segments: Vec<TextSegment> = docs
        .chunks(third.max(1))
        .take(2)
        .map(|chunk| build_segment(chunk.iter().map(|(id, doc)| (*id, doc))).and_then(|built| built.open()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut memtable = Memtable::new();
    for (id, doc) in docs.iter().skip(2 * third) {
        memtable.insert(*id, doc).map_err(|e| e.to_string())?;
    }
    let mut sources: Vec<Source<'_>> =
        segments.iter().map(|s| Source::segment(s, None)).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
    sources.push(Source::memtable(&memtable, None).map_err(|e| e.to_string())?);
    let mut ranked = Vec::with_capacity(input.queries.len());
    for query in &input.queries {
        let lexemes: Vec<&str> = query.lexemes.iter().map(String::as_str).collect();
        let prepared = Bm25Query::prepare(&sources, &lexemes, params);
        let bmw = search(&sources, &prepared, input.k);
        let exhaustive = search_exhaustive(&sources, &prepared, input.k);
        let hits: Vec<(u64, f64)> = bmw.hits.iter().map(|h| (h.id, h.score)).collect();
        let expected: Vec<(u64, f64)> = exhaustive.hits.iter().map(|h| (h.id, h.score)).collect();
        if hits != expected {
            return Err(format!(
                "query {}: Block-Max WAND returned {hits:?}, exhaustive scoring {expected:?}",
                query.id
            ));
        }
        ranked.push(Ranked {
            id: query.id.clone(),
            hits,
            bmw_docs_scored: bmw.stats.docs_scored,
            exhaustive_docs_scored: exhaustive.stats.docs_scored,
        });
    }
    let out = serde_json::json!({ "queries": ranked });
    std::fs::write(output, serde_json::to_string(&out).expect("plain JSON"))
        .map_err(|e| format!("{}: {e}", output.display()))
}
