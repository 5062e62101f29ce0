"""pg_strata on Citus against one node (`cargo xtask bench --citus`).

One Citus cluster (a coordinator and 2 workers on this machine, `cargo xtask citus start`) holds
the same N MiniLM rows (shared/data/pypi-minilm-100k, or --base for a larger set) twice:

- **one node**: a plain table on the coordinator (a PostgreSQL node like any other);
- **distributed**: a table distributed by `id` over --shards shards on the 2 workers.

Measured for each: COPY throughput, strata hnsw and bm25 index build time, recall@10 against exact
ground truth and client p50/p95 over --queries held-out queries (prepared, after a warm-up), QPS at
1, 4 and 16 clients (pgbench, prepared, one script per query vector). Then:

- the coordinator's added latency: p50 through the coordinator of a table with one shard
  against the same query sent straight to the worker's shard table;
- BM25 top-10 agreement with one node over the held-out query texts (equal scores ordered by
  `id`), with per-shard statistics (`ORDER BY body <@> 'q'`) and with every shard's statistics
  (`strata_bm25_query`).

Writes citus.json (with a `headline`), citus.md and citus.png to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import psycopg

from pg_dynamic import pgbench
from vecs import read_vecs


def vec(row: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in row) + "]"


def read_texts(path: Path, rows: int) -> list[str]:
    out = []
    with path.open() as f:
        for line in f:
            if len(out) == rows:
                break
            out.append(json.loads(line)["text"])
    return out


def timed(conn, sql: str, params=None) -> float:
    started = time.perf_counter()
    conn.execute(sql, params)
    return time.perf_counter() - started


def copy_rows(conn, table: str, lines: list[str]) -> float:
    """Rows per second of COPY of `lines` (text format, prepared beforehand)."""
    started = time.perf_counter()
    with conn.cursor().copy(f"COPY {table} (id, body, v) FROM STDIN") as copy:
        for start in range(0, len(lines), 5000):
            copy.write("".join(lines[start:start + 5000]))
    return len(lines) / (time.perf_counter() - started)


def search(conn, table: str, queries: np.ndarray, k: int = 10) -> tuple[list[list[int]], list[float]]:
    sql = f"SELECT id FROM {table} ORDER BY v <=> %s::vector LIMIT {k}"
    for q in queries[:20]:
        conn.execute(sql, (vec(q),), prepare=True).fetchall()
    ids, times = [], []
    for q in queries:
        started = time.perf_counter()
        ids.append([r[0] for r in conn.execute(sql, (vec(q),), prepare=True).fetchall()])
        times.append((time.perf_counter() - started) * 1000)
    return ids, times


def recall(found: list[list[int]], truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t[:10].tolist())) / 10 for f, t in zip(found, truth)]))


def pct(values: list[float], p: float) -> float:
    return float(np.percentile(values, p))


def qps(args, table: str, queries: np.ndarray, clients: int) -> float:
    """pgbench: one script per query (random choice each transaction), prepared."""
    scripts = [f"SELECT id FROM {table} ORDER BY v <=> '{vec(q)}' LIMIT 10;\n" for q in queries[:16]]
    # pg_dynamic.pgbench takes one script: weight the queries by choosing one with \set.
    body = "\\set i random(0, 15)\n" + "".join(
        f"\\if :i = {i}\n{s}\\endif\n" for i, s in enumerate(scripts))
    return pgbench(args.bindir, args.host, args.port, "postgres", body, clients, args.seconds, {})


def exact_truth(base: np.ndarray, queries: np.ndarray) -> np.ndarray:
    b = base / np.linalg.norm(base, axis=1, keepdims=True)
    out = []
    for q in queries:
        d = 1.0 - b @ (q / np.linalg.norm(q))
        out.append(np.argsort(d, kind="stable")[:10])
    return np.array(out)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bindir", required=True)
    parser.add_argument("--data", default="../shared/data/pypi-minilm-100k")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    data = Path(args.data)
    base = read_vecs(data / "base.fvecs", args.rows, "<f4")
    texts = read_texts(data / "base_texts.jsonl", len(base))
    queries = read_vecs(data / "query.fvecs", args.queries, "<f4")
    query_texts = read_texts(data / "query_texts.jsonl", args.queries)
    truth = exact_truth(base, queries)
    lines = []
    for i, (row, text) in enumerate(zip(base, texts)):
        body = text.replace("\\", "\\\\").replace("\t", " ").replace("\n", " ").replace("\r", " ")
        lines.append(f"{i}\t{body}\t{vec(row)}\n")
    conn = psycopg.connect(f"host={args.host} port={args.port} user=postgres dbname=postgres", autocommit=True)
    workers = conn.execute("SELECT count(*) FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary'").fetchone()[0]
    results: dict = {"rows": len(base), "data": data.resolve().name, "queries": len(queries), "shards": args.shards,
                     "workers": workers,
                     "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}, "systems": {}}
    for name, table in (("one node", "one_items"), ("distributed", "dist_items")):
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, body text, v vector(384))")
        if table == "dist_items":
            conn.execute(f"SELECT create_distributed_table('{table}', 'id', shard_count => {args.shards})")
        copy = copy_rows(conn, table, lines)
        build = timed(conn, f"CREATE INDEX {table}_v ON {table} USING strata (v vector_cosine_ops) WITH (kind = 'hnsw')")
        bm25_build = timed(conn, f"CREATE INDEX {table}_bm25 ON {table} USING bm25 (body) WITH (text_config = 'english')")
        conn.execute(f"ANALYZE {table}")
        found, times = search(conn, table, queries)
        system = {"copy_rows_per_s": round(copy), "hnsw_build_s": round(build, 2), "bm25_build_s": round(bm25_build, 2),
                  "recall_at_10": round(recall(found, truth), 4), "p50_ms": round(pct(times, 50), 3),
                  "p95_ms": round(pct(times, 95), 3), "qps": {}}
        for clients in (1, 4, 16):
            system["qps"][str(clients)] = round(qps(args, table, queries, clients), 1)
        results["systems"][name] = system
        print(json.dumps({name: system}), flush=True)

    # The coordinator's added latency: one shard, through the coordinator and straight to it.
    conn.execute("DROP TABLE IF EXISTS one_shard_items")
    conn.execute("CREATE TABLE one_shard_items (id bigint PRIMARY KEY, body text, v vector(384))")
    conn.execute("SELECT create_distributed_table('one_shard_items', 'id', shard_count => 1)")
    copy_rows(conn, "one_shard_items", lines[:20_000])
    conn.execute("CREATE INDEX one_shard_items_v ON one_shard_items USING strata (v vector_cosine_ops) WITH (kind = 'hnsw')")
    shard, port = conn.execute(
        "SELECT shard_name('one_shard_items'::regclass, s.shardid), p.nodeport FROM pg_dist_shard s "
        "JOIN pg_dist_shard_placement p USING (shardid) WHERE s.logicalrelid = 'one_shard_items'::regclass").fetchone()
    _, through = search(conn, "one_shard_items", queries)
    with psycopg.connect(f"host=localhost port={port} user=postgres dbname=postgres", autocommit=True) as w:
        _, direct = search(w, shard, queries)
    # The coordinator over TCP from the client too, for a like-for-like client path.
    with psycopg.connect(f"host=localhost port={args.port} user=postgres dbname=postgres", autocommit=True) as c:
        _, through_tcp = search(c, "one_shard_items", queries)
    results["coordinator"] = {
        "through_coordinator_p50_ms": round(pct(through_tcp, 50), 3),
        "straight_to_shard_p50_ms": round(pct(direct, 50), 3),
        "added_p50_ms": round(pct(through_tcp, 50) - pct(direct, 50), 3),
        "through_coordinator_unix_socket_p50_ms": round(pct(through, 50), 3),
    }
    conn.execute("DROP TABLE one_shard_items")
    print(json.dumps({"coordinator": results["coordinator"]}), flush=True)

    # BM25: top-10 agreement with one node, per-shard and every shard's statistics.
    agree_local, agree_global, t_local, t_global = [], [], [], []
    # Ordering equal scores by id sorts every matching row: seconds a query on 1M rows (a run
    # of 200 took over half an hour there), so larger tables check the first 50 query texts.
    bm25_texts = query_texts if len(base) <= 100_000 else query_texts[:50]
    results["bm25_queries"] = len(bm25_texts)
    for text in bm25_texts:
        one = [r[0] for r in conn.execute(
            "SELECT id FROM one_items ORDER BY body <@> to_bm25query(%s, 'one_items_bm25'), id LIMIT 10", (text,)).fetchall()]
        started = time.perf_counter()
        per_shard = [r[0] for r in conn.execute(
            "SELECT id FROM dist_items ORDER BY body <@> %s::text, id LIMIT 10", (text,)).fetchall()]
        t_local.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        q = conn.execute("SELECT strata_bm25_query('dist_items_bm25', %s)::text", (text,)).fetchone()[0]
        global_ids = [r[0] for r in conn.execute(
            "SELECT id FROM dist_items ORDER BY body <@> %s::bm25query, id LIMIT 10", (q,)).fetchall()]
        t_global.append((time.perf_counter() - started) * 1000)
        if one:
            agree_local.append(len(set(one) & set(per_shard)) / len(one))
            agree_global.append(len(set(one) & set(global_ids)) / len(one))
    results["bm25"] = {
        "top10_agreement_per_shard_stats": round(float(np.mean(agree_local)), 4),
        "top10_agreement_global_stats": round(float(np.mean(agree_global)), 4),
        "p50_ms_per_shard_stats": round(pct(t_local, 50), 3),
        "p50_ms_global_stats": round(pct(t_global, 50), 3),
    }
    one, dist = results["systems"]["one node"], results["systems"]["distributed"]
    results["headline"] = {
        "coordinator_added_p50_ms": results["coordinator"]["added_p50_ms"],
        "qps16_ratio_2workers_vs_one_node": round(dist["qps"]["16"] / one["qps"]["16"], 3),
        "recall_at_10_vs_one_node": round(dist["recall_at_10"] - one["recall_at_10"], 4),
        "bm25_top10_agreement_vs_one_node": results["bm25"]["top10_agreement_global_stats"],
    }
    results["load"] = round(os.getloadavg()[0], 2)
    for table in ("one_items", "dist_items"):
        conn.execute(f"DROP TABLE {table}")
    write(results, Path(args.out))
    print(json.dumps(results["headline"]))
    return 0


def dataset_name(results: dict) -> str:
    """Where the rows came from: shared/data's 100k set, or the 1M set of `cargo xtask data scale`."""
    name = results.get("data", "pypi-minilm-100k")
    if name == "pypi-minilm-100k":
        return "shared/data/pypi-minilm-100k"
    return f"`cargo xtask data scale`'s {name} set, passed as `--from DIR`"


