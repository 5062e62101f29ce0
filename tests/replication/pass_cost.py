"""What a standby's absorb pass adds to a query at a given index size.

A primary with one table of N synthetic 32-dimension vectors and a `kind = 'ivf'` strata index
(built, then `--unflushed` rows left in a memtable), one `pg_basebackup -R` standby that has caught
up and absorbed once; then the same `ORDER BY ... LIMIT 10` query (the planner's choice checked to
be the index) runs `--repeats` times on each node, on one connection per node (or, with
`--new-connections`, each on a new one, which adds the backend's first use of the index), and the
medians of its execution time (`EXPLAIN (ANALYZE)`, which includes the standby's pass in the
scan's start) are compared.

    python tests/replication/pass_cost.py --rows 1000000

Runs as root; the nodes run as `postgres` (STRATA_PG_BIN as for replica.py).
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import shutil
import statistics
import tempfile
import time

import numpy as np

from checks import vector_text
from nodes import make_primary, make_standby, wait_for_replay

DIMS = 32


def execution_ms(connect, sql: str, query: str) -> float:
    with connect() as c:
        c.execute("SET enable_seqscan = off")
        plan = c.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, (query,)).fetchone()[0][0]
    assert "strata" in str(plan) or "Index Scan" in str(plan), plan
    return plan["Execution Time"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--unflushed", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--port", type=int, default=56600)
    parser.add_argument("--new-connections", action="store_true", help="each query on a new connection")
    args = parser.parse_args()
    rng = np.random.default_rng(3)
    root = pathlib.Path(tempfile.mkdtemp(prefix="strata-pass-", dir="/tmp"))
    root.chmod(0o755)
    nodes = []
    try:
        primary = make_primary(root, args.port, root / "archive")
        nodes.append(primary)
        with primary.connect("postgres") as c:
            c.execute("CREATE DATABASE repl")
        with primary.connect("repl") as c:
            c.execute("CREATE EXTENSION pg_strata")
            c.execute(f"CREATE TABLE items (id bigserial PRIMARY KEY, v vector({DIMS})) WITH (autovacuum_enabled = off)")
            for start in range(0, args.rows, 100_000):
                block = rng.standard_normal((min(100_000, args.rows - start), DIMS), dtype=np.float32)
                with c.cursor().copy("COPY items (v) FROM STDIN") as copy:
                    copy.write("".join(vector_text(row) + "\n" for row in block).encode())
            started = time.monotonic()
            c.execute("SET maintenance_work_mem = '1GB'")
            c.execute("CREATE INDEX items_idx ON items USING strata (v vector_l2_ops) WITH (kind = 'ivf')")
            build_s = time.monotonic() - started
            block = rng.standard_normal((args.unflushed, DIMS), dtype=np.float32)
            with c.cursor().copy("COPY items (v) FROM STDIN") as copy:
                copy.write("".join(vector_text(row) + "\n" for row in block).encode())
        standby = make_standby(root, "standby", args.port + 1, primary, {"archive_mode": "off"})
        nodes.append(standby)
        wait_for_replay(primary, [standby])
        sql = "SELECT id FROM items ORDER BY v <-> %s::vector LIMIT 10"
        query = vector_text(rng.standard_normal(DIMS).astype(np.float32))
        times = {}
        for node in (primary, standby):
            kept = node.connect("repl")
            # A connection whose closing is a no-op, so `with` keeps it open between queries.
            same = contextlib.nullcontext(kept)
            connect = (lambda node=node: node.connect("repl")) if args.new_connections else (lambda same=same: same)
            execution_ms(connect, sql, query)  # the node's first use (the standby's first pass)
            time.sleep(2)
            times[node.name] = statistics.median(execution_ms(connect, sql, query) for _ in range(args.repeats))
            kept.close()
        print(
            f"rows {args.rows:,} (+{args.unflushed:,} unflushed), ivf build {build_s:.1f} s: median execution "
            f"primary {times['primary']:.3f} ms, standby {times['standby']:.3f} ms, "
            f"difference {times['standby'] - times['primary']:.3f} ms over {args.repeats} queries"
            + (" (each on a new connection)" if args.new_connections else " (one connection per node)")
        )
    finally:
        for node in nodes:
            node.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
