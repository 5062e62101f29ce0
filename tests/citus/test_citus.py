"""pg_strata on a Citus cluster (a coordinator and workers, `cargo xtask citus start`): tables
distributed over SHARDS shards by `id`, each checked against one node holding the same rows (a
plain table on the coordinator) or against brute force:

  flat       kind = 'flat' distributed top-10 == brute-force top-10 (distances within 1e-6)
  hnsw       recall@10 of the distributed index >= the one-node index's at the same settings
             (minus RECALL_TOLERANCE), and a 1 % filter returns the full LIMIT
  settings   strata.* reaches the workers inside a transaction with SET LOCAL and
             citus.propagate_set_commands = 'local'; a session SET does not
  bm25       strata_bm25_query: every row's score and the top-10 equal one node's; the statistics
             summed over the shards equal one node's
  hybrid     strata_hybrid_keys on the distributed table == on the one-node table
  admin      strata_index_stats / strata_flush / strata_wait_for_merges act on every shard's index;
             strata_index_groups sums and strata_index_recovery lists what each shard's own reports
  move       citus_move_shard_placement (block_writes, then logical): index == heap on every shard,
             the moved shard searches at once (flat top-10 == brute force again)
  columnar   Citus's columnar storage as built by `cargo xtask citus` (on PostgreSQL 16.2 through
             the in-place update definitions the build adds): rows and stripe metadata read back
             exactly as written, local and distributed
"""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from conftest import QUERIES, ROWS, SHARDS

# Recall@10 of the distributed hnsw index may fall this far below one node's (over QUERIES
# queries) before the test fails: each shard searches its quarter with the same ef_search, so it
# is normally above.
RECALL_TOLERANCE = 0.02


def vec(row: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in row) + "]"


def brute_force(base: np.ndarray, q: np.ndarray, k: int, keep: np.ndarray | None = None) -> tuple[list[int], np.ndarray]:
    """Exact cosine top-k ids (and distances) of `base` (rows normalised), optionally among `keep`."""
    dist = 1.0 - (base @ q) / (np.linalg.norm(base, axis=1) * np.linalg.norm(q))
    if keep is not None:
        dist = np.where(keep, dist, np.inf)
    order = np.argsort(dist, kind="stable")[:k]
    return [int(i) for i in order], dist[order]


def load(c: psycopg.Connection, table: str, base: np.ndarray, texts: list[str]) -> None:
    with c.cursor().copy(f"COPY {table} (id, tenant, body, v) FROM STDIN") as copy:
        for i, (row, text) in enumerate(zip(base, texts)):
            copy.write_row((i, i % 100, text, vec(row)))


def make_tables(c: psycopg.Connection, base: np.ndarray, texts: list[str]) -> None:
    for t in ("citus_flat", "local_flat", "citus_hnsw", "local_hnsw"):
        c.execute(f"DROP TABLE IF EXISTS {t}")
        c.execute(f"CREATE TABLE {t} (id bigint PRIMARY KEY, tenant int, body text, v vector(384))")
    for t in ("citus_flat", "citus_hnsw"):
        c.execute(f"SELECT create_distributed_table('{t}', 'id', shard_count => {SHARDS})")
    for t in ("citus_flat", "local_flat", "citus_hnsw", "local_hnsw"):
        load(c, t, base, texts)
    for t in ("citus_flat", "local_flat"):
        c.execute(f"CREATE INDEX {t}_v ON {t} USING strata (v vector_cosine_ops) WITH (kind = 'flat')")
        c.execute(f"CREATE INDEX {t}_bm25 ON {t} USING bm25 (body) WITH (text_config = 'english')")
    for t in ("citus_hnsw", "local_hnsw"):
        c.execute(f"CREATE INDEX {t}_v ON {t} USING strata (v vector_cosine_ops, tenant) WITH (kind = 'hnsw')")
    for t in ("citus_flat", "local_flat", "citus_hnsw", "local_hnsw"):
        c.execute(f"ANALYZE {t}")


