"""IVF indexes with `rerank = 'heap'`: segments keep only 4-bit codes and scans compute exact
distances from the table's rows. Oracle: brute force over the rows live in the table, read back
from it after inserts, flushes, merges, updates (HOT and not), deletes and VACUUM."""

import numpy as np
from pgvector.psycopg import register_vector

from test_index import assert_matches, load


def live_rows(conn, where="true"):
    rows = conn.execute(f"SELECT id, embedding FROM items WHERE {where} ORDER BY id").fetchall()
    vectors = [r[1].to_numpy() if hasattr(r[1], "to_numpy") else r[1] for r in rows]
    return np.array([r[0] for r in rows]), np.array(vectors, dtype=np.float32)


def segments(conn):
    return conn.execute(
        "SELECT count(*), coalesce(sum(rows), 0), coalesce(sum(bytes), 0) FROM strata_index_stats('items_idx') WHERE part = 'segment'"
    ).fetchone()


def check_exact(conn, queries, where="true"):
    ids, vectors = live_rows(conn, where)
    escaped = where.replace("%", "%%")  # the query below has parameters
    sql = f"SELECT id, embedding <=> %s FROM items WHERE {escaped} ORDER BY embedding <=> %s LIMIT 10"
    for query in queries:
        got = conn.execute(sql, (query, query)).fetchall()
        # assert_matches works on row offsets: map ids to offsets in the live set.
        offsets = {int(i): n for n, i in enumerate(ids)}
        assert_matches([(offsets[r[0]], r[1]) for r in got], vectors, query, "<=>")


def test_heap_reranked_ivf_is_exact_at_full_probes_through_merges_updates_and_vacuum(conn, minilm):
    base, queries = minilm
    register_vector(conn)
    # No autovacuum: an ANALYZE's snapshot would keep VACUUM below from removing every dead
    # version, and the entry count checked at the end assumes it removes them all.
    conn.execute(
        "CREATE TABLE items (id bigint PRIMARY KEY, embedding vector(384), note text) WITH (autovacuum_enabled = off)"
    )
    load(conn, base, range(4000))
    conn.execute(
        "CREATE INDEX items_idx ON items USING strata (embedding vector_cosine_ops) "
        "WITH (kind = 'ivf', rerank = 'heap', memtable_rows = 1000)"
    )
    load(conn, base, range(4000, 12000))
    conn.execute("SELECT strata_flush('items_idx')")
    # 8 flushed memtables of 1,000 rows: the service merges them (tiered, 4 at a time) from codes.
    left = conn.execute("SELECT strata_wait_for_merges('items_idx', 60)").fetchone()[0]
    count, rows, size = segments(conn)
    assert left == count and count <= 4 and rows == 12000, (left, count, rows)
    # Codes (192 bytes at 4 bits) + factors + ids: far below the 1,536 bytes of an f32 vector.
    assert size / rows < 300, size / rows

    conn.execute("SET enable_seqscan = off")
    conn.execute("SET strata.probes = 100000")  # every list: the candidates are the best estimates
    conn.execute("SET strata.ef_search = 10")
    conn.execute("SET strata.oversample = 40")
    assert len(queries) >= 20
    check_exact(conn, queries[:10])

    conn.execute("UPDATE items SET note = 'hot' WHERE id % 7 = 0")  # same vector, HOT chains
    conn.execute("UPDATE items SET embedding = %s WHERE id %% 11 = 1", (base[12000],))  # new vectors
    conn.execute("DELETE FROM items WHERE id % 5 = 0")
    check_exact(conn, queries[10:15])  # dead and superseded versions are skipped by the snapshot
    conn.execute("VACUUM items")
    conn.execute("SELECT strata_flush('items_idx')")
    check_exact(conn, queries[15:20])
    check_exact(conn, queries[:5], where="id % 3 = 0")  # a WHERE clause widens the scan

    # A scan without LIMIT widens round after round until every live row came back, once.
    conn.execute("SET strata.max_scan_tuples = 10000000; SET hnsw.iterative_scan = relaxed_order")
    through_index = [r[0] for r in conn.execute("SELECT id FROM items ORDER BY embedding <=> %s", (queries[5],)).fetchall()]
    assert sorted(through_index) == sorted(live_rows(conn)[0].tolist())

    live = conn.execute("SELECT count(*) FROM items").fetchone()[0]
    entries = conn.execute("SELECT sum(rows - deleted) FROM strata_index_stats('items_idx')").fetchone()[0]
    assert entries == live, (entries, live)


def test_heap_rerank_computes_expression_keys_like_create_index(conn, minilm):
    base, queries = minilm
    register_vector(conn)
    conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, embedding vector(384))")
    load(conn, base, range(3000))
    conn.execute(
        "CREATE INDEX items_idx ON items USING strata ((embedding::halfvec(384)) halfvec_l2_ops) "
        "WITH (kind = 'ivf', rerank = 'heap', memtable_rows = 1000)"
    )
    load(conn, base, range(3000, 5000))
    conn.execute("SELECT strata_flush('items_idx')")
    conn.execute("SET enable_seqscan = off; SET strata.probes = 100000; SET strata.oversample = 40")
    sql = "SELECT id FROM items ORDER BY embedding::halfvec(384) <-> %s::vector::halfvec(384) LIMIT 10"
    exact_sql = (
        "SELECT id FROM (SELECT id, embedding::halfvec(384) <-> %s::vector::halfvec(384) AS d FROM items) s "
        "ORDER BY d, id LIMIT 10"
    )
    for query in queries[:10]:
        got = [r[0] for r in conn.execute(sql, (query,)).fetchall()]
        conn.execute("SET enable_seqscan = on; SET enable_indexscan = off")
        want = [r[0] for r in conn.execute(exact_sql, (query,)).fetchall()]
        conn.execute("SET enable_seqscan = off; SET enable_indexscan = on")
        # halfvec distances tie more often; the sets agree up to the last place.
        assert len(set(got[:9]) & set(want)) >= 9, (got, want)


def test_hnsw_merges_extend_the_largest_graph_and_keep_recall(conn, minilm):
    """HNSW merges insert the smaller inputs into the largest input's graph; recall against
    brute force over the table must stay at the bar of a fresh build."""
    base, queries = minilm
    register_vector(conn)
    conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, embedding vector(384), note text)")
    load(conn, base, range(3000))
    conn.execute("CREATE INDEX items_idx ON items USING strata (embedding vector_cosine_ops) WITH (kind = 'hnsw', memtable_rows = 1000)")
    load(conn, base, range(3000, 12000))
    conn.execute("SELECT strata_flush('items_idx')")
    left = conn.execute("SELECT strata_wait_for_merges('items_idx', 120)").fetchone()[0]
    count, rows, _ = segments(conn)
    assert left == count and count < 10 and rows == 12000, (left, count, rows)
    conn.execute("SET enable_seqscan = off")
    ids, vectors = live_rows(conn)
    hits = 0
    for query in queries:
        got = {r[0] for r in conn.execute("SELECT id FROM items ORDER BY embedding <=> %s LIMIT 10", (query,)).fetchall()}
        order = np.argsort(1 - (vectors @ query) / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(query)), kind="stable")[:10]
        hits += len(got & set(ids[order].tolist()))
    recall = hits / (10 * len(queries))
    # Tolerance: the bar of the default settings on real embeddings (0.95).
    assert recall >= 0.95, recall
