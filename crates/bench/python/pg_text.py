"""BM25 search speed on the 100k PyPI texts (shared/data/pypi-minilm-100k): pg_strata's bm25
index against PostgreSQL's built-in full-text search, and hybrid search next to its branches.

Driven by `cargo xtask bench --text`. Systems, each asked for the top 10:

- **strata bm25**: `ORDER BY body <@> to_bm25query(q, 'docs_bm25') LIMIT 10` (Block-Max WAND);
- **strata bm25, exhaustive**: the same under `strata.bm25_block_max = off` (every posting of
  the query's lexemes scored), which shows what Block-Max WAND saves; its ids must equal the
  first's or this exits 1;
- **GIN + ts_rank (OR)**: a GIN index on a stored `to_tsvector('english', body)` column,
  `WHERE tsv @@ q ORDER BY ts_rank(tsv, q) DESC LIMIT 10` with `q` the OR of the query's
  lexemes: the rows BM25 ranks (any lexeme), ranked by ts_rank;
- **GIN + ts_rank (AND)**: the same with `plainto_tsquery` (every lexeme), fewer rows to rank;
- **GIN on to_tsvector(body) + ts_rank (OR)**: the form PostgreSQL's documentation starts from, an
  expression index `USING gin (to_tsvector('english', body))` with no stored column, so ts_rank
  re-tokenises every matching row.

Queries: the held-out query texts cut to their first n words, n cycling through each length
bucket (1–2, 3–4, 5–7, 8+ words), only texts with at least n words. Per bucket and system: client
wall latency p50/p99 over the unix socket (prepared statements, after a warm-up). Over every
bucket's queries: QPS with 1 and 2 clients (pgbench, prepared, random query each transaction),
build time and index size. Hybrid: `strata_hybrid` (k 10, depth 40) on the full query texts and
their MiniLM vectors, next to its two branches alone (each LIMIT 40).

Writes text.json, text.md, text-latency.png and text-qps.png to --out.
"""

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from pg_dynamic import pgbench
from vecs import read_vecs

BUCKETS = [("1-2", 1, 2), ("3-4", 3, 4), ("5-7", 5, 7), ("8+", 8, 12)]
BM25 = "SELECT id FROM docs ORDER BY body <@> to_bm25query({q}, 'docs_bm25') LIMIT 10"
GIN_OR = "SELECT id FROM docs_fts WHERE tsv @@ {or_q} ORDER BY ts_rank(tsv, {or_q}) DESC LIMIT 10"
GIN_AND = "SELECT id FROM docs_fts WHERE tsv @@ {and_q} ORDER BY ts_rank(tsv, {and_q}) DESC LIMIT 10"
TSV = "to_tsvector('english', body)"
GIN_EXPR = f"SELECT id FROM docs WHERE {TSV} @@ {{or_q}} ORDER BY ts_rank({TSV}, {{or_q}}) DESC LIMIT 10"
SYSTEMS = {
    "strata bm25": (BM25, {}),
    "strata bm25, exhaustive": (BM25, {"strata.bm25_block_max": "off"}),
    "GIN + ts_rank (OR)": (GIN_OR, {}),
    "GIN + ts_rank (AND)": (GIN_AND, {}),
    "GIN on to_tsvector(body) + ts_rank (OR)": (GIN_EXPR, {}),
}


def connect(args):
    conn = psycopg.connect(f"host={args.host} port={args.port} user=postgres dbname=strata_bench", autocommit=True)
    register_vector(conn)
    return conn


def timed(conn, sql, params=None):
    started = time.perf_counter()
    conn.execute(sql, params)
    return time.perf_counter() - started