@pytest.fixture(scope="module")
def tables(coord, data):
    base, texts, _, _ = data
    make_tables(coord, base, texts)
    return data


def top_k(c: psycopg.Connection, table: str, q: np.ndarray, k: int = 10, where: str = "") -> list[tuple[int, float]]:
    return [
        (r[0], r[1])
        for r in c.execute(
            f"SELECT id, v <=> %s::vector AS d FROM {table} {where} ORDER BY v <=> %s::vector LIMIT {k}",
            (vec(q), vec(q)),
        ).fetchall()
    ]


def same_neighbours(got: list[tuple[int, float]], ids: list[int], dists: np.ndarray) -> bool:
    """`got` is the exact top-k: its distances match the oracle's within 1e-6, and its ids are
    the oracle's apart from ties within 1e-6."""
    if len(got) != len(ids):
        return False
    if any(abs(d - float(e)) > 1e-6 for (_, d), e in zip(got, dists)):
        return False
    cut = float(dists[-1]) - 1e-6
    sure = {i for i, d in zip(ids, dists) if d < cut}
    return sure <= {i for i, _ in got}


def test_flat_top_k_equals_brute_force(tables, coord):
    base, _, queries, _ = tables
    plan = "\n".join(r[0] for r in coord.execute(
        f"EXPLAIN (COSTS OFF) SELECT id FROM citus_flat ORDER BY v <=> '{vec(queries[0])}' LIMIT 10").fetchall())
    assert "Custom Scan (Citus Adaptive)" in plan and f"Task Count: {SHARDS}" in plan, plan
    for q in queries:
        ids, dists = brute_force(base, q, 10)
        got = top_k(coord, "citus_flat", q)
        assert same_neighbours(got, ids, dists), (got, ids, dists)


def recall(c: psycopg.Connection, table: str, base: np.ndarray, queries: np.ndarray) -> float:
    hits = 0
    for q in queries:
        ids, _ = brute_force(base, q, 10)
        hits += len(set(ids) & {i for i, _ in top_k(c, table, q)})
    return hits / (10 * len(queries))


def test_hnsw_recall_not_below_one_node(tables, coord):
    base, _, queries, _ = tables
    distributed = recall(coord, "citus_hnsw", base, queries)
    one_node = recall(coord, "local_hnsw", base, queries)
    print(f"hnsw recall@10: distributed {distributed:.3f}, one node {one_node:.3f}")
    assert distributed >= one_node - RECALL_TOLERANCE, (distributed, one_node)


def test_filtered_query_returns_full_limit(tables, coord):
    base, _, queries, _ = tables
    keep = (np.arange(len(base)) % 100) == 7
    for q in queries[:5]:
        got = top_k(coord, "citus_hnsw", q, 10, "WHERE tenant = 7")
        assert len(got) == 10, got
        assert all(i % 100 == 7 for i, _ in got)
        # The same filter through the exact index: the exact filtered top-10.
        exact = top_k(coord, "citus_flat", q, 10, "WHERE tenant = 7")
        ids, dists = brute_force(base, q, 10, keep)
        assert same_neighbours(exact, ids, dists), (exact, ids)


def worker_settings(c: psycopg.Connection, name: str) -> set[str]:
    """The values of setting `name` in the shard queries of a multi-shard query (evaluated on the
    workers: the expression references the distributed table's rows)."""
    rows = c.execute(
        f"SELECT DISTINCT current_setting(%s) || (id * 0)::text FROM citus_flat", (name,)
    ).fetchall()
    return {r[0][:-1] for r in rows}


