"""pg_strata vs pgvector inside PostgreSQL, side by side in one cluster (one database each).

Driven by `cargo xtask bench`, which starts the cluster, builds pgvector from a local checkout
when one is given, and creates the virtual environment. Measures per index: build time, size
(relation + segment files), recall@10 against exact ground truth over held-out queries, client
wall p50/p99 over the unix socket (prepared statements: what a user sees; the headline ratios
use it), server-side latency (EXPLAIN ANALYZE execution time) p50/p95/p99 beside it, and QPS
with 1 and 2 clients (pgbench, prepared), sweeping each index's dial. Then, for
pg_strata HNSW and pgvector HNSW at their best static dial, the dynamic workloads of
`pg_dynamic.py`: insert throughput, the sliding-window runbook and mixed mode.
Writes pg.json, pg.md and plots (recall vs latency, recall vs QPS, runbook recall per step,
runbook and insert throughput).
"""

import argparse
import json
import os
import platform
import subprocess
import time

import numpy as np

from vecs import read_vecs
import psycopg
from pgvector.psycopg import register_vector

from pg_dynamic import insert_throughput, mixed, pgbench, runbook

def ground_truth(base, queries, k=10):
    b = base / np.linalg.norm(base, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    return np.argsort(-(q @ b.T), axis=1, kind="stable")[:, :k]


def connect(args, db):
    conn = psycopg.connect(f"host={args.host} port={args.port} user=postgres dbname={db}", autocommit=True)
    register_vector(conn)
    return conn


def load(conn, base, queries):
    conn.execute("DROP TABLE IF EXISTS items, queries")
    conn.execute(f"CREATE TABLE items (id bigint PRIMARY KEY, embedding vector({base.shape[1]}))")
    conn.execute(f"CREATE TABLE queries (qid int PRIMARY KEY, q vector({base.shape[1]}))")
    started = time.perf_counter()
    with conn.cursor().copy("COPY items FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "vector"])
        for i, row in enumerate(base):
            copy.write_row([i, row])
    with conn.cursor().copy("COPY queries FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "vector"])
        for i, row in enumerate(queries):
            copy.write_row([i, row])
    conn.execute("VACUUM ANALYZE items")
    conn.execute("VACUUM ANALYZE queries")
    return time.perf_counter() - started


def pgbench_tps(args, db, gucs, clients, seconds):
    script = "\\set qid random(0, {})\nSELECT id FROM items ORDER BY embedding <=> (SELECT q FROM queries WHERE qid = :qid) LIMIT 10;\n".format(args.queries - 1)
    path = os.path.join(args.out, f".pgbench-{db}.sql")
    open(path, "w").write(script)
    env = dict(os.environ, PGOPTIONS=" ".join(f"-c {k}={v}" for k, v in gucs.items()))
    out = subprocess.run([os.path.join(args.bindir, "pgbench"), "-h", args.host, "-p", str(args.port), "-U", "postgres", "-n",
                          "-M", "prepared", "-f", path, "-c", str(clients), "-j", str(clients), "-T", str(seconds), db],
                         env=env, capture_output=True, text=True)
    os.remove(path)
    for line in out.stdout.splitlines():
        if line.startswith("tps"):
            return float(line.split("=")[1].split()[0])
    raise RuntimeError(f"pgbench failed: {out.stderr}")


SEARCH_SQL = "SELECT id FROM items ORDER BY embedding <=> %s LIMIT 10"


def timed_search(conn, queries, truth, warmup):
    """Client wall times (ms) of the benchmark query for each of `queries` (prepared, after
    `warmup` unmeasured queries) and how many of each answer's ids are in `truth`'s row."""
    for q in queries[:warmup]:
        conn.execute(SEARCH_SQL, (q,), prepare=True).fetchall()
    walls, hits = [], 0
    for q, gt in zip(queries, truth):
        t = time.perf_counter()
        rows = conn.execute(SEARCH_SQL, (q,), prepare=True).fetchall()
        walls.append((time.perf_counter() - t) * 1e3)
        hits += len({r[0] for r in rows} & set(gt.tolist()))
    return walls, hits


def server_times(conn, queries):
    """The server's execution time (ms, EXPLAIN ANALYZE) of the benchmark query for each query."""
    return [conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + SEARCH_SQL, (q,)).fetchone()[0][0]["Execution Time"]
            for q in queries]


def measure(args, conn, db, gucs, queries, truth):
    for k, v in gucs.items():
        conn.execute(f"SET {k} = {v}")
    walls, hits = timed_search(conn, queries, truth, warmup=min(50, len(queries)))
    server = np.array(server_times(conn, queries[: args.explain_queries]))
    return {
        "recall_at_10": hits / (10 * len(queries)),
        "server_p50_ms": float(np.percentile(server, 50)), "server_p95_ms": float(np.percentile(server, 95)),
        "server_p99_ms": float(np.percentile(server, 99)), "client_p50_ms": float(np.percentile(walls, 50)),
        "client_p99_ms": float(np.percentile(walls, 99)),
        "qps_1": pgbench_tps(args, db, gucs, 1, args.seconds), "qps_2": pgbench_tps(args, db, gucs, 2, args.seconds),
    }


def index_size(conn, name, strata):
    size = conn.execute("SELECT pg_relation_size(%s::regclass)", (name,)).fetchone()[0]
    if strata:
        size += conn.execute("SELECT coalesce(sum(bytes), 0) FROM strata_index_stats(%s::regclass) WHERE part = 'segment'", (name,)).fetchone()[0]
    return int(size)


def run_system(args, conn, db, name, create_sql, dial, values, extra, queries, truth, strata):
    conn.execute("RESET ALL")  # no setting of the previous system carries over
    conn.execute("DROP INDEX IF EXISTS bench_idx")
    conn.execute("SET maintenance_work_mem = '2GB'")
    started = time.perf_counter()
    conn.execute(create_sql)
    build = time.perf_counter() - started
    if strata:
        conn.execute("SELECT strata_flush('bench_idx')")
    size = index_size(conn, "bench_idx", strata)
    points = []
    for value in values:
        gucs = dict(extra, **{dial: value})
        point = measure(args, conn, db, gucs, queries, truth)
        point["dial"] = value
        points.append(point)
        print(f"  {name} {dial}={value}: recall {point['recall_at_10']:.4f}, client p50 {point['client_p50_ms']:.3f} ms, "
              f"server p50 {point['server_p50_ms']:.3f} ms, QPS {point['qps_1']:.0f}/{point['qps_2']:.0f}", flush=True)
    conn.execute("DROP INDEX bench_idx")
    return {"system": name, "dial": dial, "build_seconds": build, "index_bytes": size, "points": points}


def at_defaults(args, conn, db, name, create_sql, queries, truth, strata, dials):
    """A new user's index: default maintenance_work_mem and index options, measured right after
    CREATE INDEX returns at each of `dials` (a dict of settings, {} = the defaults); for pg_strata
    also once the background merges are done. Settings are the server's defaults throughout."""
    conn.execute("RESET ALL")
    conn.execute("DROP INDEX IF EXISTS bench_idx")
    started = time.perf_counter()
    conn.execute(create_sql)
    build = time.perf_counter() - started
    segments = lambda: conn.execute("SELECT count(*) FROM strata_index_stats('bench_idx') WHERE part = 'segment'").fetchone()[0]
    points = []
    phases = [("right after CREATE INDEX", None)] + ([("after background merges", "SELECT strata_wait_for_merges('bench_idx')")] if strata else [])
    for when, before in phases:
        if before:
            conn.execute(before)
        for gucs in dials:
            point = measure(args, conn, db, gucs, queries, truth)
            point.update({"when": when, "settings": gucs, "segments": segments() if strata else None})
            conn.execute("RESET ALL")
            points.append(point)
            print(f"  {name} at defaults, {when}, {gucs or 'default dial'}: recall {point['recall_at_10']:.4f}, "
                  f"client p50 {point['client_p50_ms']:.3f} ms, server p50 {point['server_p50_ms']:.3f} ms" + (f", {point['segments']} segments" if strata else ""), flush=True)
    conn.execute("DROP INDEX bench_idx")
    return {"system": name, "create_sql": create_sql, "build_seconds": build, "points": points}


def dynamic(args, db, name, index_sql, gucs, base, queries, drain_sql=None):
    """Insert throughput, runbook and mixed mode for one system."""
    conninfo = f"host={args.host} port={args.port} user=postgres dbname={db}"
    rows = base[: args.dynamic_rows]
    subset = queries[: args.runbook_queries]
    print(f"  {name}: dynamic workloads on {len(rows)} rows ({', '.join(f'{k}={v}' for k, v in gucs.items())})", flush=True)
    return {
        "system": name,
        "gucs": gucs,
        "rows": len(rows),
        "insert": insert_throughput(
            conninfo,
            lambda script, clients, seconds, gucs: pgbench(args.bindir, args.host, args.port, db, script, clients, seconds, gucs),
            rows, index_sql, len(rows) // 2, args.insert_seconds, drain_sql),
        "runbook": runbook(conninfo, rows, subset, index_sql, gucs, args.cycles),
        "mixed": mixed(conninfo, rows, subset, index_sql, gucs, args.mixed_seconds),
    }


def best_at(system, target=0.95, key="client_p50_ms"):
    """The point of `system` reaching recall@10 `target` with the lowest `key` (client p50: what
    a user sees); None when no point reaches it."""
    ok = [p for p in system["points"] if p["recall_at_10"] >= target]
    return min(ok, key=lambda p: p[key]) if ok else None


def repository_relative(path: str) -> str:
    """`path` relative to the repository root, so reports name no directory of this machine."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
    return os.path.relpath(os.path.realpath(path), os.path.realpath(root))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bindir", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--explain-queries", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=6)
    parser.add_argument("--out", required=True)
    parser.add_argument("--pgvector", action="store_true")
    parser.add_argument("--shared-buffers", default="")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--dynamic-rows", type=int, default=0, help="rows for the dynamic workloads (0: all; quick: 20,000)")
    parser.add_argument("--insert-seconds", type=float, default=0, help="per insert configuration (default 8; quick 4)")
    parser.add_argument("--runbook-queries", type=int, default=0, help="queries per runbook search step (default 1000; quick 200)")
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--mixed-seconds", type=float, default=0, help="mixed mode duration (default 20; quick 8)")
    args = parser.parse_args()
    args.dynamic_rows = args.dynamic_rows or (20_000 if args.quick else args.rows)
    args.insert_seconds = args.insert_seconds or (4 if args.quick else 8)
    args.runbook_queries = args.runbook_queries or (200 if args.quick else 1000)
    args.mixed_seconds = args.mixed_seconds or (8 if args.quick else 20)

    base = read_vecs(os.path.join(args.data, "base.fvecs"), args.rows, "<f4")
    queries = read_vecs(os.path.join(args.data, "query.fvecs"), args.queries, "<f4")
    truth = ground_truth(base, queries)
    lists = max(1, int(round(np.sqrt(len(base)))))
    quick = args.quick
    systems = []
    versions = {}

    with connect(args, "strata_bench") as conn:
        load_seconds = load(conn, base, queries)
        versions["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]
        versions["pg_strata"] = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_strata'").fetchone()[0]
        print(f"loaded {len(base)} rows into strata_bench in {load_seconds:.1f} s", flush=True)
        strata = [
            ("pg_strata hnsw (m=16, ef_construction=64)", "CREATE INDEX bench_idx ON items USING strata (embedding vector_cosine_ops) WITH (kind = 'hnsw', m = 16, ef_construction = 64)",
             "strata.ef_search", [40, 100] if quick else [10, 20, 40, 64, 100, 200, 400], {}),
            # Codes only in the segments; the 40 best estimates are reranked from the table's rows.
            (f"pg_strata ivf 4-bit, rerank from heap (lists={lists})",
             f"CREATE INDEX bench_idx ON items USING strata (embedding vector_cosine_ops) WITH (kind = 'ivf', bits = 4, lists = {lists}, rerank = 'heap')",
             "strata.probes", [32, 64] if quick else [8, 16, 32, 48, 64, 100], {"strata.ef_search": 10, "strata.oversample": 4}),
            ("pg_strata quantized flat 4-bit", "CREATE INDEX bench_idx ON items USING strata (embedding vector_cosine_ops) WITH (kind = 'flat', bits = 4)",
             "strata.oversample", [4] if quick else [1, 2, 4], {}),
        ]
        for name, sql, dial, values, extra in strata:
            systems.append(run_system(args, conn, "strata_bench", name, sql, dial, values, dict({"enable_seqscan": "off"}, **extra), queries, truth, True))
        hnsw_best = best_at(systems[0])
        defaults = [at_defaults(args, conn, "strata_bench", "pg_strata", "CREATE INDEX bench_idx ON items USING strata (embedding vector_cosine_ops)",
                                queries, truth, True, [{}])]
        dynamics = [dynamic(args, "strata_bench", "pg_strata hnsw", strata[0][1].replace("bench_idx ON items", "ON {table}"),
                            {"strata.ef_search": hnsw_best["dial"] if hnsw_best else 100}, base, queries,
                            drain_sql="SELECT strata_flush('ins_items_embedding_idx'); SELECT strata_wait_for_merges('ins_items_embedding_idx')")]
        print("  no vector index: insert throughput of the same table (the commit-bound ceiling)", flush=True)
        no_index = insert_throughput(
            f"host={args.host} port={args.port} user=postgres dbname=strata_bench",
            lambda script, clients, seconds, gucs: pgbench(args.bindir, args.host, args.port, "strata_bench", script, clients, seconds, gucs),
            base[: args.dynamic_rows], None, args.dynamic_rows // 2, args.insert_seconds)

    if args.pgvector:
        with connect(args, "pgvector_bench") as conn:
            load(conn, base, queries)
            versions["pgvector"] = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
            pgv = [
                ("pgvector hnsw (m=16, ef_construction=64)", "CREATE INDEX bench_idx ON items USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)",
                 "hnsw.ef_search", [40, 100] if quick else [10, 20, 40, 80, 120, 200, 400]),
                (f"pgvector ivfflat (lists={lists})", f"CREATE INDEX bench_idx ON items USING ivfflat (embedding vector_cosine_ops) WITH (lists = {lists})",
                 "ivfflat.probes", [10, 50] if quick else [1, 2, 4, 8, 16, 32, 50]),
            ]
            for name, sql, dial, values in pgv:
                systems.append(run_system(args, conn, "pgvector_bench", name, sql, dial, values, {"enable_seqscan": "off"}, queries, truth, False))
            theirs_best = best_at(systems[-2])
            dials = [{}] + ([{"hnsw.ef_search": theirs_best["dial"]}] if theirs_best else [])
            defaults.append(at_defaults(args, conn, "pgvector_bench", "pgvector hnsw", "CREATE INDEX bench_idx ON items USING hnsw (embedding vector_cosine_ops)",
                                        queries, truth, False, dials))
            dynamics.append(dynamic(args, "pgvector_bench", "pgvector hnsw", pgv[0][1].replace("bench_idx ON items", "ON {table}"),
                                    {"hnsw.ef_search": theirs_best["dial"] if theirs_best else 100}, base, queries))

    ours = [s for s in systems if s["system"].startswith("pg_strata")]
    theirs = next((s for s in systems if s["system"].startswith("pgvector hnsw")), None)
    best_ours = min((p for s in ours for p in [best_at(s)] if p), key=lambda p: p["client_p50_ms"], default=None)
    best_ours_system = next((s for s in ours if best_ours in s["points"]), None)
    best_theirs = best_at(theirs) if theirs else None

    def ratio(a, b):
        return None if a is None or b in (None, 0) else a / b

    # Ratios of client p50 (what a user sees); the server-side ratio (EXPLAIN ANALYZE execution
    # time, at each system's fastest point by server p50) is kept beside it.
    best_ours_server = min((p for s in ours for p in [best_at(s, key="server_p50_ms")] if p), key=lambda p: p["server_p50_ms"], default=None)
    best_theirs_server = best_at(theirs, key="server_p50_ms") if theirs else None
    headline = {
        "p50_speedup_vs_pgvector_hnsw": ratio(best_theirs and best_theirs["client_p50_ms"], best_ours and best_ours["client_p50_ms"]),
        "server_p50_speedup_vs_pgvector_hnsw": ratio(best_theirs_server and best_theirs_server["server_p50_ms"],
                                                     best_ours_server and best_ours_server["server_p50_ms"]),
        "qps2_ratio_vs_pgvector_hnsw": ratio(best_ours and best_ours["qps_2"], best_theirs and best_theirs["qps_2"]),
        "build_time_ratio_vs_pgvector_hnsw": ratio(best_ours_system and best_ours_system["build_seconds"], theirs and theirs["build_seconds"]),
        "size_ratio_vs_pgvector_hnsw": ratio(best_ours_system and best_ours_system["index_bytes"], theirs and theirs["index_bytes"]),
        "runbook_ops_ratio_vs_pgvector": ratio(dynamics[0]["runbook"]["ops_per_second"],
                                               dynamics[1]["runbook"]["ops_per_second"] if len(dynamics) > 1 else None),
        "runbook_max_recall_drop": dynamics[0]["runbook"]["max_recall_drop"],
        "defaults_p50_speedup_vs_pgvector_hnsw": defaults_speedup(defaults),
        "defaults_server_p50_speedup_vs_pgvector_hnsw": defaults_speedup(defaults, "server_p50_ms"),
    }
    ivf4 = next((s for s in ours if s["system"].startswith("pg_strata ivf 4-bit")), None)
    targets = {
        # The size target names the 4-bit IVF index (the headline's size is the best
        # configuration's, which is HNSW with its vectors).
        "ivf4_size_ratio_vs_pgvector_hnsw": ratio(ivf4 and ivf4["index_bytes"], theirs and theirs["index_bytes"]),
        "ivf4_best_recall_at_10": max((p["recall_at_10"] for p in ivf4["points"]), default=None) if ivf4 else None,
    }
    report = {
        "headline": headline,
        "targets": targets,
        "dataset": {"path": repository_relative(args.data), "rows": len(base), "queries": len(queries), "metric": "cosine"},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "settings": {"shared_buffers": args.shared_buffers, "pgbench_seconds": args.seconds, "explain_queries": args.explain_queries, "quick": quick},
        "versions": versions,
        "dynamic_settings": {"rows": args.dynamic_rows, "insert_seconds": args.insert_seconds,
                             "runbook_queries": args.runbook_queries, "cycles": args.cycles, "mixed_seconds": args.mixed_seconds},
        "systems": systems,
        "defaults": defaults,
        "dynamic": dynamics,
        "insert_without_vector_index": no_index,
    }
    json.dump(report, open(os.path.join(args.out, "pg.json"), "w"), indent=2)

    fmt = lambda v, d=2: "–" if v is None else f"{v:.{d}f}"
    lines = ["# pg_strata vs pgvector in PostgreSQL", "",
             f"{len(base)} rows × {base.shape[1]} (pypi-minilm), {len(queries)} held-out queries, cosine; one cluster, one database per "
             f"extension, shared_buffers {args.shared_buffers}; PostgreSQL {versions.get('postgresql')}, pg_strata {versions.get('pg_strata')}, "
             f"pgvector {versions.get('pgvector', 'not built')}. " + ("**Quick run.** " if quick else "") +
             "Produced by `cargo xtask bench`. Client p50 = wall time of a prepared statement over the unix socket (what a user sees; "
             "the headline's latency ratios and the best dial use it); server latency = EXPLAIN ANALYZE execution time; "
             "QPS = pgbench -M prepared.", "",
             ("" if quick else "The full run takes about 30 minutes on this 2-core machine (pgvector's inserts dominate); `--quick` "
              "uses fewer dials and 20,000 rows for the dynamic workloads."), "",
             "## Headline (best configuration reaching recall@10 ≥ 0.95 per engine)", "", "| metric | value |", "|---|---|"]
    lines += [f"| `{k}` | {fmt(v)} |" for k, v in headline.items()]
    lines += ["", "Size of the 4-bit IVF index (codes only, reranked from the table's rows) against pgvector HNSW:", "",
              "| metric | value |", "|---|---|"]
    lines += [f"| `{k}` | {fmt(v, 3)} |" for k, v in targets.items()]
    lines += ["", "| system | best dial | recall@10 | client p50 ms | client p99 ms | server p50 ms | server p99 ms | QPS@1 | QPS@2 | build s | size MB |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in systems:
        p = best_at(s)
        if p:
            lines.append(f"| {s['system']} | {s['dial']}={p['dial']} | {p['recall_at_10']:.4f} | {p['client_p50_ms']:.3f} | {fmt(p.get('client_p99_ms'), 3)} | "
                         f"{p['server_p50_ms']:.3f} | {p['server_p99_ms']:.3f} | {p['qps_1']:.0f} | {p['qps_2']:.0f} | {s['build_seconds']:.1f} | {s['index_bytes'] / 1e6:.1f} |")
        else:
            lines.append(f"| {s['system']} | below 0.95 at every dial | | | | | | | | {s['build_seconds']:.1f} | {s['index_bytes'] / 1e6:.1f} |")
    lines += defaults_table(defaults)
    lines += ["", "## Every point", "", "| system | dial | recall@10 | client p50 | client p99 | server p50 | p95 | p99 | QPS@1 | QPS@2 |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for s in systems:
        for p in s["points"]:
            lines.append(f"| {s['system']} | {s['dial']}={p['dial']} | {p['recall_at_10']:.4f} | {p['client_p50_ms']:.3f} | {fmt(p.get('client_p99_ms'), 3)} | "
                         f"{p['server_p50_ms']:.3f} | {p['server_p95_ms']:.3f} | {p['server_p99_ms']:.3f} | {p['qps_1']:.0f} | {p['qps_2']:.0f} |")
    lines += dynamic_tables(dynamics, no_index)
    open(os.path.join(args.out, "pg.md"), "w").write("\n".join(lines) + "\n")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        for key, label, fname, log in [("client_p50_ms", "client p50 latency (ms)", "pg-recall-latency.png", True),
                                       ("qps_2", "QPS, 2 clients", "pg-recall-qps.png", True)]:
            fig, ax = plt.subplots(figsize=(8, 5))
            for s in systems:
                ax.plot([p["recall_at_10"] for p in s["points"]], [p[key] for p in s["points"]], marker="o", label=s["system"])
            ax.set_xlabel("recall@10")
            ax.set_ylabel(label)
            if log:
                ax.set_yscale("log")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
            fig.tight_layout()
            fig.savefig(os.path.join(args.out, fname), dpi=120)
            plt.close(fig)
        dynamic_plots(plt, dynamics, args.out)
    except ImportError:
        print("matplotlib missing: plots not written")


def defaults_speedup(defaults, key="client_p50_ms"):
    """pgvector HNSW's p50 (`key`: client, or server) at its fastest dial reaching recall 0.95
    over pg_strata's right after CREATE INDEX at the default dial; None unless both reach 0.95
    there."""
    ours = next((p for d in defaults if d["system"] == "pg_strata" for p in d["points"]
                 if p["when"] == "right after CREATE INDEX" and not p["settings"]), None)
    theirs = [p for d in defaults if d["system"] == "pgvector hnsw" for p in d["points"] if p["recall_at_10"] >= 0.95]
    if not ours or ours["recall_at_10"] < 0.95 or not theirs:
        return None
    return min(p[key] for p in theirs) / ours[key]


def defaults_table(defaults):
    """Markdown: each system as a new user gets it (defaults, right after CREATE INDEX)."""
    lines = ["", "## At default settings, right after CREATE INDEX", "",
             "`maintenance_work_mem` at its default (64 MB), no index options, no settings changed; measured as soon as CREATE "
             "INDEX returns (pg_strata also once its background merges are done).", "",
             "| system | build s | when | settings | segments | recall@10 | client p50 ms | server p50 ms | server p99 ms | QPS@2 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for d in defaults:
        for p in d["points"]:
            settings = ", ".join(f"{k}={v}" for k, v in p["settings"].items()) or "defaults"
            lines.append(f"| {d['system']} | {d['build_seconds']:.1f} | {p['when']} | {settings} | {p['segments'] if p['segments'] is not None else '–'} | "
                         f"{p['recall_at_10']:.4f} | {p['client_p50_ms']:.3f} | {p['server_p50_ms']:.3f} | {p['server_p99_ms']:.3f} | {p['qps_2']:.0f} |")
    return lines


def dynamic_tables(dynamics, no_index=None):
    """Markdown sections for insert throughput, the runbook and mixed mode."""
    if not dynamics:
        return []
    names = [d["system"] for d in dynamics]
    lines = ["", f"## Insert throughput into the indexed table ({dynamics[0]['rows'] // 2:,} rows preloaded, rows/s)", "",
             "Sustained rates: rows ÷ (insert time + time until the background indexing they caused is done: pg_strata's "
             "`strata_flush` and `strata_wait_for_merges`, so no configuration pays for the merges of the one before). pgvector indexes inline, so its two rates are the same. Single-row transactions with "
             "`synchronous_commit = on` wait for their commit's WAL fsync: the last column, the same table without a vector "
             "index measured in the same run, is the ceiling any index can reach there. The `off` rows remove that wait.", "",
             "| writers | rows per transaction | synchronous_commit | " + " | ".join(names) + (" | ratio |" if len(dynamics) > 1 else "")
             + " no vector index |",
             "|---|---|---|" + "---|" * len(names) + ("---|" if len(dynamics) > 1 else "") + "---|"]
    for i, point in enumerate(dynamics[0]["insert"]):
        values = [d["insert"][i]["rows_per_second"] for d in dynamics]
        ratio = f" {values[0] / values[1]:.1f}× |" if len(values) > 1 and values[1] else ""
        burst = [d["insert"][i].get("burst_rows_per_second", v) for d, v in zip(dynamics, values)]
        plain = f" {no_index[i]['rows_per_second']:,.0f} |" if no_index and i < len(no_index) else " – |"
        lines.append(f"| {point['writers']} | {point['batch']:,} | {point.get('synchronous_commit', 'on')} | "
                     + " | ".join(f"{v:,.0f} (burst {b:,.0f})" for v, b in zip(values, burst)) + " |" + ratio + plain)
    r = dynamics[0]["runbook"]
    lines += ["", f"## Sliding-window runbook ({r['window']:,}-row window, {r['step']:,} deleted and inserted per step, "
              f"{r['cycles']} steps, {r['queries']} queries per search step)", "",
              "| system | operations/s | first recall | lowest recall | max drop | final recall |", "|---|---|---|---|---|---|"]
    for d in dynamics:
        r = d["runbook"]
        lines.append(f"| {d['system']} | {r['ops_per_second']:,.0f} | {r['first_recall']:.4f} | {r['min_recall']:.4f} | "
                     f"{r['max_recall_drop']:.4f} | {r['steps'][-1]['recall_at_10']:.4f} |")
    lines += ["", "Per step recall@10: " + "; ".join(
        f"{d['system']}: " + " ".join(f"{s['recall_at_10']:.3f}" for s in d["runbook"]["steps"]) for d in dynamics)]
    lines += ["", f"## Mixed mode (inserter, deleter and searcher at once for {dynamics[0]['mixed']['seconds']:.0f} s)", "",
              "| system | inserts/s | deletes/s | searches/s | operations/s | final recall | short results |", "|---|---|---|---|---|---|---|"]
    for d in dynamics:
        m = d["mixed"]
        lines.append(f"| {d['system']} | {m['inserted_per_second']:,.0f} | {m['deleted_per_second']:,.0f} | {m['searched_per_second']:,.0f} | "
                     f"{m['ops_per_second']:,.0f} | {m['final_recall_at_10']:.4f} | {m['short_results']} |")
    return lines


def dynamic_plots(plt, dynamics, out):
    """runbook-recall.png (recall per step) and runbook-throughput.png (ops/s and insert rows/s)."""
    if not dynamics:
        return
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for d in dynamics:
        ax.plot([s["cycle"] for s in d["runbook"]["steps"]], [s["recall_at_10"] for s in d["runbook"]["steps"]], marker="o", label=d["system"])
    ax.set_xlabel("runbook step")
    ax.set_ylabel("recall@10 (live rows)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "pg-runbook-recall.png"), dpi=120)
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    names = [d["system"] for d in dynamics]
    axes[0].bar(names, [d["runbook"]["ops_per_second"] for d in dynamics], color=["tab:blue", "tab:orange"][: len(names)])
    axes[0].set_ylabel("runbook operations/s")
    labels = [f"{p['writers']}w×{p['batch']}" + (" async" if p.get("synchronous_commit") == "off" else "") for p in dynamics[0]["insert"]]
    width = 0.8 / len(dynamics)
    for i, d in enumerate(dynamics):
        axes[1].bar([x + i * width for x in range(len(labels))], [p["rows_per_second"] for p in d["insert"]], width, label=d["system"])
    axes[1].set_xticks([x + width * (len(dynamics) - 1) / 2 for x in range(len(labels))], labels)
    axes[1].set_yscale("log")
    axes[1].set_ylabel("insert rows/s (writers × rows per transaction)")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "pg-runbook-throughput.png"), dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