def load(conn, texts, base):
    conn.execute("DROP TABLE IF EXISTS docs, docs_fts, text_queries")
    conn.execute(f"CREATE TABLE docs (id int PRIMARY KEY, body text, embedding vector({base.shape[1]}))")
    with conn.cursor().copy("COPY docs (id, body, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "text", "vector"])
        for i, (text, row) in enumerate(zip(texts, base)):
            copy.write_row([i, text, row])
    conn.execute("VACUUM ANALYZE docs")


def queries_by_bucket(query_texts, per_bucket):
    """{bucket: [query text]}: held-out texts cut to n words, n cycling through the bucket."""
    out = {}
    for name, lo, hi in BUCKETS:
        chosen, n = [], lo
        for text in query_texts:
            words = text.split()
            if len(words) >= n:
                chosen.append(" ".join(words[:n]))
                n = lo if n == hi else n + 1
            if len(chosen) == per_bucket:
                break
        out[name] = chosen
    return out


def store_queries(conn, buckets):
    """The queries in a table (for pgbench): text, OR and AND tsqueries."""
    conn.execute("CREATE TABLE text_queries (qid int PRIMARY KEY, bucket text, q text, or_q tsquery, and_q tsquery)")
    qid = 0
    for bucket, queries in buckets.items():
        for q in queries:
            conn.execute(
                "INSERT INTO text_queries SELECT %s, %s, %s, "
                "coalesce(to_tsquery('simple', string_agg(quote_literal(l), ' | ')), ''::tsquery), plainto_tsquery('english', %s) "
                "FROM unnest(tsvector_to_array(to_tsvector('english', %s))) l",
                (qid, bucket, q, q, q))
            qid += 1
    conn.execute("ANALYZE text_queries")
    return qid


def statement(template):
    return template.format(q="%(q)s", or_q="%(or_q)s::tsquery", and_q="%(and_q)s::tsquery")


def latencies(conn, system, rows, warmup=10):
    template, gucs = SYSTEMS[system]
    for k, v in gucs.items():
        conn.execute(f"SET {k} = {v}")
    conn.execute("SET jit = off")
    sql = statement(template)
    for row in rows[:warmup]:
        conn.execute(sql, row, prepare=True).fetchall()
    walls, results = [], []
    for row in rows:
        started = time.perf_counter()
        results.append([r[0] for r in conn.execute(sql, row, prepare=True).fetchall()])
        walls.append((time.perf_counter() - started) * 1e3)
    for k in gucs:
        conn.execute(f"RESET {k}")
    return walls, results


def pgbench_tps(args, template, gucs, clients, seconds, queries):
    sub = lambda col: f"(SELECT {col} FROM text_queries WHERE qid = :qid)"
    script = f"\\set qid random(0, {queries - 1})\n" + template.format(q=sub("q"), or_q=sub("or_q"), and_q=sub("and_q")) + ";\n"
    return pgbench(args.bindir, args.host, args.port, "strata_bench", script, clients, seconds, {"jit": "off", **gucs})


def pct(values, p):
    return round(float(np.percentile(values, p)), 3)


def ratio(a, b):
    return round(a / b, 2) if a and b else None


def hybrid(conn, query_texts, query_vecs, n):
    """p50/p99 of strata_hybrid and of its two branches alone, on full query texts."""
    forms = {
        "hybrid (strata_hybrid, k 10, depth 40)":
            "SELECT * FROM strata_hybrid('docs', 'body', 'embedding', %(q)s, %(v)s, k => 10, depth => 40)",
        "bm25 branch (LIMIT 40)": "SELECT id FROM docs ORDER BY body <@> to_bm25query(%(q)s, 'docs_bm25') LIMIT 40",
        "vector branch (LIMIT 40)": "SELECT id FROM docs ORDER BY embedding <=> %(v)s LIMIT 40",
    }
    rows = [{"q": q, "v": v} for q, v in zip(query_texts[:n], query_vecs[:n])]
    out = {}
    for name, sql in forms.items():
        for row in rows[:10]:
            conn.execute(sql, row, prepare=True).fetchall()
        walls = []
        for row in rows:
            started = time.perf_counter()
            conn.execute(sql, row, prepare=True).fetchall()
            walls.append((time.perf_counter() - started) * 1e3)
        out[name] = {"p50_ms": pct(walls, 50), "p99_ms": pct(walls, 99), "queries": len(rows)}
    return out


def plots(report, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    buckets = [b for b, _, _ in BUCKETS]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for system, per in report["latency"].items():
        ax.plot(buckets, [per[b]["p50_ms"] for b in buckets], marker="o", label=system)
    ax.set_yscale("log")
    ax.set_xlabel("query length (words)")
    ax.set_ylabel("top-10 p50 latency (ms, log)")
    ax.set_title(f"BM25 top-10 on {report['rows']:,} PyPI texts")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "text-latency.png", dpi=120)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4))
    systems = list(report["qps"])
    width = 0.38
    xs = np.arange(len(systems))
    ax.bar(xs - width / 2, [report["qps"][s]["1"] for s in systems], width, label="1 client")
    ax.bar(xs + width / 2, [report["qps"][s]["2"] for s in systems], width, label="2 clients")
    ax.set_xticks(xs, systems, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("queries per second (log)")
    ax.set_title("BM25 top-10 throughput, all buckets")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "text-qps.png", dpi=120)
    plt.close(fig)


