"""`cargo xtask bench --floor`: the fixed cost of one small query, as a client sees it.

On a small or low-dimensional table a vector search computes few distances, so what a query
costs is mostly what every query pays: parsing the protocol message, executor start-up, opening
the index, the scan's own start, handing rows back. This script measures that floor in client
wall time over the unix socket with prepared statements (psycopg `prepare=True`: the server plans
once and then executes the generic plan), next to the cheapest queries PostgreSQL answers:

- `SELECT 1`;
- a btree lookup by primary key (`SELECT id FROM items WHERE id = $1`);
- `SELECT id FROM t ORDER BY embedding <-> $1 LIMIT 10` through `USING strata` of kind flat,
  hnsw and ivf, through the companion's `USING hnsw` (pg_strata_pgvector), and through
  pgvector's `USING hnsw` when `--pgvector` says its database exists.

Every index is made with its defaults (L2) on its own copy of the same rows (uniform random, a
fixed seed), so the planner has one vector index per table; pg_strata's are flushed and merged
first. Each system runs on its own connection. Measurement is interleaved: rounds of `--batch`
queries per system, the systems in a new random order each round, until each has run
`--iterations` queries, so drift of a shared machine (other builds) falls on every system alike.
Recall@10 of each vector system against exact L2 over the same rows is reported beside.

`floor_over_btree_ms` per kind = that system's client p50 minus the btree lookup's. With
`--before FILE` (an earlier floor.json) the report shows those figures beside the new ones.
`--loop SYSTEM --loop-seconds N` prints the backend pid of that system's connection and runs its
query alone for N seconds (for `perf record -p PID`) instead of measuring.

Writes floor.json and floor.md.
"""

import argparse
import json
import os
import platform
import time

import numpy as np

from pg_bench import connect

LIMIT = 10
SIZES = "1000x8,100000x50"
SIZES_QUICK = "1000x8"


def strata_systems(with_companion):
    """(name, table, CREATE INDEX, kind) of the pg_strata indexes measured."""
    systems = [
        ("strata flat", "items_flat", "CREATE INDEX ON items_flat USING strata (embedding vector_l2_ops) WITH (kind = 'flat')", "flat"),
        ("strata hnsw", "items_hnsw", "CREATE INDEX ON items_hnsw USING strata (embedding vector_l2_ops) WITH (kind = 'hnsw')", "hnsw"),
        ("strata ivf", "items_ivf", "CREATE INDEX ON items_ivf USING strata (embedding vector_l2_ops) WITH (kind = 'ivf')", "ivf"),
    ]
    if with_companion:
        systems.append(("companion hnsw", "items_companion", "CREATE INDEX ON items_companion USING hnsw (embedding vector_l2_ops)", "companion_hnsw"))
    return systems


