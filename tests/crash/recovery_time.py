"""Index recovery time at two index sizes with the same number of unflushed rows.

Run by `cargo xtask crash` after the trials (environment as for harness.py). For each size N
(default 100,000 and 1,000,000 synthetic 32-dimension vectors, kind flat so the builds are quick;
recovery does not depend on the kind), it:

  1. loads N rows with COPY and builds the index (segments only);
  2. checkpoints, then inserts UNFLUSHED rows (default 5,000) in one committed transaction — they
     stay in the memtable (memtable_rows is larger);
  3. kills the postmaster with kill -9, restarts (WAL replay), and runs one query, which opens
     the index and recovers it;
  4. reads `strata_index_recovery()`: duration_ms is the time from the index's first use after
     WAL replay to searchable (status pages read, plan, heap fetches, memtable refilled);
  5. checks that the index returns all N + UNFLUSHED rows.

Repeats each size REPEATS times and writes docs/benchmarks/recovery.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import time

import numpy as np
import psycopg

from cluster import conninfo, fresh_database, wait_for_server

DIMS = 32


def vector_text(row: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.5f}" for x in row) + "]"


def copy_rows(c: psycopg.Connection, block: np.ndarray) -> None:
    text = "".join("[" + ",".join(f"{x:.5f}" for x in row) + "]\n" for row in block)
    with c.cursor().copy("COPY items (v) FROM STDIN") as copy:
        copy.write(text.encode())


def load(dbname: str, rows: int, rng: np.random.Generator) -> None:
    fresh_database(dbname)
    with psycopg.connect(conninfo(dbname), autocommit=True) as c:
        # No autovacuum: an ANALYZE of the fresh table would compete with recovery for the CPUs.
        c.execute(f"CREATE TABLE items (id bigserial PRIMARY KEY, v vector({DIMS})) WITH (autovacuum_enabled = off)")
        batch = 50_000
        for start in range(0, rows, batch):
            copy_rows(c, rng.standard_normal((min(batch, rows - start), DIMS), dtype=np.float32))
        c.execute("SET maintenance_work_mem = '1GB'")
        c.execute(
            "CREATE INDEX items_idx ON items USING strata (v vector_l2_ops) WITH (kind = 'flat', memtable_rows = 100000)"
        )


def add_unflushed(dbname: str, unflushed: int, rng: np.random.Generator) -> int:
    """Flushes what earlier repeats left (so that exactly `unflushed` rows are unflushed), commits
    `unflushed` rows (they stay in the memtable), checkpoints; returns the table's rows."""
    with psycopg.connect(conninfo(dbname), autocommit=True) as c:
        c.execute("SELECT strata_flush('items_idx')")
        c.execute("CHECKPOINT")
        with c.transaction():
            copy_rows(c, rng.standard_normal((unflushed, DIMS), dtype=np.float32))
        return c.execute("SELECT count(*) FROM items").fetchone()[0]


def crash_and_recover(dbname: str, expected_rows: int) -> dict:
    with open(os.path.join(os.environ["STRATA_PGDATA"], "postmaster.pid")) as f:
        os.kill(int(f.readline()), signal.SIGKILL)
    time.sleep(0.2)
    started = time.monotonic()
    subprocess.run(os.environ["STRATA_RESTART"], shell=True, check=True, capture_output=True)
    wait_for_server()
    restart_s = time.monotonic() - started
    with psycopg.connect(conninfo(dbname), autocommit=True) as c:
        c.execute("SET enable_seqscan = off")
        t0 = time.monotonic()
        c.execute("SELECT id FROM items ORDER BY v <-> %s LIMIT 10", (vector_text(np.zeros(DIMS)),)).fetchall()
        first_query_ms = (time.monotonic() - t0) * 1000
        recovery = c.execute(
            "SELECT duration_ms, listed_memtables, status_pages, rebuilt_memtables, reinserted_rows "
            "FROM strata_index_recovery('items_idx')"
        ).fetchone()
        indexed = c.execute("SELECT coalesce(sum(rows - deleted), 0) FROM strata_index_stats('items_idx')").fetchone()[0]
    if indexed != expected_rows:
        raise RuntimeError(f"after recovery the index holds {indexed} rows, expected {expected_rows}")
    return {
        "restart_and_wal_replay_s": round(restart_s, 2),
        "first_query_ms": round(first_query_ms, 2),
        "recovery_ms": recovery[0],
        "listed_memtables": recovery[1],
        "status_pages": recovery[2],
        "rebuilt_memtables": recovery[3],
        "reinserted_rows": recovery[4],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--unflushed", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="docs/benchmarks")
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    results = []
    for size in [int(s) for s in args.sizes.split(",")]:
        dbname = f"recovery_{size}"
        load(dbname, size, rng)
        for repeat in range(args.repeats):
            total = add_unflushed(dbname, args.unflushed, rng)
            run = crash_and_recover(dbname, total)
            run.update(rows=size, unflushed=args.unflushed, repeat=repeat)
            print(json.dumps(run), flush=True)
            results.append(run)
        with psycopg.connect(conninfo("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
    sizes = sorted({r["rows"] for r in results})
    median = {s: statistics.median(r["recovery_ms"] for r in results if r["rows"] == s) for s in sizes}
    first = {s: statistics.median(r["first_query_ms"] for r in results if r["rows"] == s) for s in sizes}
    ratio = median[sizes[-1]] / median[sizes[0]] if len(sizes) > 1 and median[sizes[0]] > 0 else None
    report = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "dims": DIMS,
        "unflushed_rows": args.unflushed,
        "runs": results,
        "median_recovery_ms": {str(s): median[s] for s in sizes},
        "median_first_query_ms": {str(s): first[s] for s in sizes},
        "largest_over_smallest": ratio,
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "recovery.json"), "w") as f:
        json.dump(report, f, indent=2)
    lines = [
        "# Index recovery time",
        "",
        "Written by `cargo xtask crash` (tests/crash/recovery_time.py). Synthetic 32-dimension vectors,",
        f"kind flat; {args.unflushed:,} committed rows left in the memtable, then `kill -9` of the postmaster,",
        "restart (WAL replay), one query. `recovery` is `strata_index_recovery().duration_ms`: from the",
        "index's first use after WAL replay to searchable (read the status pages, plan, fetch the lost",
        "memtable's rows from the heap, refill it). `first query` is that query's client time, recovery",
        f"included. Median of {args.repeats} runs per size.",
        "",
        "| index rows | recovery (ms) | first query (ms) | status pages read | rows re-read |",
        "|---:|---:|---:|---:|---:|",
    ]
    for s in sizes:
        runs = [r for r in results if r["rows"] == s]
        pages = statistics.median(r["status_pages"] for r in runs)
        reread = statistics.median(r["reinserted_rows"] for r in runs)
        lines.append(f"| {s:,} | {median[s]:.2f} | {first[s]:.1f} | {pages:g} | {reread:,.0f} |")
    if ratio is not None:
        lines += ["", f"Recovery at {sizes[-1]:,} rows ÷ at {sizes[0]:,} rows: **{ratio:.2f}×** (target ≤ 1.5×; target ≤ 50 ms)."]
    with open(os.path.join(args.out, "recovery.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
