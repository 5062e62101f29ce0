//! `cargo xtask demo`: from a fresh machine to nearest-neighbour answers over real data.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use strata_engine::vector_text;

use crate::cluster::Cluster;
use crate::demo_data::{demo_dir, read_f16_rows, read_texts};
use crate::process::{self, as_postgres, run_with_input};
use crate::{repo_root, setup, Options, Result};

const DEFAULT_PORT: u16 = 5499;
/// The index the demo builds (default kind: HNSW).
const INDEX_SQL: &str = "CREATE INDEX demo_items_embedding ON demo_items USING strata (embedding vector_cosine_ops)";
/// The text index the demo builds next to it.
const TEXT_INDEX_SQL: &str =
    "CREATE INDEX demo_items_body ON demo_items USING bm25 (body) WITH (text_config = 'english')";
/// How many of the held-out queries the demo runs.
const QUERIES_SHOWN: usize = 4;
/// How many of them it also runs as BM25 and hybrid (BM25 + vector) searches.
const TEXT_QUERIES_SHOWN: usize = 2;

/// Escapes a value for COPY's text format.
fn copy_escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\t', "\\t").replace('\n', "\\n").replace('\r', "\\r")
}

/// The default cluster directory: `.strata/demo` in the repository when the `postgres` user can
/// reach it, otherwise a folder under /tmp (e.g. when the clone lives under a private /root).
fn default_dir() -> PathBuf {
    let local = repo_root().join(".strata");
    let reachable = std::fs::create_dir_all(&local).is_ok()
        && as_postgres("test", Path::new("/")).arg("-x").arg(&local).status().is_ok_and(|s| s.success());
    if reachable {
        local.join("demo")
    } else {
        PathBuf::from("/tmp/pg_strata-demo")
    }
}

fn load_sample(cluster: &Cluster) -> Result {
    let dir = demo_dir();
    let texts = read_texts(&dir.join("items.jsonl"))?;
    let vectors = read_f16_rows(&dir.join("embeddings.f16"))?;
    if texts.len() != vectors.len() {
        return Err(format!("data/demo: {} texts but {} embeddings", texts.len(), vectors.len()));
    }
    process::run(cluster.psql("postgres").args([
        "-c",
        // The demo's own cluster: recreate the extension so a rerun after an upgrade of
        // pg_strata gets the SQL objects of the freshly installed version.
        "SET client_min_messages = warning; DROP TABLE IF EXISTS demo_items; \
         DROP EXTENSION IF EXISTS pg_strata CASCADE; CREATE EXTENSION pg_strata",
        "-c",
        "CREATE TABLE demo_items (id bigint PRIMARY KEY, body text NOT NULL, embedding vector(384) NOT NULL)",
    ]))?;
    let mut copy = String::with_capacity(texts.len() * 4096);
    for (id, (text, vector)) in texts.iter().zip(&vectors).enumerate() {
        let _ = writeln!(copy, "{id}\t{}\t{}", copy_escape(text), vector_text::format(vector.iter().copied()));
    }
    run_with_input(cluster.psql("postgres").args(["-c", "COPY demo_items FROM STDIN"]), copy.as_bytes())?;
    process::run(cluster.psql("postgres").args(["-c", "ANALYZE demo_items"]))?;
    println!("==> loaded {} rows (text + 384-d MiniLM embedding) into demo_items", texts.len());
    println!("==> {INDEX_SQL}");
    process::run(cluster.psql("postgres").args(["-c", INDEX_SQL]))?;
    println!("==> {TEXT_INDEX_SQL}");
    process::run(cluster.psql("postgres").args(["-c", TEXT_INDEX_SQL]))?;
    let stats = process::output(cluster.psql("postgres").args([
        "-c",
        "SELECT part, id, kind, rows, pg_size_pretty(bytes) AS size FROM strata_index_stats('demo_items_embedding')",
    ]))?;
    print!("{stats}");
    Ok(())
}