def test_settings_reach_workers(tables, coord):
    coord.execute("RESET citus.propagate_set_commands")
    default = worker_settings(coord, "strata.ef_search")
    coord.execute("SET strata.ef_search = 321")
    try:
        # A session SET stays on the coordinator.
        assert worker_settings(coord, "strata.ef_search") == default
        with coord.transaction():
            coord.execute("SET LOCAL citus.propagate_set_commands = 'local'")
            coord.execute("SET LOCAL strata.ef_search = 123")
            coord.execute("SET LOCAL hnsw.ef_search = 77")
            assert worker_settings(coord, "strata.ef_search") == {"123"}
            assert worker_settings(coord, "hnsw.ef_search") == {"77"}
    finally:
        coord.execute("RESET strata.ef_search")


def bm25_top(c: psycopg.Connection, table: str, query: str, k: int = 10) -> list[tuple[int, float]]:
    return [(r[0], r[1]) for r in c.execute(
        f"SELECT id, body <@> %s::bm25query AS s FROM {table} ORDER BY body <@> %s::bm25query, id LIMIT {k}",
        (query, query)).fetchall()]


def test_bm25_scores_equal_one_node(tables, coord):
    _, _, _, query_texts = tables
    agree = 0
    for text in query_texts:
        one = coord.execute("SELECT strata_bm25_stats('local_flat_bm25', %s)", (text,)).fetchone()[0]
        summed = coord.execute("SELECT strata_bm25_stats('citus_flat_bm25', %s)", (text,)).fetchone()[0]
        assert summed == one, (summed, one)
        local_q = coord.execute("SELECT strata_bm25_query('local_flat_bm25', %s)::text", (text,)).fetchone()[0]
        dist_q = coord.execute("SELECT strata_bm25_query('citus_flat_bm25', %s)::text", (text,)).fetchone()[0]
        local = bm25_top(coord, "local_flat", local_q)
        distributed = bm25_top(coord, "citus_flat", dist_q)
        assert len(distributed) == len(local)
        for (_, a), (_, b) in zip(local, distributed):
            assert abs(a - b) <= 1e-9 * max(1.0, abs(a)), (local, distributed)
        # Ids agree except among rows tied at the last score.
        last = local[-1][1] if local else 0
        assert {i for i, s in local if s < last - 1e-9} <= {i for i, _ in distributed}
        agree += len({i for i, _ in local} & {i for i, _ in distributed})
        # Scoring rows outside an index scan with the carried statistics: the same scores.
        row = local[0][0] if local else 0
        a = coord.execute("SELECT body <@> %s::bm25query FROM local_flat WHERE id = %s", (local_q, row)).fetchone()
        b = coord.execute("SELECT body <@> %s::bm25query FROM citus_flat WHERE id = %s", (dist_q, row)).fetchone()
        assert a == b
        # The plain form (per-shard statistics) runs on a distributed table too: Citus computes
        # the ORDER BY expression again in each shard's target list.
        plain = coord.execute(
            "SELECT id, body <@> %s AS s FROM citus_flat ORDER BY body <@> %s LIMIT 10", (text, text)).fetchall()
        assert len(plain) == len(local)
    print(f"bm25 top-10 agreement with one node: {agree / (10 * len(query_texts)):.3f}")


def test_hybrid_keys_equal_one_node(tables, coord):
    _, _, queries, query_texts = tables
    sql = "SELECT key, score, text_rank, vector_rank FROM strata_hybrid_keys(%s, 'id', 'body', 'v', %s, %s::vector, k => 10)"
    for q, text in zip(queries[:8], query_texts[:8]):
        local = coord.execute(sql, ("local_flat", text, vec(q))).fetchall()
        distributed = coord.execute(sql, ("citus_flat", text, vec(q))).fetchall()
        assert len(distributed) == 10
        assert [r[1] for r in distributed] == pytest.approx([r[1] for r in local], abs=1e-12)
        assert [r[0] for r in distributed] == [r[0] for r in local], (local, distributed)
    # strata_hybrid (ctids) refuses a distributed table clearly.
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="strata_hybrid_keys"):
        coord.execute("SELECT * FROM strata_hybrid('citus_flat', 'body', 'v', 'x', %s::vector)", (vec(queries[0]),))


