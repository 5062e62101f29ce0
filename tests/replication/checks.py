"""What the replication harness checks on a node: index == heap, exact top-k against another node,
recall against the node's own brute force, and the WAL a workload writes."""

from __future__ import annotations

import re
import time

import numpy as np
import psycopg

from nodes import Node


def vector_text(row: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.6g}" for x in row) + "]"


def index_scan(c: psycopg.Connection, table: str, query: str, limit: int | None, where: str = "") -> list[int]:
    """Ids through the table's strata index (the plan is checked), nearest first, of the rows
    `where` (a WHERE clause, or empty) keeps."""
    c.execute("SET enable_seqscan = off")
    c.execute("SET enable_bitmapscan = off")
    c.execute("SET enable_sort = off")
    if limit is None:
        c.execute("SET strata.max_scan_tuples = 2147483647")
        # Every row, the approximate kinds' too (a strict scan skips rows found late).
        c.execute("SET hnsw.iterative_scan = relaxed_order")
    sql = f"SELECT id FROM {table} {where} ORDER BY embedding <-> %s::vector" + (f" LIMIT {limit}" if limit else "")
    check_plan(c, sql, (query,), f"{table}_embedding_idx")
    ids = [r[0] for r in c.execute(sql, (query,)).fetchall()]
    c.execute("RESET ALL")
    return ids


def check_plan(c: psycopg.Connection, sql: str, params: tuple, index: str) -> None:
    """Raises AssertionError unless `sql` with `params` is planned as an index scan of `index`."""
    plan = "\n".join(r[0] for r in c.execute("EXPLAIN (COSTS OFF) " + sql, params).fetchall())
    if f"Index Scan using {index}" not in plan:
        raise AssertionError(f"the query does not use {index}:\n{plan}")


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
            filtered_ok = True
            if "grp" in c.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", (f"{table}_embedding_idx",)).fetchone()[0]:
                # The filter column through the index: exactly the heap's rows of the group.
                filtered = index_scan(c, table, probe, None, "WHERE grp = 3")
                filtered_ok = sorted(filtered) == sorted(r[0] for r in c.execute(f"SELECT id FROM {table} WHERE grp + 0 = 3"))
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
    result["filtered_ok"] = filtered_ok
    result["ok"] = result["missing"] == 0 and result["extra"] == 0 and result["duplicates"] == 0 and filtered_ok
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


def snapshot_survives_replay(primary: Node, standby: Node, table: str, probe: str, feedback: bool) -> dict:
    """A repeatable-read transaction on `standby` reads `table` through its index, then the primary
    deletes a fifth of the rows, VACUUMs (their TIDs become reusable) and inserts as many new rows
    (which may take those TIDs); once the standby has replayed that, the transaction reads again.
    It must either see exactly what it saw before, through the index and through the heap, or be
    cancelled with PostgreSQL's recovery-conflict error (SQLSTATE 40001) — never a wrong row, a
    stale vector or a missing file. With `hot_standby_feedback` on, it must not be cancelled."""
    from nodes import wait_for_replay

    standby.configure({"hot_standby_feedback": "on" if feedback else "off", "max_standby_streaming_delay": "'1s'"})
    standby.query("SELECT pg_reload_conf()", "postgres")
    time.sleep(1.5)  # feedback reaches the primary with the next status message
    result: dict = {"hot_standby_feedback": feedback}
    reader = psycopg.connect(standby.conninfo("repl"))
    try:
        reader.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        before = sorted(index_scan(reader, table, probe, None))
        # New rows get ids of their own range (the workload's ids continue after the check).
        first_id = 30_000_000 + (1_000_000 if feedback else 0)
        with primary.connect("repl") as p:
            deleted = p.execute(f"DELETE FROM {table} WHERE id % 5 = 0 AND id < 10000000").rowcount
            # TRUNCATE false: truncating empty trailing pages takes an AccessExclusiveLock whose
            # replay cancels the reader whatever hot_standby_feedback says (a lock conflict, not
            # the snapshot conflict checked here; PostgreSQL 18's VACUUM met empty trailing pages).
            p.execute(f"VACUUM (TRUNCATE false) {table}")
            p.execute(
                f"INSERT INTO {table} SELECT {first_id} + row_number() OVER (), embedding FROM "
                f"(SELECT embedding FROM {table} ORDER BY id LIMIT {deleted}) s"
            )
        wait_for_replay(primary, [standby])
        time.sleep(1.5)  # past max_standby_streaming_delay
        after = sorted(index_scan(reader, table, probe, None))
        heap = sorted(r[0] for r in reader.execute(f"SELECT id FROM {table}").fetchall())
        result.update(cancelled=False, same=before == after == heap)
        result["ok"] = result["same"]
    except psycopg.Error as e:
        state = getattr(e, "sqlstate", None)
        result.update(cancelled=True, sqlstate=state, error=str(e).strip().splitlines()[0])
        # An idle-in-transaction session is terminated rather than cancelled; the client may see
        # the FATAL's text without its SQLSTATE.
        conflict = state == "40001" or "conflict with recovery" in str(e)
        result["ok"] = not feedback and conflict
    finally:
        try:
            reader.close()
        except psycopg.Error:
            pass
    return result