def markdown(report):
    h = report["headline"]
    lines = [
        "# BM25 search: pg_strata's bm25 index vs PostgreSQL's full-text search", "",
        f"{report['rows']:,} PyPI package summaries (shared/data/pypi-minilm-100k), queries cut from the held-out "
        f"query texts, {report['per_bucket']} per length bucket; top 10; client wall time over the unix socket "
        f"(prepared). Machine: {report['machine']}. Produced by `cargo xtask bench --text` "
        "(crates/bench/python/pg_text.py). Machines here are noisy: read the ratios.", "",
        "## Headline", "",
        f"- p50 over all queries: strata bm25 {h['strata_p50_ms']} ms; GIN expression index on to_tsvector(body) + "
        f"ts_rank (OR) {h['gin_expression_or_p50_ms']} ms: **{h['p50_speedup_vs_gin_expression_ts_rank_or']}×** faster.",
        f"- Against the stronger form, GIN on a stored tsvector column + ts_rank (OR), {h['gin_or_p50_ms']} ms: "
        f"**{h['p50_speedup_vs_gin_ts_rank_or']}×** (AND form, which ranks only rows holding every lexeme: "
        f"{h['p50_speedup_vs_gin_ts_rank_and']}×).",
        f"- Block-Max WAND vs exhaustive scoring in the same index: {h['p50_speedup_bmw_vs_exhaustive']}× at p50.",
        f"- QPS at 2 clients: {h['qps2_ratio_vs_gin_ts_rank_or']}× GIN + ts_rank (OR).",
        f"- Build: {h['build_seconds']} s vs GIN {h['gin_build_seconds']} s (plus {h['tsvector_column_seconds']} s to "
        f"store the tsvector column); size {h['index_mb']} MB vs GIN {h['gin_index_mb']} MB.", "",
        "## Top-10 latency by query length (ms)", "",
        "| system | " + " | ".join(f"{b} p50 | {b} p99" for b, _, _ in BUCKETS) + " |",
        "|---|" + "---|" * (2 * len(BUCKETS)),
    ]
    for system, per in report["latency"].items():
        lines.append(f"| {system} | " + " | ".join(f"{per[b]['p50_ms']} | {per[b]['p99_ms']}" for b, _, _ in BUCKETS) + " |")
    lines += ["", "p50 speedup of strata bm25 by bucket: " + ", ".join(
        f"{b}: {report['speedup_by_bucket'][b]['vs_gin_expression_or']}× vs GIN expression OR, "
        f"{report['speedup_by_bucket'][b]['vs_gin_or']}× vs GIN column OR, {report['speedup_by_bucket'][b]['vs_exhaustive']}× vs exhaustive"
        for b, _, _ in BUCKETS) + ".", "",
        "## Throughput (queries per second, every bucket's queries at random)", "",
        "| system | 1 client | 2 clients |", "|---|---|---|"]
    lines += [f"| {s} | {q['1']} | {q['2']} |" for s, q in report["qps"].items()]
    lines += ["", "## Build and size", "", "| index | build (s) | size (MB) |", "|---|---|---|",
              f"| strata bm25 ({report['build']['segments']} segment(s)) | {report['build']['bm25_seconds']} | {report['build']['bm25_mb']} |",
              f"| GIN on a stored tsvector column | {report['build']['gin_seconds']} (+ {report['build']['tsvector_column_seconds']} column) | {report['build']['gin_mb']} |",
              f"| GIN on to_tsvector('english', body) | {report['build']['gin_expression_seconds']} | {report['build']['gin_expression_mb']} |",
              "", "## Hybrid search next to its branches (full query texts, ms)", "",
              "| query | p50 | p99 |", "|---|---|---|"]
    lines += [f"| {name} | {r['p50_ms']} | {r['p99_ms']} |" for name, r in report["hybrid"].items()]
    lines += ["", "![latency](text-latency.png)", "", "![qps](text-qps.png)", ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--bindir", required=True)
    parser.add_argument("--pgvector", action="store_true", help="accepted for symmetry; pgvector has no text index")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--per-bucket", type=int, default=100)
    parser.add_argument("--gin-per-bucket", type=int, default=40, help="GIN + ts_rank is slow: fewer of each bucket's queries")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--hybrid-queries", type=int, default=200)
    args = parser.parse_args()
    data, out = Path(args.data), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    texts = [json.loads(line)["text"] for _, line in zip(range(args.rows), open(data / "base_texts.jsonl"))]
    base = read_vecs(data / "base.fvecs", args.rows, "<f4")
    query_texts = [json.loads(line)["text"] for line in open(data / "query_texts.jsonl")]
    query_vecs = read_vecs(data / "query.fvecs", None, "<f4")
    conn = connect(args)
    assert conn.execute("SELECT count(*) FROM pg_settings WHERE name = 'strata.bm25_block_max'").fetchone()[0] == 1
    print(f"==> text: loading {len(texts):,} texts")
    load(conn, texts, base)
    conn.execute("SET maintenance_work_mem = '1GB'")
    bm25_seconds = timed(conn, "CREATE INDEX docs_bm25 ON docs USING bm25 (body) WITH (text_config = 'english')")
    conn.execute("SELECT strata_wait_for_merges('docs_bm25')")
    bm25_bytes = int(conn.execute("SELECT coalesce(sum(bytes), 0) FROM strata_index_stats('docs_bm25') WHERE part = 'segment'").fetchone()[0])
    bm25_bytes += conn.execute("SELECT pg_relation_size('docs_bm25')").fetchone()[0]
    segments = conn.execute("SELECT count(*) FROM strata_index_stats('docs_bm25') WHERE part = 'segment'").fetchone()[0]
    column_seconds = timed(conn, "CREATE TABLE docs_fts AS SELECT id, to_tsvector('english', body) AS tsv FROM docs")
    conn.execute("VACUUM ANALYZE docs_fts")
    gin_seconds = timed(conn, "CREATE INDEX docs_fts_gin ON docs_fts USING gin (tsv)")
    gin_bytes = conn.execute("SELECT pg_relation_size('docs_fts_gin')").fetchone()[0]
    expr_seconds = timed(conn, f"CREATE INDEX docs_gin ON docs USING gin ({TSV})")
    expr_bytes = conn.execute("SELECT pg_relation_size('docs_gin')").fetchone()[0]
    conn.execute("SET maintenance_work_mem = '2GB'")
    print("==> text: building the vector index for hybrid search")
    conn.execute("CREATE INDEX docs_embedding ON docs USING strata (embedding vector_cosine_ops)")
    conn.execute("RESET maintenance_work_mem")
    print(f"==> text: bm25 build {bm25_seconds:.1f} s ({segments} segment(s), {bm25_bytes / 1e6:.1f} MB); "
          f"GIN {gin_seconds:.1f} s + {column_seconds:.1f} s column ({gin_bytes / 1e6:.1f} MB)")

    buckets = queries_by_bucket(query_texts, args.per_bucket)
    total = store_queries(conn, buckets)
    rows = {b: conn.execute("SELECT q, or_q::text, and_q::text FROM text_queries WHERE bucket = %s ORDER BY qid", (b,)).fetchall()
            for b in buckets}
    rows = {b: [{"q": q, "or_q": o, "and_q": a} for q, o, a in r] for b, r in rows.items()}
    latency, results, walls = {}, {}, {}
    for system in SYSTEMS:
        latency[system] = {}
        for bucket, bucket_rows in rows.items():
            chosen = bucket_rows if system.startswith("strata") else bucket_rows[: args.gin_per_bucket]
            walls[(system, bucket)], found = latencies(conn, system, chosen)
            measured = walls[(system, bucket)]
            latency[system][bucket] = {"p50_ms": pct(measured, 50), "p99_ms": pct(measured, 99), "queries": len(chosen)}
            results[(system, bucket)] = found
            print(f"    {system:26} {bucket:4} p50 {latency[system][bucket]['p50_ms']:8.3f} ms  p99 {latency[system][bucket]['p99_ms']:8.3f} ms")
    differ = sum(a != b for bucket in rows for a, b in zip(results[("strata bm25", bucket)], results[("strata bm25, exhaustive", bucket)]))
    qps = {}
    for system in ["strata bm25", "strata bm25, exhaustive", "GIN + ts_rank (OR)", "GIN on to_tsvector(body) + ts_rank (OR)"]:
        template, gucs = SYSTEMS[system]
        qps[system] = {str(c): round(pgbench_tps(args, template, gucs, c, args.seconds, total), 1) for c in (1, 2)}
        print(f"    {system:26} QPS 1 client {qps[system]['1']}, 2 clients {qps[system]['2']}")
    hybrid_report = hybrid(conn, query_texts, query_vecs, args.hybrid_queries)
    for name, r in hybrid_report.items():
        print(f"    {name:40} p50 {r['p50_ms']} ms  p99 {r['p99_ms']} ms")

    p50 = {s: pct(sum((walls[(s, b)] for b in rows), []), 50) for s in SYSTEMS}
    speedup_by_bucket = {b: {"vs_gin_expression_or": ratio(latency["GIN on to_tsvector(body) + ts_rank (OR)"][b]["p50_ms"],
                                                           latency["strata bm25"][b]["p50_ms"]),
                             "vs_gin_or": ratio(latency["GIN + ts_rank (OR)"][b]["p50_ms"], latency["strata bm25"][b]["p50_ms"]),
                             "vs_gin_and": ratio(latency["GIN + ts_rank (AND)"][b]["p50_ms"], latency["strata bm25"][b]["p50_ms"]),
                             "vs_exhaustive": ratio(latency["strata bm25, exhaustive"][b]["p50_ms"], latency["strata bm25"][b]["p50_ms"])}
                         for b in rows}
    report = {
        "rows": len(texts), "per_bucket": args.per_bucket, "gin_per_bucket": args.gin_per_bucket,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores", "quick": args.quick,
        "buckets": {b: {"words": [lo, hi]} for b, lo, hi in BUCKETS},
        "latency": latency, "p50_all_ms": p50, "speedup_by_bucket": speedup_by_bucket, "qps": qps,
        "build": {"bm25_seconds": round(bm25_seconds, 2), "bm25_mb": round(bm25_bytes / 1e6, 1), "segments": segments,
                  "gin_seconds": round(gin_seconds, 2), "tsvector_column_seconds": round(column_seconds, 2),
                  "gin_mb": round(gin_bytes / 1e6, 1), "gin_expression_seconds": round(expr_seconds, 2),
                  "gin_expression_mb": round(expr_bytes / 1e6, 1)},
        "hybrid": hybrid_report,
        "bmw_vs_exhaustive_differing_results": differ,
        "headline": {
            "strata_p50_ms": p50["strata bm25"], "gin_or_p50_ms": p50["GIN + ts_rank (OR)"],
            "gin_expression_or_p50_ms": p50["GIN on to_tsvector(body) + ts_rank (OR)"],
            "p50_speedup_vs_gin_expression_ts_rank_or": ratio(p50["GIN on to_tsvector(body) + ts_rank (OR)"], p50["strata bm25"]),
            "p50_speedup_vs_gin_ts_rank_or": ratio(p50["GIN + ts_rank (OR)"], p50["strata bm25"]),
            "p50_speedup_vs_gin_ts_rank_and": ratio(p50["GIN + ts_rank (AND)"], p50["strata bm25"]),
            "p50_speedup_bmw_vs_exhaustive": ratio(p50["strata bm25, exhaustive"], p50["strata bm25"]),
            "qps2_ratio_vs_gin_ts_rank_or": ratio(qps["strata bm25"]["2"], qps["GIN + ts_rank (OR)"]["2"]),
            "build_seconds": round(bm25_seconds, 2), "gin_build_seconds": round(gin_seconds, 2),
            "tsvector_column_seconds": round(column_seconds, 2),
            "index_mb": round(bm25_bytes / 1e6, 1), "gin_index_mb": round(gin_bytes / 1e6, 1),
        },
    }
    (out / "text.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "text.md").write_text(markdown(report))
    plots(report, out)
    print(f"==> text: p50 {p50['strata bm25']} ms vs GIN + ts_rank (OR) {p50['GIN + ts_rank (OR)']} ms "
          f"({report['headline']['p50_speedup_vs_gin_ts_rank_or']}×); wrote {out}/text.json, text.md, text-*.png")
    if differ:
        raise SystemExit(f"Block-Max WAND and exhaustive scoring returned different top-10 ids for {differ} queries")


if __name__ == "__main__":
    main()