def test_admin_functions_cover_every_shard(tables, coord):
    rows = coord.execute("SELECT sum(rows - deleted) FROM strata_index_stats('citus_flat_v')").fetchone()[0]
    assert rows == ROWS
    segments = coord.execute("SELECT strata_flush('citus_flat_v')").fetchone()[0]
    assert segments >= SHARDS
    assert coord.execute("SELECT strata_wait_for_merges('citus_flat_v')").fetchone()[0] >= SHARDS
    parts = coord.execute("SELECT part, sum(rows - deleted) FROM strata_index_stats('citus_flat_v') GROUP BY 1").fetchall()
    assert dict(parts).get("segment") == ROWS, parts
    bm25 = coord.execute("SELECT sum(rows - deleted) FROM strata_index_stats('citus_flat_bm25')").fetchone()[0]
    assert bm25 == ROWS
    # strata_index_groups sums, strata_index_recovery lists, what every shard's own index reports
    # on its worker (the coordinator's index is a shell without groups or a recovery of its own).
    own_groups, own_recoveries = [0, 0], []
    for shard_index, host, port in shard_indexes(coord, "citus_flat", "citus_flat_v"):
        with psycopg.connect(f"host={host} port={port} user=postgres dbname=postgres", autocommit=True) as w:
            groups = w.execute("SELECT open, settled FROM strata_index_groups(%s)", (shard_index,)).fetchone()
            own_groups = [own_groups[0] + groups[0], own_groups[1] + groups[1]]
            own_recoveries += w.execute(
                "SELECT listed_memtables, rebuilt_memtables FROM strata_index_recovery(%s)", (shard_index,)).fetchall()
    assert own_groups[1] >= SHARDS, own_groups
    assert list(coord.execute("SELECT open, settled FROM strata_index_groups('citus_flat_v')").fetchone()) == own_groups
    recoveries = coord.execute("SELECT listed_memtables, rebuilt_memtables FROM strata_index_recovery('citus_flat_v')").fetchall()
    assert len(recoveries) == SHARDS and sorted(recoveries) == sorted(own_recoveries), (recoveries, own_recoveries)


def shard_indexes(coord: psycopg.Connection, table: str, index: str) -> list[tuple[str, str, int]]:
    """Every shard placement's copy of `index` (of distributed `table`): its name and node,
    read from Citus's own catalogs."""
    return coord.execute(
        "SELECT shard_name(%s::regclass, s.shardid), p.nodename, p.nodeport "
        "FROM pg_dist_shard s JOIN pg_dist_shard_placement p USING (shardid) "
        "WHERE s.logicalrelid = %s::regclass ORDER BY s.shardid", (index, table)).fetchall()


def shard_index_vs_heap(coord: psycopg.Connection, table: str, probe: np.ndarray) -> list[dict]:
    """For every shard placement of `table`: a scan without LIMIT through the shard's index
    against the shard's heap."""
    placements = coord.execute(
        "SELECT s.shardid, shard_name(%s::regclass, s.shardid), p.nodename, p.nodeport "
        "FROM pg_dist_shard s JOIN pg_dist_shard_placement p USING (shardid) "
        "WHERE s.logicalrelid = %s::regclass ORDER BY s.shardid", (table, table)).fetchall()
    out = []
    for shardid, shard, host, port in placements:
        with psycopg.connect(f"host={host} port={port} user=postgres dbname=postgres", autocommit=True) as w:
            for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
                w.execute(f"SET {setting} = off")
            w.execute("SET strata.max_scan_tuples = 2147483647")
            sql = f"SELECT id FROM {shard} ORDER BY v <=> %s::vector"
            plan = "\n".join(r[0] for r in w.execute("EXPLAIN (COSTS OFF) " + sql, (vec(probe),)).fetchall())
            assert "Index Scan using" in plan, plan
            through_index = [r[0] for r in w.execute(sql, (vec(probe),)).fetchall()]
            heap = {r[0] for r in w.execute(f"SELECT id FROM {shard}").fetchall()}
        out.append({"shard": shardid, "port": port, "heap": len(heap), "index": len(through_index),
                    "ok": sorted(through_index) == sorted(heap)})
    return out


