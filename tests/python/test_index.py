"""The strata index against exact oracles in a real cluster: brute force over real embeddings,
the heap (index == heap after concurrent writers), cross-transaction visibility, and files."""

import os
import pathlib
import random
import threading
import time

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from conftest import _conninfo

ROWS = 20_000
TIE = 1e-5


def brute_force(base: np.ndarray, query: np.ndarray, metric: str, k: int = 10):
    b = base.astype(np.float64)
    q = query.astype(np.float64)
    if metric == "<->":
        d = np.sqrt(((b - q) ** 2).sum(axis=1))
    elif metric == "<#>":
        d = -(b @ q)
    else:
        d = 1.0 - (b @ q) / (np.linalg.norm(b, axis=1) * np.linalg.norm(q))
    order = np.argsort(d, kind="stable")[:k]
    return order, d[order]


def assert_matches(rows, base, query, metric):
    ids = np.array([r[0] for r in rows])
    distances = np.array([r[1] for r in rows])
    gt_ids, gt_distances = brute_force(base, query, metric)
    assert np.allclose(distances, gt_distances, atol=TIE), (distances, gt_distances)
    boundary = gt_distances[-1] - TIE
    assert set(ids[distances < boundary]) == set(gt_ids[gt_distances < boundary])


def load(conn, base, ids):
    with conn.cursor().copy("COPY items (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "vector"])
        for i in ids:
            copy.write_row([int(i), base[i]])


@pytest.mark.parametrize("metric,opclass", [("<->", "vector_l2_ops"), ("<#>", "vector_ip_ops"), ("<=>", "vector_cosine_ops")])
def test_flat_index_is_exact_through_build_memtables_and_flush(conn, minilm, metric, opclass):
    base, queries = minilm
    register_vector(conn)
    conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, embedding vector(384))")
    load(conn, base, range(ROWS // 2))
    conn.execute(f"CREATE INDEX items_idx ON items USING strata (embedding {opclass}) WITH (kind = 'flat', memtable_rows = 3000)")
    load(conn, base, range(ROWS // 2, ROWS))  # lands in memtables; some get sealed and flushed
    conn.execute("SET enable_seqscan = off")
    sql = f"SELECT id, embedding {metric} %s FROM items ORDER BY embedding {metric} %s LIMIT 10"
    assert "Index Scan using items_idx" in "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, (queries[0], queries[0])))
    for query in queries[:10]:
        assert_matches(conn.execute(sql, (query, query)).fetchall(), base, query, metric)
    conn.execute("SELECT strata_flush('items_idx')")
    parts = conn.execute("SELECT part, rows FROM strata_index_stats('items_idx')").fetchall()
    assert all(p == "segment" for p, _ in parts) and sum(r for _, r in parts) == ROWS
    for query in queries[10:20]:
        assert_matches(conn.execute(sql, (query, query)).fetchall(), base, query, metric)


def index_tids(conn):
    conn.execute("SET enable_seqscan = off; SET enable_bitmapscan = off; SET strata.max_scan_tuples = 10000000; "
                 "SET hnsw.iterative_scan = relaxed_order")
    rows = conn.execute("SELECT ctid::text FROM items ORDER BY embedding <-> %s LIMIT 10000000", (np.zeros(384, dtype=np.float32),)).fetchall()
    conn.execute("RESET enable_seqscan; RESET enable_bitmapscan; RESET strata.max_scan_tuples; "
                 "RESET hnsw.iterative_scan")
    return [r[0] for r in rows]


def test_concurrent_writers_and_searchers_leave_index_equal_to_heap(conn, minilm):
    base, queries = minilm
    register_vector(conn)
    conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, embedding vector(384))")
    load(conn, base, range(2000))
    conn.execute("CREATE INDEX items_idx ON items USING strata (embedding vector_l2_ops) WITH (kind = 'flat', memtable_rows = 500)")
    dbname = conn.info.dbname
    seconds = float(os.environ.get("STRATA_STRESS_SECONDS", "8"))
    deadline = time.monotonic() + seconds
    errors = []
    next_id = iter(range(2000, 10**9))
    id_lock = threading.Lock()

    def writer(seed):
        rng = random.Random(seed)
        try:
            with psycopg.connect(_conninfo(dbname)) as c:
                register_vector(c)
                while time.monotonic() < deadline:
                    with id_lock:
                        ids = [next(next_id) for _ in range(rng.randint(1, 20))]
                    with c.transaction() as tx:
                        for i in ids:
                            c.execute("INSERT INTO items VALUES (%s, %s)", (i, base[i % ROWS]))
                        if rng.random() < 0.2:
                            c.execute("DELETE FROM items WHERE id = %s", (rng.randint(0, ids[0]),))
                        if rng.random() < 0.3:
                            raise psycopg.Rollback(tx)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    def searcher(seed):
        rng = random.Random(seed)
        try:
            with psycopg.connect(_conninfo(dbname)) as c:
                register_vector(c)
                c.execute("SET enable_seqscan = off")
                while time.monotonic() < deadline:
                    q = queries[rng.randrange(len(queries))]
                    rows = c.execute("SELECT id FROM items ORDER BY embedding <-> %s LIMIT 10", (q,)).fetchall()
                    assert len(rows) == 10
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    threads += [threading.Thread(target=searcher, args=(100 + i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    heap = sorted(r[0] for r in conn.execute("SELECT ctid::text FROM items").fetchall())
    through_index = index_tids(conn)
    assert len(through_index) == len(set(through_index)), "no TID is returned twice"
    assert sorted(through_index) == heap
    # INDEX_CLEANUP ON: PostgreSQL may otherwise skip index vacuuming when few heap pages hold
    # dead rows, leaving entries the count below would see (rightly: their TIDs stay unusable).
    conn.execute("VACUUM (INDEX_CLEANUP ON) items")
    assert sorted(index_tids(conn)) == heap
    live = conn.execute("SELECT sum(rows - deleted) FROM strata_index_stats('items_idx')").fetchone()[0]
    assert live == len(heap), "after VACUUM the index holds exactly the live rows"


def test_other_transactions_rows_are_invisible_until_commit(conn, minilm):
    base, queries = minilm
    register_vector(conn)
    conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, embedding vector(384))")
    load(conn, base, range(1000))
    conn.execute("CREATE INDEX items_idx ON items USING strata (embedding vector_l2_ops) WITH (kind = 'flat')")
    conn.execute("SET enable_seqscan = off")
    q = queries[0]
    with psycopg.connect(_conninfo(conn.info.dbname)) as other:
        register_vector(other)
        other.execute("INSERT INTO items VALUES (%s, %s)", (424242, q))  # not committed yet
        first = conn.execute("SELECT id FROM items ORDER BY embedding <-> %s LIMIT 1", (q,)).fetchone()[0]
        assert first != 424242
        assert other.execute("SELECT id FROM items ORDER BY embedding <-> %s LIMIT 1", (q,)).fetchone()[0] == 424242
        other.commit()
    assert conn.execute("SELECT id FROM items ORDER BY embedding <-> %s LIMIT 1", (q,)).fetchone()[0] == 424242


def strata_dirs():
    root = pathlib.Path(os.environ["STRATA_PGHOST"]) / "data" / "pg_strata"
    return set(p.name for p in root.iterdir()) if root.exists() else set()


def wait_until(predicate, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def test_drop_truncate_reindex_leave_no_orphaned_files(conn, minilm):
    base, _ = minilm
    register_vector(conn)
    conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, embedding vector(384))")
    load(conn, base, range(500))
    before = strata_dirs()
    conn.execute("CREATE INDEX items_idx ON items USING strata (embedding) WITH (kind = 'flat')")
    created = strata_dirs() - before
    assert len(created) == 1
    conn.execute("REINDEX INDEX items_idx")
    conn.execute("TRUNCATE items")
    load(conn, base, range(10))
    conn.execute("CHECKPOINT")  # PostgreSQL unlinks dropped relation files at the next checkpoint
    assert wait_until(lambda: len(strata_dirs() - before) == 1), "REINDEX and TRUNCATE leave only the current directory"
    conn.execute("DROP TABLE items")
    conn.execute("CHECKPOINT")
    assert wait_until(lambda: strata_dirs() - before == set()), "DROP removes the index's files"


def test_an_index_nobody_writes_to_settles_its_flushed_memtables(conn):
    """A flushed memtable's group is settled in the status pages without waiting for the next
    writer (a standby holds one memtable slab per open group, and merges leave open groups
    alone). 641 rows at memtable_rows = 64: the last row seals the tenth memtable, so its flush
    ends after the statement, and only a settle without a writer can close its group."""
    conn.execute("CREATE TABLE idle_items (id int, v vector(8))")
    conn.execute("CREATE INDEX idle_idx ON idle_items USING strata (v vector_l2_ops) WITH (kind = 'flat', memtable_rows = 64)")
    conn.execute(
        "INSERT INTO idle_items SELECT i, (SELECT array_agg(random()::real) FROM generate_series(1, 8) g WHERE i > 0)::vector "
        "FROM generate_series(1, 641) i"
    )
    deadline = time.monotonic() + 20
    while True:
        groups = conn.execute("SELECT open, settled FROM strata_index_groups('idle_idx')").fetchone()
        if groups == (1, 10) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    # The eleventh memtable (one row, active) stays open; the ten flushed ones are settled.
    assert groups == (1, 10), groups
    parts = conn.execute("SELECT part, count(*) FROM strata_index_stats('idle_idx') GROUP BY part ORDER BY part").fetchall()
    assert parts[0] == ("memtable", 1), parts
    conn.execute("DROP TABLE idle_items")