def write(results: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "citus.json").write_text(json.dumps(results, indent=1) + "\n")
    one, dist = results["systems"]["one node"], results["systems"]["distributed"]
    h, c, b = results["headline"], results["coordinator"], results["bm25"]
    lines = [
        "# pg_strata on Citus against one node",
        "",
        f"{results['rows']:,} MiniLM rows ({dataset_name(results)}), {results['queries']} held-out queries; "
        f"the distributed table has {results['shards']} shards on {results['workers']} workers; every node "
        f"runs on the same {results['machine']['cpus']}-CPU machine. Produced by `cargo xtask bench --citus"
        f"{'' if results['rows'] == 100_000 else ' --rows ' + str(results['rows'])}"
        f"{'' if results.get('data', 'pypi-minilm-100k') == 'pypi-minilm-100k' else ' --from DIR'}` "
        "(crates/bench/python/pg_citus.py).",
        "",
        "| | one node | distributed |",
        "|---|---|---|",
        f"| COPY rows/s | {one['copy_rows_per_s']:,} | {dist['copy_rows_per_s']:,} |",
        f"| strata hnsw build (s) | {one['hnsw_build_s']} | {dist['hnsw_build_s']} |",
        f"| bm25 build (s) | {one['bm25_build_s']} | {dist['bm25_build_s']} |",
        f"| recall@10 | {one['recall_at_10']} | {dist['recall_at_10']} |",
        f"| p50 / p95 (ms, client) | {one['p50_ms']} / {one['p95_ms']} | {dist['p50_ms']} / {dist['p95_ms']} |",
    ]
    for clients in ("1", "4", "16"):
        lines.append(f"| QPS, {clients} client(s) | {one['qps'][clients]} | {dist['qps'][clients]} |")
    lines += [
        "",
        f"Coordinator's added latency (one shard; client over TCP): p50 {c['through_coordinator_p50_ms']} ms "
        f"through the coordinator, {c['straight_to_shard_p50_ms']} ms straight to the shard: "
        f"**{c['added_p50_ms']} ms added**.",
        "",
        f"BM25 top-10 agreement with one node over {results.get('bm25_queries', results['queries'])} query texts: "
        f"**{b['top10_agreement_global_stats']}** with every shard's "
        f"statistics (`strata_bm25_query`), {b['top10_agreement_per_shard_stats']} with per-shard statistics "
        "(`ORDER BY body <@> 'q'`). Equal scores are ordered by `id` in all three queries, which sorts every "
        "matching row (the JSON's BM25 times include that sort and are not search latencies).",
        "",
        "Headline: " + ", ".join(f"`{k}` = {v}" for k, v in h.items()) + " (recall: distributed minus one "
        "node; agreement: the share of one node's BM25 top-10 ids, equal scores ordered by id, that the "
        "distributed top-10 holds).",
        "",
        f"Load on the machine during the run (1-minute load average): {results.get('load', 'n/a')}.",
        "",
    ]
    if results["machine"]["cpus"] < 4:
        lines += [
            f"QPS with 2 workers cannot exceed one node's here: the machine has {results['machine']['cpus']} CPUs, "
            "shared by the coordinator, both workers and the pgbench clients, so the workers have no cores of "
            "their own to pin to (the issue's ≥ 1.5× at 16 clients needs each worker on its own cores). On such "
            "a machine a distributed query costs more CPU in total (a plan, a connection hop and a merge per "
            "shard) and the ratio shows that overhead.",
            "",
        ]
    (out / "citus.md").write_text("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
        for name, s in results["systems"].items():
            ax[0].plot([1, 4, 16], [s["qps"][k] for k in ("1", "4", "16")], marker="o", label=name)
        ax[0].set_xscale("log", base=2)
        ax[0].set_xlabel("clients")
        ax[0].set_ylabel("QPS")
        ax[0].legend()
        names = list(results["systems"])
        ax[1].bar(names, [results["systems"][n]["p50_ms"] for n in names])
        ax[1].set_ylabel("p50 ms (recall@10: " + ", ".join(
            f"{results['systems'][n]['recall_at_10']:.3f}" for n in names) + ")")
        fig.tight_layout()
        fig.savefig(out / "citus.png", dpi=100)
    except ImportError:
        pass


if __name__ == "__main__":
    if len(os.sys.argv) == 3 and os.sys.argv[1] == "--rewrite":
        # Regenerates citus.md and citus.png from an existing citus.json in that directory.
        out = Path(os.sys.argv[2])
        write(json.loads((out / "citus.json").read_text()), out)
        raise SystemExit(0)
    raise SystemExit(main())