@pytest.mark.parametrize("mode", ["block_writes", "force_logical"])
def test_shard_move_keeps_index_equal_to_heap(tables, coord, mode):
    base, _, queries, _ = tables
    shardid, port = coord.execute(
        "SELECT s.shardid, p.nodeport FROM pg_dist_shard s JOIN pg_dist_shard_placement p USING (shardid) "
        "WHERE s.logicalrelid = 'citus_flat'::regclass ORDER BY s.shardid LIMIT 1").fetchone()
    target = coord.execute(
        "SELECT nodeport FROM pg_dist_node WHERE noderole = 'primary' AND groupid <> 0 AND nodeport <> %s "
        "ORDER BY nodeport LIMIT 1", (port,)).fetchone()[0]
    coord.execute(
        "SELECT citus_move_shard_placement(%s, 'localhost', %s, 'localhost', %s, shard_transfer_mode => %s)",
        (shardid, port, target, mode))
    # The moved shard searches at once: the distributed exact top-10 is still brute force's.
    for q in queries[:5]:
        ids, dists = brute_force(base, q, 10)
        assert same_neighbours(top_k(coord, "citus_flat", q), ids, dists)
    checks = shard_index_vs_heap(coord, "citus_flat", queries[0])
    assert all(c["ok"] for c in checks), checks
    assert sum(c["heap"] for c in checks) == ROWS


SMALL = 5000


def small_pair(coord, base, texts, name: str, index_sql: str, distribute: str) -> None:
    """`citus_{name}` (distributed by `distribute`) and `local_{name}` holding the first SMALL rows,
    each with the index `index_sql` (a format string taking the table name)."""
    for t in (f"citus_{name}", f"local_{name}"):
        coord.execute(f"DROP TABLE IF EXISTS {t}")
        coord.execute(f"CREATE TABLE {t} (id bigint PRIMARY KEY, tenant int, body text, v vector(384))")
    coord.execute(distribute.format(table=f"citus_{name}"))
    for t in (f"citus_{name}", f"local_{name}"):
        load(coord, t, base[:SMALL], texts[:SMALL])
        coord.execute(index_sql.format(table=t))
        coord.execute(f"ANALYZE {t}")


def test_ivf_and_pgvector_ddl_recall_not_below_one_node(tables, coord):
    base, texts, queries, _ = tables
    coord.execute("CREATE EXTENSION IF NOT EXISTS pg_strata_pgvector")
    cases = {
        "ivf": "CREATE INDEX ON {table} USING strata (v vector_cosine_ops) WITH (kind = 'ivf', lists = 16)",
        "pgv_hnsw": "CREATE INDEX ON {table} USING hnsw (v vector_cosine_ops) WITH (m = 16, ef_construction = 64)",
        "pgv_ivfflat": "CREATE INDEX ON {table} USING ivfflat (v vector_cosine_ops) WITH (lists = 16)",
    }
    for name, sql in cases.items():
        small_pair(coord, base, texts, name, sql, f"SELECT create_distributed_table('{{table}}', 'id', shard_count => {SHARDS})")
        distributed = recall(coord, f"citus_{name}", base[:SMALL], queries)
        one_node = recall(coord, f"local_{name}", base[:SMALL], queries)
        print(f"{name} recall@10: distributed {distributed:.3f}, one node {one_node:.3f}")
        assert distributed >= one_node - RECALL_TOLERANCE, (name, distributed, one_node)
        plan = "\n".join(r[0] for r in coord.execute(
            f"EXPLAIN (COSTS OFF) SELECT id FROM citus_{name} ORDER BY v <=> '{vec(queries[0])}' LIMIT 10").fetchall())
        assert "Custom Scan (Citus Adaptive)" in plan, plan