def idle_catch_up(standby: Node, table: str, seconds: float = 20) -> dict:
    """Whether the standby's index of `table` comes to hold as many live rows as its heap without
    any query through it (only `strata_index_stats`, which does not absorb)."""
    deadline = time.monotonic() + seconds
    started = time.monotonic()
    while True:
        entries = standby.query(f"SELECT coalesce(sum(rows - deleted), 0) FROM strata_index_stats('{table}_embedding_idx')")[0][0]
        heap = standby.query(f"SELECT count(*) FROM {table}")[0][0]
        if entries == heap or time.monotonic() > deadline:
            return {"entries": int(entries), "heap_rows": heap, "seconds": round(time.monotonic() - started, 1), "ok": entries == heap}
        time.sleep(0.2)


def log_since(node: Node, offset: int) -> str:
    """The node's server log written after byte `offset`."""
    with open(node.log, "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def absorber_isolation(primary: Node, standby: Node, failing: str, others: tuple[str, ...], write_rows) -> dict:
    """On `standby`, every file write of `failing`'s index fails (EIO injected): the primary deletes
    and VACUUMs rows of `failing` (the standby must rewrite deletion bitmaps) and `write_rows()`
    adds rows to every table. Then, without a query through any index:
    - the `others` indexes still catch up (one failing index must not stop its database's worker);
    - `strata_index_stats` of the failing index shows an `absorb` row, failing, with its attempts and
      the last error, and the server log has one line for the episode, not one per attempt;
    - after the fault is cleared, the failing index catches up, its `absorb` row goes, a LOG line
      says so, and index == heap."""
    from nodes import wait_for_replay

    index = f"{failing}_embedding_idx"
    log_offset = node_log_size(standby)
    standby.query(f"SELECT strata_inject_fault('any', 'any', 'EIO', -1, '{index}'::regclass)")
    result: dict = {}
    try:
        with primary.connect("repl") as c:
            c.execute(f"DELETE FROM {failing} WHERE id % 7 = 3 AND id < 10000000")
            c.execute(f"VACUUM {failing}")
        write_rows()
        wait_for_replay(primary, [standby])
        result["others_catch_up"] = {table: idle_catch_up(standby, table, seconds=8) for table in others}
        time.sleep(3)  # several attempts, with backoff
        failing_rows = standby.query(
            f"SELECT state, retries, last_error FROM strata_index_stats('{index}') WHERE part = 'absorb'"
        )
        result["absorb_row_while_failing"] = [list(r) for r in failing_rows]
        shown = len(failing_rows) == 1 and failing_rows[0][0] == "failing" and failing_rows[0][1] >= 2 \
            and "Input/output error" in (failing_rows[0][2] or "")
    finally:
        injected = standby.query("SELECT strata_clear_fault()")[0][0]
    result["faults_injected"] = injected
    result["after_clear"] = idle_catch_up(standby, failing, seconds=90)
    result["absorb_rows_after_clear"] = len(
        standby.query(f"SELECT 1 FROM strata_index_stats('{index}') WHERE part = 'absorb'")
    )
    log = log_since(standby, log_offset)
    result["log_lines_failed"] = len(re.findall(r"pg_strata absorber: following index \S+ failed: ", log))
    result["log_lines_recovered"] = len(
        re.findall(r"pg_strata absorber: following index \S+ succeeded after \d+ failed attempts", log)
    )
    result["index_vs_heap"] = index_vs_heap(standby, failing, "[" + ",".join(["0.05"] * 384) + "]")
    result["ok"] = (
        all(r["ok"] for r in result["others_catch_up"].values())
        and shown
        and result["after_clear"]["ok"]
        and result["absorb_rows_after_clear"] == 0
        and result["log_lines_failed"] == 1
        and result["log_lines_recovered"] == 1
        and result["index_vs_heap"]["ok"]
    )
    return {failing: result}


def node_log_size(node: Node) -> int:
    try:
        return node.log.stat().st_size
    except OSError:
        return 0


# The bm25 index of flat_items' `body` (the row's PyPI summary), and a probe of common words: a
# scan for them without LIMIT reaches a large share of the rows.
BM25_INDEX = "flat_items_body_idx"
BM25_PROBE = "python library api client data tool server framework package plugin"


def bm25_scan(c: psycopg.Connection, query: str, limit: int | None) -> list[tuple[int, float]]:
    """(id, BM25 score) through the bm25 index (the plan is checked), best first."""
    c.execute("SET enable_seqscan = off")
    c.execute("SET enable_bitmapscan = off")
    # A scan without LIMIT reads every matching row, past the default row cap.
    c.execute("SET strata.max_scan_tuples = 100000000")
    sql = (f"SELECT id, -(body <@> to_bm25query(%s, '{BM25_INDEX}')) FROM flat_items "
           f"ORDER BY body <@> to_bm25query(%s, '{BM25_INDEX}')" + (f" LIMIT {limit}" if limit else ""))
    check_plan(c, sql, (query, query), BM25_INDEX)
    rows = [(r[0], r[1]) for r in c.execute(sql, (query, query)).fetchall()]
    c.execute("RESET ALL")
    return rows


def bm25_index_vs_heap(node: Node) -> dict:
    """A bm25 scan without LIMIT for BM25_PROBE against the heap rows whose `to_tsvector` holds
    one of its lexemes (PostgreSQL's own matching): rows missing, extra, returned twice."""
    try:
        with node.connect("repl") as c:
            through_index = [i for i, _ in bm25_scan(c, BM25_PROBE, None)]
            heap = {r[0] for r in c.execute(
                "SELECT id FROM flat_items WHERE to_tsvector('english', body) @@ to_tsquery('simple', "
                "array_to_string(tsvector_to_array(to_tsvector('english', %s)), ' | '))", (BM25_PROBE,))}
    except (psycopg.Error, AssertionError) as e:
        return {"ok": False, "error": str(e).strip().splitlines()[0]}
    seen = set(through_index)
    result = {
        "matching_heap_rows": len(heap),
        "index_rows": len(seen),
        "missing": len(heap - seen),
        "extra": len(seen - heap),
        "duplicates": len(through_index) - len(seen),
    }
    result["ok"] = len(heap) > 0 and result["missing"] == 0 and result["extra"] == 0 and result["duplicates"] == 0
    return result


def bm25_top10_vs_reference(node: Node, queries: list[str]) -> dict:
    """The bm25 top 10 (ids and scores, relative error ≤ 1e-4, ties in any order) of `queries`
    against a reference BM25 (crates/bench/python/bm25_reference.py) over the node's own live rows,
    tokenised by its `to_tsvector`. Run when VACUUM has left no dead row in the index."""
    from bm25_reference import Reference, same_top

    try:
        with node.connect("repl") as c:
            tokens: dict = {}
            for row_id, lexeme, tf in c.execute(
                "SELECT id, v.lexeme, cardinality(v.positions) FROM flat_items, "
                "unnest(to_tsvector('english', body)) v WHERE body IS NOT NULL"
            ).fetchall():
                tokens.setdefault(row_id, {})[lexeme] = tf
            for (row_id,) in c.execute("SELECT id FROM flat_items WHERE body IS NOT NULL").fetchall():
                tokens.setdefault(row_id, {})
            reference = Reference(tokens)
            same = 0
            for query in queries:
                lexemes = [r[0] for r in c.execute(
                    "SELECT unnest(tsvector_to_array(to_tsvector('english', %s)))", (query,)).fetchall()]
                same += same_top(bm25_scan(c, query, 10), reference.top(lexemes, 1_000))
    except (psycopg.Error, AssertionError) as e:
        return {"ok": False, "error": str(e).strip().splitlines()[0]}
    return {"same": same, "queries": len(queries), "ok": same == len(queries)}


def bm25_findable_at_replay(primary: Node, standby: Node, vector: str, markers: int = 10) -> dict:
    """For `markers` rows, each with a word no other row has, committed one at a time on the
    primary: as soon as the standby has replayed the commit (`pg_last_wal_replay_lsn`), one bm25
    scan on it must find the row, with no retry: a scan takes in what replay brought before it
    reads (the absorber workers, every 200 ms, are not what it waits for)."""
    missed = []
    with primary.connect("repl") as p, standby.connect("repl") as s:
        s.execute("SET enable_seqscan = off")
        s.execute("SET enable_bitmapscan = off")
        for n in range(markers):
            marker_id, word = 20_000_000 + n, f"zyxmarker{n}qv"
            p.execute("INSERT INTO flat_items (id, embedding, body) VALUES (%s, %s::vector, %s)",
                      (marker_id, vector, f"replication marker {word}"))
            lsn = p.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
            started = time.monotonic()
            while not s.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:
                if time.monotonic() - started > 30:
                    return {"ok": False, "error": f"the standby did not replay {lsn} in 30 s"}
            row = s.execute(f"SELECT id FROM flat_items ORDER BY body <@> to_bm25query(%s, '{BM25_INDEX}') LIMIT 1",
                            (word,)).fetchone()
            if not row or row[0] != marker_id:
                missed.append(marker_id)
        p.execute("DELETE FROM flat_items WHERE id >= 20000000")
    return {"markers": markers, "missed": len(missed), "ok": not missed}