def copy_rows(conn, table, base):
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, embedding vector({base.shape[1]}))")
    with conn.cursor().copy(f"COPY {table} FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "vector"])
        for i, row in enumerate(base):
            copy.write_row([i, row])
    conn.execute(f"VACUUM ANALYZE {table}")


def index_of(conn, table):
    return conn.execute("SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = %s::regclass AND NOT indisprimary",
                        (table,)).fetchone()[0]


def plan_uses(conn, sql, params, index):
    """Whether the plan of `sql` scans `index` (checked before measuring)."""
    plan = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchone()[0]
    stack = [plan[0]["Plan"]]
    while stack:
        node = stack.pop()
        if node.get("Index Name") == index:
            return True
        stack.extend(node.get("Plans", []))
    return False


def exact_top(base, queries, k=LIMIT):
    out = np.empty((len(queries), k), dtype=np.int64)
    norms = (base.astype(np.float64) ** 2).sum(axis=1)
    for i in range(0, len(queries), 100):
        q = queries[i:i + 100].astype(np.float64)
        d = norms[None, :] - 2 * q @ base.T.astype(np.float64)
        part = np.argpartition(d, k, axis=1)[:, :k]
        order = np.argsort(np.take_along_axis(d, part, axis=1), axis=1, kind="stable")
        out[i:i + 100] = np.take_along_axis(part, order, axis=1)
    return out


class System:
    """One measured statement on its own connection."""

    def __init__(self, name, conn, sql, params, index=None, kind=None):
        self.name, self.conn, self.sql, self.params, self.index, self.kind = name, conn, sql, params, index, kind
        self.cursor = conn.cursor()
        self.times = []

    def run(self, i):
        self.cursor.execute(self.sql, self.params(i), prepare=True)
        return self.cursor.fetchall()

    def timed(self, i):
        started = time.perf_counter()
        self.run(i)
        self.times.append((time.perf_counter() - started) * 1e3)


def setup_size(args, rows, dims, rng):
    """Loads one size into both databases; returns (systems, base, queries, connections)."""
    base = rng.random((rows, dims), dtype=np.float32)
    queries = rng.random((args.queries, dims), dtype=np.float32)
    ids = rng.integers(0, rows, size=args.queries)
    conns = []

    def new_conn(db):
        conn = connect(args, db)
        conn.execute("SET enable_seqscan = off")
        conns.append(conn)
        return conn

    admin = new_conn("strata_bench")
    admin.execute("CREATE EXTENSION IF NOT EXISTS pg_strata_pgvector")
    copy_rows(admin, "items", base)
    systems = []
    select1 = new_conn("strata_bench")
    systems.append(System("SELECT 1", select1, "SELECT 1", lambda i: ()))
    btree = new_conn("strata_bench")
    systems.append(System("btree by primary key", btree, "SELECT id FROM items WHERE id = %s",
                          lambda i: (int(ids[i % len(ids)]),), index="items_pkey", kind="btree"))
    vector_sql = "SELECT id FROM {} ORDER BY embedding <-> %s::vector LIMIT " + str(LIMIT)
    # Each query vector is sent as text formatted once, before measuring: formatting a vector
    # is the client library's work (pgvector's adapter formats floats in Python), not the
    # server's, and the btree lookup has no such cost.
    texts = ["[" + ",".join(repr(float(x)) for x in row) + "]" for row in queries]
    q = lambda i: (texts[i % len(texts)],)
    for name, table, create, kind in strata_systems(True):
        copy_rows(admin, table, base)
        started = time.perf_counter()
        admin.execute(create)
        index = index_of(admin, table)
        admin.execute("SELECT strata_flush(%s::regclass)", (index,))
        admin.execute("SELECT strata_wait_for_merges(%s::regclass)", (index,))
        print(f"  {rows}x{dims} {name}: built in {time.perf_counter() - started:.1f} s", flush=True)
        systems.append(System(name, new_conn("strata_bench"), vector_sql.format(table), q, index=index, kind=kind))
    if args.pgvector:
        pgv = new_conn("pgvector_bench")
        copy_rows(pgv, "items_pgv", base)
        started = time.perf_counter()
        pgv.execute("CREATE INDEX ON items_pgv USING hnsw (embedding vector_l2_ops)")
        print(f"  {rows}x{dims} pgvector hnsw: built in {time.perf_counter() - started:.1f} s", flush=True)
        systems.append(System("pgvector hnsw", pgv, vector_sql.format("items_pgv"), q, index=index_of(pgv, "items_pgv"), kind="pgvector_hnsw"))
    for s in systems:
        if s.index and not plan_uses(s.conn, s.sql, s.params(0), s.index):
            raise SystemExit(f"{s.name}: the plan of {s.sql!r} does not scan {s.index}")
    return systems, base, queries, conns


def recall(system, base, queries, truth):
    hits = 0
    for i in range(len(queries)):
        got = {r[0] for r in system.run(i)}
        hits += len(got & set(truth[i].tolist()))
    return hits / (LIMIT * len(queries))


def measure(args, systems, rng):
    """Warm-up, then interleaved rounds; fills each system's `times`."""
    for s in systems:
        for i in range(args.warmup):  # past the plan cache's five custom plans: the generic plan from here on
            s.run(i)
    order = list(systems)
    done = 0
    while done < args.iterations:
        rng.shuffle(order)
        for s in order:
            for j in range(args.batch):
                s.timed(done + j)
        done += args.batch


def summary(s):
    t = np.array(s.times)
    return {"system": s.name, "kind": s.kind, "sql": s.sql, "queries": len(t), "client_p50_ms": float(np.percentile(t, 50)),
            "client_p90_ms": float(np.percentile(t, 90)), "client_p99_ms": float(np.percentile(t, 99)), "client_mean_ms": float(t.mean())}


def run_size(args, rows, dims, rng):
    systems, base, queries, conns = setup_size(args, rows, dims, rng)
    try:
        if args.loop:
            target = next((s for s in systems if s.name == args.loop), None)
            if target is None:
                raise SystemExit(f"--loop: no system {args.loop!r} (one of: {', '.join(s.name for s in systems)})")
            pid = target.conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            print(f"LOOP PID {pid}", flush=True)
            if args.pid_file:
                open(args.pid_file, "w").write(str(pid))
            cpu_before = backend_cpu_seconds(pid)
            ends, i = time.perf_counter() + args.loop_seconds, 0
            while time.perf_counter() < ends:
                target.run(i)
                i += 1
            cpu = backend_cpu_seconds(pid)
            cpu = f", backend CPU {(cpu - cpu_before) / i * 1e6:.1f} µs a query" if cpu is not None and cpu_before is not None else ""
            print(f"  {i} queries of {target.name} in {args.loop_seconds} s: {args.loop_seconds / i * 1e6:.1f} µs a query{cpu}", flush=True)
            return None
        truth = exact_top(base, queries)
        recalls = {s.name: recall(s, base, queries, truth) for s in systems if s.kind not in (None, "btree")}
        measure(args, systems, rng)
        results = [summary(s) for s in systems]
        for r in results:
            r["recall_at_10"] = recalls.get(r["system"])
        p50 = {r["system"]: r["client_p50_ms"] for r in results}
        btree = p50["btree by primary key"]
        floor = {r["kind"]: r["client_p50_ms"] - btree for r in results if r["kind"] not in (None, "btree")}
        for r in results:
            print(f"  {rows}x{dims} {r['system']}: client p50 {r['client_p50_ms']:.3f} ms, p99 {r['client_p99_ms']:.3f} ms"
                  + (f", recall@10 {r['recall_at_10']:.3f}" if r["recall_at_10"] is not None else ""), flush=True)
        entry = {"rows": rows, "dims": dims, "systems": results, "floor_over_btree_ms": floor,
                 "over_select1_ms": {r["system"]: r["client_p50_ms"] - p50["SELECT 1"] for r in results}}
        if "pgvector hnsw" in p50:
            entry["pgvector_hnsw_p50_over"] = {r["kind"]: p50["pgvector hnsw"] / r["client_p50_ms"] for r in results
                                               if r["kind"] not in (None, "btree", "pgvector_hnsw")}
        return entry
    finally:
        for conn in conns:
            conn.close()


def backend_cpu_seconds(pid):
    """User + system CPU seconds of process `pid` (a backend on this machine), None when unreadable."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def fmt(v, d=3):
    return "–" if v is None else f"{v:.{d}f}"


def markdown(report, before):
    lines = ["# The per-query floor: a small vector query against a btree lookup", "",
             "Client wall time over the unix socket, prepared statements (psycopg `prepare=True`, the generic plan), "
             f"{report['settings']['iterations']:,} queries per system after {report['settings']['warmup']} warm-up ones, "
             f"interleaved in rounds of {report['settings']['batch']} (systems in a new random order each round). Uniform random "
             "rows, L2, `LIMIT 10`, every index with its defaults on its own copy of the rows, `enable_seqscan = off` (each plan "
             "checked to scan its index). `floor_over_btree_ms` = the system's client p50 minus the btree lookup's. Produced by "
             "`cargo xtask bench --floor` (`crates/bench/python/pg_floor.py`)" + (" (**quick run**)" if report["settings"]["quick"] else "") + ".", "",
             f"Machine: {report['machine']['cpus']} CPUs; load average {report['load']['before']} before and {report['load']['after']} after "
             "(other work on the machine moves every system alike: compare within a run).", ""]
    lines += ["## Headline", "", "| metric | value |", "|---|---|"]
    lines += [f"| `{k}` | {fmt(v)} |" for k, v in report["headline"].items()]
    if before:
        lines += ["", "Before (`before` in floor.json, " + before.get("label", "an earlier run") + "):", "", "| metric | before | now |", "|---|---|---|"]
        lines += [f"| `{k}` | {fmt(before['headline'].get(k))} | {fmt(v)} |" for k, v in report["headline"].items()]
    for entry in report["sizes"]:
        old = next((e for e in (before or {}).get("sizes", []) if e["rows"] == entry["rows"] and e["dims"] == entry["dims"]), None)
        lines += ["", f"## {entry['rows']:,} rows × {entry['dims']}", "",
                  "| system | client p50 ms | p90 ms | p99 ms | mean ms | p50 over btree ms | recall@10 |"
                  + (" before: p50 ms | before: over btree ms |" if old else ""),
                  "|---|---|---|---|---|---|---|" + ("---|---|" if old else "")]
        btree = next(r["client_p50_ms"] for r in entry["systems"] if r["kind"] == "btree")
        for r in entry["systems"]:
            row = (f"| {r['system']} | {r['client_p50_ms']:.3f} | {r['client_p90_ms']:.3f} | {r['client_p99_ms']:.3f} | {r['client_mean_ms']:.3f} | "
                   f"{r['client_p50_ms'] - btree:+.3f} | {fmt(r['recall_at_10'])} |")
            if old:
                o = next((x for x in old["systems"] if x["system"] == r["system"]), None)
                ob = next(x["client_p50_ms"] for x in old["systems"] if x["kind"] == "btree")
                row += f" {fmt(o and o['client_p50_ms'])} | " + (f"{o['client_p50_ms'] - ob:+.3f} |" if o else "– |")
            lines.append(row)
        ratios = entry.get("pgvector_hnsw_p50_over")
        if ratios:
            lines += ["", "pgvector HNSW's client p50 over each: " + ", ".join(f"{k} {v:.2f}×" for k, v in ratios.items()) + "."]
    return "\n".join(lines) + "\n"


def headline(sizes):
    out = {}
    for e in sizes:
        tag = f"{e['rows']}x{e['dims']}"
        for kind, v in e["floor_over_btree_ms"].items():
            if kind != "pgvector_hnsw":
                out[f"floor_over_btree_ms_{kind}_{tag}"] = v
        if "pgvector_hnsw" in e["floor_over_btree_ms"]:
            out[f"floor_over_btree_ms_pgvector_hnsw_{tag}"] = e["floor_over_btree_ms"]["pgvector_hnsw"]
        if e.get("pgvector_hnsw_p50_over", {}).get("hnsw"):
            out[f"p50_speedup_vs_pgvector_hnsw_{tag}"] = e["pgvector_hnsw_p50_over"]["hnsw"]
    return out


def load_average():
    return "{:.2f} / {:.2f} / {:.2f}".format(*os.getloadavg())


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--host", "--out"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data", help="unused: the rows are generated (accepted as every benchmark script takes it)")
    parser.add_argument("--pgvector", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", default=None, help=f"rows x dims, comma-separated (default {SIZES}; quick {SIZES_QUICK})")
    parser.add_argument("--queries", type=int, default=200, help="distinct query vectors (and recall queries)")
    parser.add_argument("--iterations", type=int, default=0, help="timed queries per system (default 10,000; quick 2,000)")
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--before", help="an earlier floor.json whose figures the report shows as 'before'")
    parser.add_argument("--before-label", default=None, help="what the earlier run measured (shown in floor.md)")
    parser.add_argument("--loop", help="profile mode: run this system's query alone for --loop-seconds")
    parser.add_argument("--loop-seconds", type=int, default=20)
    parser.add_argument("--pid-file", help="profile mode: write the looping backend's pid here")
    args = parser.parse_args()
    args.iterations = args.iterations or (2_000 if args.quick else 10_000)
    sizes = [tuple(int(x) for x in s.split("x")) for s in (args.sizes or (SIZES_QUICK if args.quick else SIZES)).split(",")]
    rng = np.random.default_rng(args.seed)
    load_before = load_average()
    entries = [e for rows, dims in sizes for e in [run_size(args, rows, dims, rng)] if e]
    if args.loop:
        return
    report = {
        "headline": headline(entries),
        "sizes": entries,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "load": {"before": load_before, "after": load_average()},
        "settings": {"iterations": args.iterations, "batch": args.batch, "warmup": args.warmup, "queries": args.queries,
                     "seed": args.seed, "quick": args.quick, "limit": LIMIT},
    }
    before = None
    if args.before:
        before = json.load(open(args.before))
        before = {"label": args.before_label or before.get("label") or "an earlier run", "headline": before["headline"],
                  "sizes": before["sizes"], "load": before.get("load")}
        report["before"] = before
    json.dump(report, open(os.path.join(args.out, "floor.json"), "w"), indent=2)
    open(os.path.join(args.out, "floor.md"), "w").write(markdown(report, before))


if __name__ == "__main__":
    main()