def test_reference_table_and_colocated_join(tables, coord):
    base, texts, queries, _ = tables
    small_pair(coord, base, texts, "ref",
               "CREATE INDEX ON {table} USING strata (v vector_cosine_ops) WITH (kind = 'flat')",
               "SELECT create_reference_table('{table}')")
    for q in queries[:5]:
        ids, dists = brute_force(base[:SMALL], q, 10)
        assert same_neighbours(top_k(coord, "citus_ref", q), ids, dists)
    # Every placement of the reference table (one per node) answers through its own index.
    nodes = coord.execute(
        "SELECT count(*) FROM pg_dist_shard s JOIN pg_dist_shard_placement p USING (shardid) "
        "WHERE s.logicalrelid = 'citus_ref'::regclass").fetchone()[0]
    assert nodes >= 2
    # A co-located join: a flag table distributed like citus_flat, joined on the distribution key.
    coord.execute("DROP TABLE IF EXISTS citus_flags")
    coord.execute("CREATE TABLE citus_flags (id bigint PRIMARY KEY, flagged boolean)")
    coord.execute("SELECT create_distributed_table('citus_flags', 'id', colocate_with => 'citus_flat')")
    coord.execute(f"INSERT INTO citus_flags SELECT g, g % 10 = 3 FROM generate_series(0, {ROWS - 1}) g")
    keep = (np.arange(ROWS) % 10) == 3
    for q in queries[:5]:
        got = [(r[0], r[1]) for r in coord.execute(
            "SELECT i.id, i.v <=> %s::vector FROM citus_flat i JOIN citus_flags f ON f.id = i.id "
            "WHERE f.flagged ORDER BY i.v <=> %s::vector LIMIT 10", (vec(q), vec(q))).fetchall()]
        ids, dists = brute_force(base, q, 10, keep)
        assert same_neighbours(got, ids, dists), (got, ids)


def test_columnar_storage_reads_back_what_was_written(coord):
    # Each INSERT writes one stripe, whose metadata row is reserved first and completed by an
    # in-place update (systable_inplace_update_*: on PostgreSQL 16.2 the build's own definitions).
    batches = [(1, 10_000), (10_001, 10_500), (10_501, 10_600)]
    coord.execute("CREATE EXTENSION IF NOT EXISTS citus_columnar")
    for table in ("local_columnar", "citus_columnar"):
        coord.execute(f"DROP TABLE IF EXISTS {table}")
        coord.execute(f"CREATE TABLE {table} (id bigint, body text) USING columnar")
    coord.execute(f"SELECT create_distributed_table('citus_columnar', 'id', shard_count => {SHARDS})")
    for table in ("local_columnar", "citus_columnar"):
        for first, last in batches:
            coord.execute(f"INSERT INTO {table} SELECT g, md5(g::text) FROM generate_series({first}, {last}) g")
        count, total, digest = coord.execute(
            f"SELECT count(*), sum(id), md5(string_agg(body, ',' ORDER BY id)) FROM {table}").fetchone()
        assert (count, int(total)) == (10_600, 10_600 * 10_601 // 2), table
        expected = coord.execute(
            "SELECT md5(string_agg(md5(g::text), ',' ORDER BY g)) FROM generate_series(1, 10600) g").fetchone()[0]
        assert digest == expected, table
    stripes = coord.execute(
        "SELECT row_count, data_length > 0 FROM columnar.stripe WHERE relation = 'local_columnar'::regclass "
        "ORDER BY stripe_num").fetchall()
    assert stripes == [(last - first + 1, True) for first, last in batches]