fn run_queries(cluster: &Cluster) -> Result {
    let dir = demo_dir();
    let texts = read_texts(&dir.join("queries.jsonl"))?;
    let vectors = read_f16_rows(&dir.join("queries.f16"))?;
    for (position, (text, vector)) in texts.iter().zip(&vectors).take(QUERIES_SHOWN).enumerate() {
        let literal = vector_text::format(vector.iter().copied());
        if position == 0 {
            let explain = format!(
                "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT body FROM demo_items \
                 ORDER BY embedding <=> '{literal}' LIMIT 5"
            );
            println!("\n==> the plan: an ordered scan of the strata index");
            let plan = process::output(cluster.psql("postgres").args(["-A", "-t", "-c", &explain]))?;
            // Print the plan with the 384 numbers of the query vector elided.
            print!("{}", plan.replace(&literal, "[… 384 values …]"));
        }
        let sql = format!(
            "SELECT to_char(embedding <=> '{literal}', 'FM0.0000'), body FROM demo_items \
             ORDER BY embedding <=> '{literal}' LIMIT 5"
        );
        let rows = process::output(cluster.psql("postgres").args(["-A", "-t", "-F", "\t", "-c", &sql]))?;
        println!("\nquery: {text}");
        for line in rows.lines() {
            let (distance, body) = line.split_once('\t').unwrap_or(("", line));
            println!("  {distance}  {body}");
        }
        if position < TEXT_QUERIES_SHOWN {
            text_queries(cluster, text, &literal)?;
        }
    }
    Ok(())
}

/// The same query as a BM25 keyword search and as a hybrid search (`strata_hybrid`).
fn text_queries(cluster: &Cluster, text: &str, literal: &str) -> Result {
    let quoted = text.replace('\'', "''");
    let bm25 = format!(
        "SELECT to_char(-(body <@> '{quoted}'), 'FM990.00'), body FROM demo_items \
         ORDER BY body <@> '{quoted}' LIMIT 5"
    );
    let rows = process::output(cluster.psql("postgres").args(["-A", "-t", "-F", "\t", "-c", &bm25]))?;
    println!("  BM25 (ORDER BY body <@> '…' LIMIT 5; score, larger is better):");
    for line in rows.lines() {
        let (score, body) = line.split_once('\t').unwrap_or(("", line));
        println!("  {score:>6}  {body}");
    }
    let hybrid = format!(
        "SELECT to_char(h.score, 'FM0.0000'), coalesce(h.text_rank::text, '-'), \
         coalesce(h.vector_rank::text, '-'), d.body \
         FROM strata_hybrid('demo_items', 'body', 'embedding', '{quoted}', '{literal}'::vector, k => 5) h \
         JOIN demo_items d ON d.ctid = h.ctid ORDER BY h.score DESC"
    );
    let rows = process::output(cluster.psql("postgres").args(["-A", "-t", "-F", "\t", "-c", &hybrid]))?;
    println!("  hybrid (strata_hybrid: reciprocal rank fusion; score, BM25 rank, vector rank):");
    for line in rows.lines() {
        let fields: Vec<&str> = line.splitn(4, '\t').collect();
        if let [score, text_rank, vector_rank, body] = fields[..] {
            println!("  {score}  {text_rank:>2} {vector_rank:>2}  {body}");
        }
    }
    Ok(())
}

/// Sets up the machine, builds and installs pg_strata, starts a throwaway cluster, loads the demo
/// sample and prints the 5 nearest neighbours of a few held-out queries, and for two of them the
/// BM25 and hybrid results.
pub fn run(options: &Options) -> Result {
    setup::ensure_prerequisites()?;
    setup::build_and_install()?;
    let dir = options.dir.clone().unwrap_or_else(default_dir);
    let cluster = Cluster::start(&dir, options.port.unwrap_or(DEFAULT_PORT))?;
    println!("==> cluster running: {}", cluster.conninfo());
    load_sample(&cluster)?;
    println!(
        "==> example: SELECT body FROM demo_items ORDER BY embedding <=> $query_embedding LIMIT 5\n    \
         (cosine distance, smaller is nearer; queries are held-out texts not in the table)"
    );
    run_queries(&cluster)?;
    println!("\nConnect:  psql \"{}\"", cluster.conninfo());
    println!("Stop:     cargo xtask cluster stop --dir {}", cluster.dir.display());
    Ok(())
}
