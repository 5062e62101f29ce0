"""What the replication harness checks on a node: index == heap, exact top-k against another node,
recall against the node's own brute force, and the WAL a workload writes."""

from __future__ import annotations

import numpy as np
import psycopg

from nodes import Node


def vector_text(row: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.6g}" for x in row) + "]"


def index_scan(c: psycopg.Connection, table: str, query: str, limit: int | None) -> list[int]:
    """Ids through the table's strata index (the plan is checked), nearest first."""
    c.execute("SET enable_seqscan = off")
    c.execute("SET enable_bitmapscan = off")
    c.execute("SET enable_sort = off")
    if limit is None:
        c.execute("SET strata.max_scan_tuples = 2147483647")
    sql = f"SELECT id FROM {table} ORDER BY embedding <-> %s::vector" + (f" LIMIT {limit}" if limit else "")
    plan = "\n".join(r[0] for r in c.execute("EXPLAIN (COSTS OFF) " + sql, (query,)).fetchall())
    if f"Index Scan using {table}_embedding_idx" not in plan:
        raise AssertionError(f"the query on {table} does not use the strata index:\n{plan}")
    ids = [r[0] for r in c.execute(sql, (query,)).fetchall()]
    c.execute("RESET ALL")
    return ids


def exact_scan(c: psycopg.Connection, table: str, query: str, limit: int) -> list[int]:
    """The exact top-`limit` by sequential scan and sort (the oracle)."""
    c.execute("SET enable_indexscan = off")
    c.execute("SET enable_bitmapscan = off")
    ids = [
        r[0]
        for r in c.execute(
            f"SELECT id FROM {table} ORDER BY embedding <-> %s::vector, id LIMIT {limit}", (query,)
        ).fetchall()
    ]
    c.execute("RESET ALL")
    return ids


def index_vs_heap(node: Node, table: str, probe: str) -> dict:
    """A scan without LIMIT through the index against the heap: rows missing from the index, rows
    the index returns that the heap lacks, rows returned twice. `error` when the scan fails."""
    try:
        with node.connect("repl") as c:
            through_index = index_scan(c, table, probe, None)
            heap = {r[0] for r in c.execute(f"SELECT id FROM {table}").fetchall()}
    except (psycopg.Error, AssertionError) as e:
        return {"ok": False, "error": str(e).strip().splitlines()[0]}
    seen = set(through_index)
    result = {
        "heap_rows": len(heap),
        "index_rows": len(seen),
        "missing": len(heap - seen),
        "extra": len(seen - heap),
        "duplicates": len(through_index) - len(seen),
    }
    result["ok"] = result["missing"] == 0 and result["extra"] == 0 and result["duplicates"] == 0
    return result


def top_k_matches(node: Node, reference: Node, table: str, queries: list[str], k: int = 10) -> dict:
    """How many of `queries` return the same top-k ids through `node`'s index as through
    `reference`'s index (used with exact flat indexes)."""
    try:
        with node.connect("repl") as c, reference.connect("repl") as r:
            same = sum(index_scan(c, table, q, k) == index_scan(r, table, q, k) for q in queries)
    except (psycopg.Error, AssertionError) as e:
        return {"ok": False, "error": str(e).strip().splitlines()[0]}
    return {"same": same, "queries": len(queries), "ok": same == len(queries)}


def recall(node: Node, table: str, queries: list[str], k: int = 10) -> dict:
    """Mean recall@k of the index against the node's own exact scan, and the index queries' mean
    latency in ms."""
    import time

    try:
        with node.connect("repl") as c:
            hits, elapsed = 0, 0.0
            for q in queries:
                started = time.perf_counter()
                found = index_scan(c, table, q, k)
                elapsed += time.perf_counter() - started
                hits += len(set(found) & set(exact_scan(c, table, q, k)))
    except (psycopg.Error, AssertionError) as e:
        return {"error": str(e).strip().splitlines()[0]}
    return {"recall": hits / (k * len(queries)), "mean_ms": 1000 * elapsed / len(queries)}


def wal_position(node: Node) -> int:
    return node.query("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn", "postgres")[0][0]
