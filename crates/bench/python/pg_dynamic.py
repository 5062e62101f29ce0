"""Dynamic workloads for `pg_bench.py`: insert throughput, the sliding-window runbook, mixed mode.

Each function takes an open autocommit connection to one system's database (pg_strata's or
pgvector's), creates its own table and index there and drops them afterwards, so the two systems
run the same statements against the same rows.

- **Insert throughput**: the table holds `preload` rows with the index built; then rows not in
  the index are inserted for a fixed time by 1 or 2 pgbench clients, each transaction carrying
  1 or 1,000 rows (`INSERT … SELECT` from a staging table, so the client costs nothing);
  reported as committed rows per second.
- **Sliding-window runbook** (big-ann-benchmarks streaming style): insert half the rows in
  batches, then `cycles` times: search the queries (recall@10 against brute force over the rows
  live at that step), delete the oldest 5 % of the window, insert 5 % new rows. Operations per
  second count every inserted row, deleted row and query over the whole run.
- **Mixed mode**: an inserter, a deleter and a searcher run concurrently for a fixed time;
  reports each one's operations per second and the final recall against the live rows.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time

import numpy as np
import psycopg
from pgvector.psycopg import register_vector


def _normalised(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def exact_top10(base_n: np.ndarray, live_ids: np.ndarray, queries_n: np.ndarray) -> list[set]:
    """Exact cosine top-10 ids among `live_ids` for every query (inputs L2-normalised)."""
    scores = queries_n @ base_n[live_ids].T
    top = np.argpartition(-scores, 9, axis=1)[:, :10]
    return [set(live_ids[row].tolist()) for row in top]


def _create(conn, dims: int, index_sql: str, rows: np.ndarray, ids: range) -> None:
    conn.execute("DROP TABLE IF EXISTS dyn_items")
    conn.execute(f"CREATE TABLE dyn_items (id bigint PRIMARY KEY, embedding vector({dims}))")
    _copy(conn, rows, ids)
    conn.execute("SET maintenance_work_mem = '2GB'")
    conn.execute(index_sql.format(table="dyn_items"))
    conn.execute("VACUUM ANALYZE dyn_items")


def _copy(conn, rows: np.ndarray, ids) -> None:
    with conn.cursor().copy("COPY dyn_items FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "vector"])
        for i in ids:
            copy.write_row([i, rows[i]])


def _insert_batch(conn, base: np.ndarray, ids: list[int]) -> None:
    with conn.transaction():
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO dyn_items VALUES (%s, %s)", [(i, base[i]) for i in ids])


def pgbench(bindir: str, host: str, port: int, db: str, script: str, clients: int, seconds: float, gucs: dict) -> float:
    """Transactions per second of `script` run by `clients` pgbench clients (prepared statements)."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script)
        path = f.name
    env = dict(os.environ, PGOPTIONS=" ".join(f"-c {k}={v}" for k, v in gucs.items()))
    try:
        out = subprocess.run([os.path.join(bindir, "pgbench"), "-h", host, "-p", str(port), "-U", "postgres", "-n",
                              "-M", "prepared", "-f", path, "-c", str(clients), "-j", str(clients), "-T", str(max(1, round(seconds))), db],
                             env=env, capture_output=True, text=True)
    finally:
        os.remove(path)
    for line in out.stdout.splitlines():
        if line.startswith("tps"):
            return float(line.split("=")[1].split()[0])
    raise RuntimeError(f"pgbench failed: {out.stderr}")


# (writers, rows per transaction, synchronous_commit). Single-row transactions wait for their
# commit's WAL fsync, which bounds any index on a slow or shared disk; the `off` rows measure the
# same inserts without that wait (the index's own ingest cost).
INSERT_CONFIGS = [(1, 1, "on"), (1, 1000, "on"), (2, 1, "on"), (2, 1000, "on"), (1, 1, "off"), (2, 1, "off")]


def insert_throughput(conninfo: str, run_pgbench, base: np.ndarray, index_sql: str | None, preload: int, seconds: float,
                      drain_sql: str | None = None, configs: list[tuple] | None = None) -> list[dict]:
    """Rows/s for every (writers, rows per transaction, synchronous_commit) of `configs` (default INSERT_CONFIGS);
    `index_sql` None measures the table without a vector index (the same run's ceiling).

    The writers are pgbench clients running `INSERT … SELECT` from a staging table of rows that
    are not in the index, so the client costs nothing and the server's ingest path is measured.
    `run_pgbench(script, clients, seconds, gucs)` returns transactions per second. `drain_sql` (pg_strata:
    `strata_flush` and `strata_wait_for_merges`) runs after each configuration and its time is charged to it: the sustained
    rate counts the background indexing the inserts caused, not only the inserts' own time. Each
    configuration starts from a fresh table with the same preloaded, indexed rows."""
    dims = base.shape[1]
    fresh = len(base) - preload
    with psycopg.connect(conninfo, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("DROP TABLE IF EXISTS ins_items, ins_source")
        conn.execute(f"CREATE TABLE ins_source (sid int PRIMARY KEY, embedding vector({dims}))")
        with conn.cursor().copy("COPY ins_source FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "vector"])
            for i in range(fresh):
                copy.write_row([i, base[preload + i]])
        conn.execute("VACUUM ANALYZE ins_source")
        conn.execute("SET maintenance_work_mem = '2GB'")
        results = []
        for writers, batch, sync in configs or INSERT_CONFIGS:
            # Every configuration starts from the same freshly indexed table, so none inherits
            # (or pays for) the rows and background work of the one before.
            conn.execute("DROP TABLE IF EXISTS ins_items")
            conn.execute(f"CREATE TABLE ins_items (id bigserial PRIMARY KEY, embedding vector({dims}))")
            with conn.cursor().copy("COPY ins_items FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(["int8", "vector"])
                for i in range(preload):
                    copy.write_row([i + 1, base[i]])
            conn.execute("SELECT setval('ins_items_id_seq', %s)", (preload,))
            if index_sql:
                conn.execute(index_sql.format(table="ins_items"))
            if drain_sql:
                conn.execute(drain_sql)
            conn.execute("VACUUM ANALYZE ins_items")
            script = (f"\\set s random(0, {fresh - batch})\n"
                      f"INSERT INTO ins_items (embedding) SELECT embedding FROM ins_source WHERE sid >= :s AND sid < :s + {batch};\n")
            duration = seconds if batch == 1 else 2 * seconds
            before = conn.execute("SELECT count(*) FROM ins_items").fetchone()[0]
            started = time.perf_counter()
            tps = run_pgbench(script, writers, duration, {"synchronous_commit": sync})
            inserting = time.perf_counter() - started
            started = time.perf_counter()
            if drain_sql:
                conn.execute(drain_sql)
            draining = time.perf_counter() - started
            after = conn.execute("SELECT count(*) FROM ins_items").fetchone()[0]
            rows = after - before
            results.append({"writers": writers, "batch": batch, "synchronous_commit": sync, "transactions_per_second": tps,
                            "burst_rows_per_second": tps * batch, "rows": rows, "insert_seconds": inserting,
                            "drain_seconds": draining, "rows_per_second": rows / (inserting + draining)})
            print(f"    insert {writers} writer(s), {batch} row(s) per transaction, synchronous_commit={sync}: "
                  f"{tps * batch:,.0f} rows/s while inserting, "
                  f"{rows / (inserting + draining):,.0f} rows/s sustained (background indexing {draining:.1f} s)", flush=True)
        conn.execute("DROP TABLE ins_items, ins_source")
    return results


def _search(conn, queries: np.ndarray) -> tuple[list[set], float]:
    started = time.perf_counter()
    found = []
    for q in queries:
        rows = conn.execute("SELECT id FROM dyn_items ORDER BY embedding <=> %s LIMIT 10", (q,), prepare=True).fetchall()
        found.append({r[0] for r in rows})
    return found, time.perf_counter() - started


def _recall(found: list[set], truth: list[set]) -> float:
    return sum(len(f & t) for f, t in zip(found, truth)) / (10 * len(truth))


def runbook(conninfo: str, base: np.ndarray, queries: np.ndarray, index_sql: str, gucs: dict, cycles: int) -> dict:
    """The sliding-window runbook; per-step recall and overall operations per second."""
    n = len(base)
    window = n // 2
    step = max(1, window // 20)
    cycles = min(cycles, (n - window) // step)
    base_n, queries_n = _normalised(base), _normalised(queries)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("DROP TABLE IF EXISTS dyn_items")
        conn.execute(f"CREATE TABLE dyn_items (id bigint PRIMARY KEY, embedding vector({base.shape[1]}))")
        conn.execute(index_sql.format(table="dyn_items"))
        for k, v in gucs.items():
            conn.execute(f"SET {k} = {v}")
        ops, busy = 0, 0.0
        started = time.perf_counter()
        for start in range(0, window, 1000):
            _insert_batch(conn, base, list(range(start, min(window, start + 1000))))
        load_seconds = time.perf_counter() - started
        busy += load_seconds
        ops += window
        oldest, newest = 0, window
        steps = []
        for cycle in range(cycles):
            truth = exact_top10(base_n, np.arange(oldest, newest), queries_n)
            found, search_seconds = _search(conn, queries)
            t = time.perf_counter()
            conn.execute("DELETE FROM dyn_items WHERE id < %s", (oldest + step,))
            delete_seconds = time.perf_counter() - t
            t = time.perf_counter()
            for start in range(newest, newest + step, 1000):
                _insert_batch(conn, base, list(range(start, min(newest + step, start + 1000))))
            insert_seconds = time.perf_counter() - t
            oldest += step
            newest += step
            busy += search_seconds + delete_seconds + insert_seconds
            ops += len(queries) + 2 * step
            steps.append({"cycle": cycle, "recall_at_10": _recall(found, truth), "search_seconds": search_seconds,
                          "delete_seconds": delete_seconds, "insert_seconds": insert_seconds})
            print(f"    runbook step {cycle}: recall {steps[-1]['recall_at_10']:.4f}, search {search_seconds:.2f} s, "
                  f"delete {delete_seconds:.2f} s, insert {insert_seconds:.2f} s", flush=True)
        truth = exact_top10(base_n, np.arange(oldest, newest), queries_n)
        found, search_seconds = _search(conn, queries)
        busy += search_seconds
        ops += len(queries)
        steps.append({"cycle": cycles, "recall_at_10": _recall(found, truth), "search_seconds": search_seconds,
                      "delete_seconds": 0.0, "insert_seconds": 0.0})
        conn.execute("DROP TABLE dyn_items")
    recalls = [s["recall_at_10"] for s in steps]
    return {"window": window, "step": step, "cycles": cycles, "queries": len(queries), "load_seconds": load_seconds,
            "operations": ops, "seconds": busy, "ops_per_second": ops / busy, "steps": steps,
            "first_recall": recalls[0], "min_recall": min(recalls), "max_recall_drop": recalls[0] - min(recalls)}


def mixed(conninfo: str, base: np.ndarray, queries: np.ndarray, index_sql: str, gucs: dict, seconds: float) -> dict:
    """An inserter (batches of 100), a deleter (oldest 100 rows at a time) and a searcher, at once."""
    n = len(base)
    window = n // 2
    base_n, queries_n = _normalised(base), _normalised(queries)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        register_vector(conn)
        _create(conn, base.shape[1], index_sql, base, range(window))
    stop = threading.Event()
    counts = {"inserted": 0, "deleted": 0, "searched": 0}
    bounds = {"oldest": 0, "newest": window}
    errors = []

    def inserter() -> None:
        with psycopg.connect(conninfo, autocommit=True) as c:
            register_vector(c)
            while not stop.is_set() and bounds["newest"] < n:
                ids = list(range(bounds["newest"], min(n, bounds["newest"] + 100)))
                _insert_batch(c, base, ids)
                bounds["newest"] += len(ids)
                counts["inserted"] += len(ids)

    def deleter() -> None:
        with psycopg.connect(conninfo, autocommit=True) as c:
            while not stop.is_set():
                if bounds["newest"] - bounds["oldest"] <= window // 2:
                    time.sleep(0.01)
                    continue
                c.execute("DELETE FROM dyn_items WHERE id < %s", (bounds["oldest"] + 100,))
                bounds["oldest"] += 100
                counts["deleted"] += 100

    def searcher() -> None:
        with psycopg.connect(conninfo, autocommit=True) as c:
            register_vector(c)
            for k, v in gucs.items():
                c.execute(f"SET {k} = {v}")
            i = 0
            while not stop.is_set():
                rows = c.execute("SELECT id FROM dyn_items ORDER BY embedding <=> %s LIMIT 10",
                                 (queries[i % len(queries)],), prepare=True).fetchall()
                if len(rows) < 10:
                    errors.append(f"search returned {len(rows)} rows")
                counts["searched"] += 1
                i += 1

    threads = [threading.Thread(target=f) for f in (inserter, deleter, searcher)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    with psycopg.connect(conninfo, autocommit=True) as conn:
        register_vector(conn)
        for k, v in gucs.items():
            conn.execute(f"SET {k} = {v}")
        live = np.array(sorted(r[0] for r in conn.execute("SELECT id FROM dyn_items").fetchall()))
        found, _ = _search(conn, queries)
        conn.execute("DROP TABLE dyn_items")
    recall = _recall(found, exact_top10(base_n, live, queries_n))
    result = {"seconds": elapsed, **{f"{k}_per_second": v / elapsed for k, v in counts.items()},
              "ops_per_second": sum(counts.values()) / elapsed, "final_recall_at_10": recall, "short_results": len(errors)}
    print(f"    mixed: {result['inserted_per_second']:,.0f} inserts/s, {result['deleted_per_second']:,.0f} deletes/s, "
          f"{result['searched_per_second']:,.0f} searches/s, final recall {recall:.4f}", flush=True)
    return result
