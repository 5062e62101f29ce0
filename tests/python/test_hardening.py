"""Hardening: bad rows never reach an index, failing flushes and merges never block other work,
injected I/O faults (ENOSPC, EIO at every write step of segments, bitmaps and the manifest) are
survived without losing a row, replaced files vanish only after a grace period, and the admin
functions check the caller's rights.

Faults come from `strata_inject_fault()`, compiled into the test build only (cargo feature
`fault-injection`). Every check compares the index with the heap: exact top-k of a flat index
against a sequential scan, and the index's live entries against the table's rows.
"""

from __future__ import annotations

import os
import pathlib
import random
import re
import sys
import threading
import time

import psycopg
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "crash"))
from cluster import service_pid  # noqa: E402 - tests/crash/cluster.py, shared with the crash harness

DIMS = 8


def vec(rng: random.Random) -> str:
    return "[" + ",".join(f"{rng.uniform(-1, 1):.5f}" for _ in range(DIMS)) + "]"


def server_log() -> pathlib.Path:
    return pathlib.Path(os.environ["STRATA_PGHOST"]) / "log"


def log_size() -> int:
    return server_log().stat().st_size


def log_since(offset: int) -> str:
    with open(server_log(), "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def index_dir(conn, index: str) -> pathlib.Path:
    db, spc, node = conn.execute(
        "SELECT d.oid, CASE WHEN c.reltablespace = 0 THEN (SELECT oid FROM pg_tablespace WHERE spcname = 'pg_default') "
        "ELSE c.reltablespace END, c.relfilenode FROM pg_class c, pg_database d "
        "WHERE c.oid = %s::regclass AND d.datname = current_database()",
        (index,),
    ).fetchone()
    return pathlib.Path(os.environ["STRATA_PGDATA"]) / "pg_strata" / f"{db}_{spc}_{node}"


def set_grace(conn, seconds: int) -> None:
    conn.execute(f"ALTER SYSTEM SET strata.file_grace_period = {seconds}")
    conn.execute("SELECT pg_reload_conf()")


def make_table(conn, name: str, rows: int, rng: random.Random, kind: str = "flat", memtable_rows: int = 200) -> None:
    conn.execute(f"CREATE TABLE {name} (id bigserial PRIMARY KEY, v vector({DIMS}))")
    conn.execute(
        f"CREATE INDEX {name}_idx ON {name} USING strata (v vector_l2_ops) WITH (kind = '{kind}', memtable_rows = {memtable_rows})"
    )
    insert(conn, name, rows, rng)


def insert(conn, name: str, rows: int, rng: random.Random) -> None:
    with conn.cursor().copy(f"COPY {name} (v) FROM STDIN") as copy:
        for _ in range(rows):
            copy.write_row((vec(rng),))


def assert_index_matches_heap(conn, name: str, rng: random.Random, queries: int = 5) -> None:
    """Flat index top-10 == sequential scan top-10; every heap row reachable through the index once."""
    conn.execute("SET enable_seqscan = off; SET enable_bitmapscan = off; SET strata.max_scan_tuples = 100000000; "
                 "SET hnsw.iterative_scan = relaxed_order")
    through_index = [r[0] for r in conn.execute(f"SELECT id FROM {name} ORDER BY v <-> %s", (vec(rng),)).fetchall()]
    for _ in range(queries):
        q = vec(rng)
        fast = [r[0] for r in conn.execute(f"SELECT id FROM {name} ORDER BY v <-> %s LIMIT 10", (q,)).fetchall()]
        conn.execute("SET enable_indexscan = off; RESET enable_seqscan")
        exact = [r[0] for r in conn.execute(f"SELECT id FROM {name} ORDER BY v <-> %s LIMIT 10", (q,)).fetchall()]
        conn.execute("RESET enable_indexscan; SET enable_seqscan = off")
        assert fast == exact
    conn.execute("RESET enable_seqscan; RESET enable_bitmapscan; RESET strata.max_scan_tuples; "
                 "RESET hnsw.iterative_scan")
    heap = sorted(r[0] for r in conn.execute(f"SELECT id FROM {name}").fetchall())
    assert sorted(through_index) == heap


def live_entries(conn, index: str) -> int:
    return conn.execute(f"SELECT coalesce(sum(rows - deleted), 0) FROM strata_index_stats('{index}')").fetchone()[0]


def wait_until(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {seconds} s waiting for {what}")


def unlisted_files(directory: pathlib.Path, conn, index: str) -> set[str]:
    """Files in the index directory that no published segment or bitmap accounts for."""
    listed = set()
    for part, seg_id in conn.execute(f"SELECT part, id FROM strata_index_stats('{index}')").fetchall():
        if part == "segment":
            listed.add(f"{seg_id}.seg")
    names = {p.name for p in directory.iterdir()}
    bitmaps = {n for n in names if re.fullmatch(r"\d+\.del\.\d+", n)}
    # Of each segment's bitmaps only the newest generation is current.
    newest = {}
    for name in bitmaps:
        seg, _, gen = name.split(".")
        if seg + ".seg" in listed and int(gen) > newest.get(seg, (0, ""))[0]:
            newest[seg] = (int(gen), name)
    listed |= {name for _, name in newest.values()}
    # The node marker says the files are this node's own (docs/status-pages.md).
    return names - listed - {"manifest", "pgsql_tmp_strata_node"}


# ---------------------------------------------------------------------------------------------
# Item 2: a non-finite vector never reaches a memtable or a segment build.


def test_aminsert_and_builds_reject_non_finite_vectors_and_name_the_index(conn):
    rng = random.Random(1)
    make_table(conn, "items", 300, rng)
    for bad in ("{1,NaN,0,0,0,0,0,0}", "{1,Infinity,0,0,0,0,0,0}", "{-Infinity,0,0,0,0,0,0,0}"):
        with pytest.raises(psycopg.errors.DataException, match='index "items_idx" cannot store a non-finite vector'):
            conn.execute("INSERT INTO items (v) VALUES (strata_unchecked_vector(%s))", (bad,))
    # The failed INSERTs left nothing behind, and the index keeps flushing.
    insert(conn, "items", 300, rng)
    conn.execute("SELECT strata_flush('items_idx')")
    assert_index_matches_heap(conn, "items", rng)
    # CREATE INDEX over a table holding a NaN row (made before the index existed) fails cleanly.
    conn.execute(f"CREATE TABLE legacy (id int, v vector({DIMS}))")
    conn.execute("INSERT INTO legacy VALUES (1, '[1,1,1,1,1,1,1,1]'), (2, strata_unchecked_vector('{1,NaN,0,0,0,0,0,0}'))")
    for kind in ("flat", "hnsw", "ivf"):
        with pytest.raises(psycopg.errors.DataException, match="NaN not allowed in vector: index"):
            conn.execute(f"CREATE INDEX legacy_idx ON legacy USING strata (v vector_l2_ops) WITH (kind = '{kind}')")


# ---------------------------------------------------------------------------------------------
# Item 3: a failing flush never blocks another memtable or index; one log line per episode.


def test_a_failing_flush_backs_off_while_other_indexes_flush_and_recovers_once_the_fault_clears(conn):
    rng = random.Random(2)
    make_table(conn, "stuck", 500, rng)
    make_table(conn, "healthy", 500, rng)
    conn.execute("SELECT strata_flush('stuck_idx'), strata_flush('healthy_idx')")
    log_start = log_size()
    conn.execute("SELECT strata_inject_fault('fsync', 'segment', 'ENOSPC', -1, 'stuck_idx'::regclass)")
    insert(conn, "stuck", 700, rng)
    insert(conn, "healthy", 700, rng)
    # The healthy index flushes every memtable, however often the stuck one fails.
    started = time.monotonic()
    conn.execute("SELECT strata_flush('healthy_idx')")
    assert time.monotonic() - started < 30
    # strata_flush of the stuck index reports the failure instead of hanging.
    with pytest.raises(psycopg.errors.DiskFull, match="cannot be flushed") as raised:
        conn.execute("SELECT strata_flush('stuck_idx')")
    assert "No space left on device" in str(raised.value.diag.message_detail)
    failing = conn.execute(
        "SELECT state, retries, last_error FROM strata_index_stats('stuck_idx') WHERE state = 'flush failing'"
    ).fetchall()
    assert failing and all(r >= 1 and "No space left on device" in e for _, r, e in failing)
    assert max(r for _, r, _ in failing) >= 3
    # Rows of the memtables that cannot flush are served exactly from shared memory.
    assert_index_matches_heap(conn, "stuck", rng)
    assert_index_matches_heap(conn, "healthy", rng)
    time.sleep(3)
    retries = conn.execute("SELECT max(retries) FROM strata_index_stats('stuck_idx')").fetchone()[0]
    assert retries < 20, f"{retries} attempts in a few seconds is a hot loop, not a backoff"
    log = log_since(log_start)
    starts = re.findall(r"flushing memtable \d+ of index \d+ .* failed", log)
    failing_memtables = len(failing)
    assert 1 <= len(starts) <= failing_memtables + 1, f"{len(starts)} log lines for {failing_memtables} failing memtables"
    assert len(log) < 20_000, f"{len(log)} bytes of log for one failure episode"
    # The fault clears: the service recovers by itself (within its backoff), nothing was lost.
    injected = conn.execute("SELECT strata_clear_fault()").fetchone()[0]
    assert injected >= 3
    wait_until(
        lambda: conn.execute("SELECT count(*) = 0 FROM strata_index_stats('stuck_idx') WHERE retries > 0").fetchone()[0],
        60,
        "the stuck memtables to flush after the fault cleared",
    )
    conn.execute("SELECT strata_flush('stuck_idx')")
    assert_index_matches_heap(conn, "stuck", rng)
    assert live_entries(conn, "stuck_idx") == 1200
    assert re.search(r"flushing memtable \d+ of index \d+ .* succeeded after \d+ failed attempts", log_since(log_start))


# ---------------------------------------------------------------------------------------------
# Item 4: ENOSPC and EIO at every write step of every kind of file.

STEPS = ["create", "write", "fsync", "rename", "fsync_dir"]


@pytest.mark.parametrize("step", STEPS)
def test_injected_faults_at_every_step_of_segment_bitmap_and_manifest_writes_lose_nothing(conn, step):
    rng = random.Random(hash(step) & 0xFFFF)
    set_grace(conn, 1)
    try:
        make_table(conn, "items", 400, rng)
        conn.execute("SELECT strata_flush('items_idx')")
        directory = index_dir(conn, "items_idx")
        for error in ("ENOSPC", "EIO"):
            # Segments and the manifest: flushes fail twice, then succeed on their own. (A failed
            # directory fsync after the manifest's rename PANICs instead, as PostgreSQL does for
            # its own files: tests/python/test_shutdown.py.)
            for kind in ("segment", "manifest") if step != "fsync_dir" else ("segment",):
                conn.execute("SELECT strata_inject_fault(%s, %s, %s, 2, 'items_idx'::regclass)", (step, kind, error))
                insert(conn, "items", 250, rng)
                assert_index_matches_heap(conn, "items", rng, queries=2)
                # Two attempts fail, the service backs off and the third succeeds: strata_flush
                # (which reports a failure only from the third failed attempt on) just waits.
                conn.execute("SELECT strata_flush('items_idx')")
                injected = conn.execute("SELECT strata_clear_fault()").fetchone()[0]
                assert injected == 2, f"{kind}/{step}/{error}: {injected} faults injected"
                assert_index_matches_heap(conn, "items", rng, queries=2)
            # Deletion bitmaps: VACUUM fails with the error (the heap keeps its dead rows), and
            # succeeds once the fault clears.
            deleted = conn.execute("DELETE FROM items WHERE id % 7 = 0 RETURNING id").rowcount
            assert deleted > 0
            conn.execute("SELECT strata_inject_fault(%s, 'bitmap', %s, -1, 'items_idx'::regclass)", (step, error))
            sqlstate = "53100" if error == "ENOSPC" else "58030"
            with pytest.raises(psycopg.Error) as raised:
                conn.execute("VACUUM items")
            assert raised.value.sqlstate == sqlstate, raised.value
            conn.execute("SELECT strata_clear_fault()")
            assert_index_matches_heap(conn, "items", rng, queries=2)
            conn.execute("VACUUM items")
            rows = conn.execute("SELECT count(*) FROM items").fetchone()[0]
            assert live_entries(conn, "items_idx") == rows
            assert_index_matches_heap(conn, "items", rng, queries=2)
        # Files left behind by failed writes go once the grace period is over.
        wait_until(lambda: not unlisted_files(directory, conn, "items_idx"), 30, "garbage files to be removed")
    finally:
        conn.execute("SELECT strata_clear_fault()")
        conn.execute("ALTER SYSTEM RESET strata.file_grace_period")
        conn.execute("SELECT pg_reload_conf()")


def test_a_failing_merge_backs_off_shows_in_stats_and_completes_after_the_fault(conn):
    rng = random.Random(4)
    make_table(conn, "items", 0, rng, memtable_rows=64)
    conn.execute("SELECT strata_inject_fault('create', 'segment', 'EIO', -1, 'items_idx'::regclass)")
    # Flushes fail too while the fault lasts; rows stay in memtables and searchable.
    for _ in range(8):
        insert(conn, "items", 64, rng)
    wait_until(
        lambda: conn.execute("SELECT count(*) > 0 FROM strata_index_stats('items_idx') WHERE retries > 0").fetchone()[0],
        30,
        "a failing flush to show",
    )
    assert_index_matches_heap(conn, "items", rng, queries=2)
    conn.execute("SELECT strata_clear_fault()")
    conn.execute("SELECT strata_flush('items_idx')")
    segments = conn.execute("SELECT count(*) FROM strata_index_stats('items_idx') WHERE part = 'segment'").fetchone()[0]
    assert segments >= 4
    # Now merges: every merged segment write fails.
    conn.execute("SELECT strata_inject_fault('create', 'segment', 'EIO', -1, 'items_idx'::regclass)")
    wait_until(
        lambda: conn.execute("SELECT retries FROM strata_index_stats('items_idx') WHERE part = 'merges'").fetchone(),
        60,
        "the failing merge to show in strata_index_stats",
    )
    with pytest.raises(psycopg.errors.IoError, match="merging segments fails"):
        conn.execute("SELECT strata_wait_for_merges('items_idx', 120)")
    assert_index_matches_heap(conn, "items", rng, queries=2)
    conn.execute("SELECT strata_clear_fault()")
    conn.execute("SELECT strata_wait_for_merges('items_idx', 120)")
    assert conn.execute("SELECT count(*) FROM strata_index_stats('items_idx') WHERE part = 'merges'").fetchone()[0] == 0
    assert_index_matches_heap(conn, "items", rng)
    assert live_entries(conn, "items_idx") == 512


# ---------------------------------------------------------------------------------------------
# Item 7: replaced files stay for the grace period; orphans are swept.


def test_vacuum_keeps_the_replaced_bitmap_for_the_grace_period_then_it_goes(conn):
    rng = random.Random(5)
    set_grace(conn, 4)
    try:
        make_table(conn, "items", 600, rng)
        conn.execute("SELECT strata_flush('items_idx')")
        directory = index_dir(conn, "items_idx")
        conn.execute("DELETE FROM items WHERE id % 5 = 0")
        conn.execute("VACUUM items")
        conn.execute("DELETE FROM items WHERE id % 5 = 1")
        conn.execute("VACUUM items")
        bitmaps = sorted(p.name for p in directory.iterdir() if ".del." in p.name)
        # A scan that loaded the previous manifest may still open generation 1.
        assert any(name.endswith(".del.1") for name in bitmaps), bitmaps
        assert any(name.endswith(".del.2") for name in bitmaps), bitmaps
        wait_until(lambda: not unlisted_files(directory, conn, "items_idx"), 30, "the replaced bitmap to go")
        assert_index_matches_heap(conn, "items", rng)
    finally:
        conn.execute("ALTER SYSTEM RESET strata.file_grace_period")
        conn.execute("SELECT pg_reload_conf()")


def test_queries_never_see_a_file_vanish_while_vacuum_and_merges_replace_files(conn):
    rng = random.Random(6)
    set_grace(conn, 2)
    try:
        make_table(conn, "items", 3000, rng, memtable_rows=300)
        conn.execute("SELECT strata_flush('items_idx')")
        errors: list[str] = []
        stop = threading.Event()

        def searcher(seed: int) -> None:
            r = random.Random(seed)
            while not stop.is_set():
                # A new backend per query: each loads the manifest afresh.
                try:
                    with psycopg.connect(conn.info.dsn, autocommit=True) as c:
                        for _ in range(5):
                            c.execute("SELECT id FROM items ORDER BY v <-> %s LIMIT 5", (vec(r),)).fetchall()
                except psycopg.Error as e:
                    errors.append(str(e))

        threads = [threading.Thread(target=searcher, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            conn.execute("DELETE FROM items WHERE id IN (SELECT id FROM items ORDER BY random() LIMIT 50)")
            conn.execute("VACUUM items")
            insert(conn, "items", 100, rng)
        stop.set()
        for t in threads:
            t.join()
        assert not errors, errors[:3]
        conn.execute("SELECT strata_flush('items_idx')")
        # INDEX_CLEANUP ON: no index-vacuum bypass (a few dead pages) can leave entries counted.
        conn.execute("VACUUM (INDEX_CLEANUP ON) items")
        assert live_entries(conn, "items_idx") == conn.execute("SELECT count(*) FROM items").fetchone()[0]
    finally:
        conn.execute("ALTER SYSTEM RESET strata.file_grace_period")
        conn.execute("SELECT pg_reload_conf()")


# ---------------------------------------------------------------------------------------------
# Item 8: the admin surface checks the caller's rights on the index's table.


def test_admin_functions_check_ownership_and_select_rights(conn):
    rng = random.Random(8)
    make_table(conn, "items", 100, rng)
    suffix = conn.info.dbname[-8:]
    owner, reader, stranger = f"owner_{suffix}", f"reader_{suffix}", f"stranger_{suffix}"
    try:
        for role in (owner, reader, stranger):
            conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"CREATE TABLE owned (id int, v vector({DIMS}))")
        conn.execute("CREATE INDEX owned_idx ON owned USING strata (v vector_l2_ops) WITH (kind = 'flat')")
        conn.execute(f"ALTER TABLE owned OWNER TO {owner}")
        conn.execute(f"GRANT SELECT ON items, owned TO {reader}")
        host, port = os.environ["STRATA_PGHOST"], os.environ["STRATA_PGPORT"]

        def as_role(role: str, sql: str):
            with psycopg.connect(f"host={host} port={port} user={role} dbname={conn.info.dbname}", autocommit=True) as c:
                return c.execute(sql).fetchall()

        maintenance = [
            "SELECT strata_flush('{i}')",
            "SELECT strata_wait_for_merges('{i}', 5)",
            "SELECT * FROM strata_index_recovery('{i}')",
            "SELECT strata_flush_by_oid('{i}'::regclass)",
        ]
        for sql in maintenance:
            as_role(owner, sql.format(i="owned_idx"))
            for role in (reader, stranger):
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match="must be owner of table owned"):
                    as_role(role, sql.format(i="owned_idx"))
        # Statistics need SELECT on the table.
        assert as_role(reader, "SELECT count(*) FROM strata_index_stats('items_idx')")[0][0] >= 1
        as_role(owner, "SELECT count(*) FROM strata_index_stats('owned_idx')")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied for table items"):
            as_role(stranger, "SELECT * FROM strata_index_stats('items_idx')")
        # Test-only fault injection is for superusers.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            as_role(owner, "SELECT strata_inject_fault('fsync')")
    finally:
        conn.execute("DROP TABLE IF EXISTS owned")
        for role in (owner, reader, stranger):
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE IF EXISTS {role}")


def test_admin_functions_work_and_cannot_be_hijacked_with_the_extension_outside_the_search_path(conn):
    """With the extension in its own schema, off the search_path, the admin functions still work;
    a function of the same name that another role creates in a schema earlier on the search path
    is never called by them (they call their `_by_oid` functions qualified by the extension's
    schema)."""
    suffix = conn.info.dbname[-8:]
    intruder = f"intruder_{suffix}"
    conn.execute("DROP EXTENSION pg_strata")
    conn.execute("CREATE SCHEMA ext")
    conn.execute("CREATE EXTENSION pg_strata SCHEMA ext")
    try:
        conn.execute(f"CREATE ROLE {intruder} LOGIN")
        conn.execute(f"GRANT CREATE ON SCHEMA public TO {intruder}")
        conn.execute(f"CREATE TABLE items (id int, v ext.vector({DIMS}))")
        conn.execute("CREATE INDEX items_idx ON items USING strata (v ext.vector_l2_ops) WITH (kind = 'flat')")
        conn.execute(f"INSERT INTO items SELECT i, ext.l2_normalize(array_fill(i::real, ARRAY[{DIMS}])::ext.vector) "
                     "FROM generate_series(1, 50) i")
        conn.execute("SET search_path = public")
        host, port = os.environ["STRATA_PGHOST"], os.environ["STRATA_PGPORT"]
        with psycopg.connect(f"host={host} port={port} user={intruder} dbname={conn.info.dbname}",
                             autocommit=True) as c:
            for name, args in [("strata_flush_by_oid", "oid"), ("strata_index_stats_by_oid", "oid"),
                               ("strata_wait_for_merges_by_oid", "oid, float8")]:
                c.execute(f"CREATE FUNCTION public.{name}({args}) RETURNS bigint LANGUAGE sql "
                          "AS $$ SELECT -1::bigint $$")
        assert conn.execute("SELECT ext.strata_flush('items_idx')").fetchone()[0] >= 0
        assert conn.execute("SELECT ext.strata_wait_for_merges('items_idx', 5)").fetchone()[0] >= 1
        rows = conn.execute("SELECT sum(rows) FROM ext.strata_index_stats('items_idx')").fetchone()[0]
        assert rows == 50
        assert conn.execute("SELECT count(*) FROM ext.strata_index_groups('items_idx')").fetchone()[0] == 1
        conn.execute("SELECT * FROM ext.strata_index_recovery('items_idx')")
    finally:
        conn.execute("RESET search_path")
        conn.execute("DROP TABLE IF EXISTS items")
        conn.execute(f"DROP OWNED BY {intruder}")
        conn.execute(f"DROP ROLE IF EXISTS {intruder}")


def test_partitioned_indexes_unknown_oids_and_text_vector_columns_get_clear_errors(conn):
    """A partitioned table's index holds no entries of its own: the admin functions and a bm25
    ranking bound to it say so (42809) instead of reporting a corrupt index; an unknown OID is
    42704; strata_hybrid on a text "vector" column is 42804, not an endless recursion."""
    conn.execute(f"CREATE TABLE parted (id int, grp int, body text, v vector({DIMS})) PARTITION BY LIST (grp)")
    conn.execute("CREATE TABLE parted_1 PARTITION OF parted FOR VALUES IN (1)")
    conn.execute("CREATE TABLE parted_2 PARTITION OF parted FOR VALUES IN (2)")
    conn.execute(f"INSERT INTO parted SELECT i, 1 + i % 2, 'doc ' || i || CASE WHEN i % 5 = 0 THEN ' replication' "
                 f"ELSE '' END, array_fill(i::real, ARRAY[{DIMS}])::vector FROM generate_series(1, 200) i")
    conn.execute("CREATE INDEX parted_v ON parted USING strata (v vector_l2_ops)")
    conn.execute("CREATE INDEX parted_b ON parted USING bm25 (body)")
    for sql in ["SELECT * FROM strata_index_stats('parted_v')", "SELECT strata_flush('parted_v')",
                "SELECT * FROM strata_index_groups('parted_v')", "SELECT * FROM strata_index_stats('parted_b')"]:
        with pytest.raises(psycopg.errors.WrongObjectType, match="is a partitioned index"):
            conn.execute(sql)
    # Each partition's own index works.
    assert conn.execute("SELECT sum(rows) FROM strata_index_stats('parted_1_v_idx')").fetchone()[0] == 100
    with pytest.raises(psycopg.errors.WrongObjectType, match="is a partitioned index"):
        conn.execute("SELECT id FROM parted ORDER BY body <@> 'replication' LIMIT 3")
    with pytest.raises(psycopg.errors.UndefinedObject, match="no relation with OID 0"):
        conn.execute("SELECT * FROM strata_index_stats_by_oid(0)")
    with pytest.raises(psycopg.errors.WrongObjectType, match="not a strata index"):
        conn.execute("SELECT * FROM strata_index_stats('parted_1')")
    conn.execute("CREATE TABLE hy (id int, body text, v vector(2))")
    conn.execute("INSERT INTO hy VALUES (1, 'hello world', '[1,1]')")
    conn.execute("CREATE INDEX ON hy USING bm25 (body)")
    conn.execute("CREATE INDEX ON hy USING strata (v)")
    with pytest.raises(psycopg.errors.DatatypeMismatch, match="is not a vector column"):
        conn.execute("SELECT count(*) FROM strata_hybrid('hy', 'body', 'body', 'hello', '[1,1]')")


def test_two_bm25_indexes_on_one_column_each_query_scans_the_index_it_names(conn):
    """With an english and a simple bm25 index on one column, a query naming either index scans
    that index (the other's cost is prohibitive for it), and the implicit form scans the index it
    is bound to; none fails with "names another index"."""
    conn.execute("CREATE TABLE d2 (id int, body text)")
    conn.execute("INSERT INTO d2 SELECT i, 'doc number ' || i || CASE WHEN i % 10 = 0 THEN ' the replication' "
                 "ELSE ' other' END FROM generate_series(1, 5000) i")
    conn.execute("CREATE INDEX d2_en ON d2 USING bm25 (body) WITH (text_config = 'english')")
    conn.execute("CREATE INDEX d2_simple ON d2 USING bm25 (body) WITH (text_config = 'simple')")
    conn.execute("ANALYZE d2")
    conn.execute("SET enable_seqscan = off")
    for index in ("d2_en", "d2_simple"):
        sql = f"SELECT id FROM d2 ORDER BY body <@> to_bm25query('replication', '{index}') LIMIT 3"
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN (COSTS OFF) " + sql).fetchall())
        assert f"Index Scan using {index} " in plan, plan
        assert len(conn.execute(sql).fetchall()) == 3
    rows = conn.execute("SELECT id FROM d2 ORDER BY body <@> 'replication' LIMIT 3").fetchall()
    assert len(rows) == 3 and all(r[0] % 10 == 0 for r in rows)
    # A generic plan keeps `to_bm25query($1)` (one argument) as a call: costing its index paths
    # reads no second argument of it (it read one past the list before the review that found it).
    conn.execute("SET plan_cache_mode = force_generic_plan")
    conn.execute("PREPARE ranked(text) AS SELECT id FROM d2 ORDER BY body <@> to_bm25query($1) LIMIT 3")
    plan = "\n".join(r[0] for r in conn.execute("EXPLAIN (COSTS OFF) EXECUTE ranked('replication')").fetchall())
    assert "Index Scan using d2_" in plan, plan
    conn.execute("DEALLOCATE ranked")
    conn.execute("RESET plan_cache_mode")
    conn.execute("RESET enable_seqscan")


# ---------------------------------------------------------------------------------------------
# Item 9: settings take effect; bad arguments are refused.


def thread_names(pid: int) -> list[str]:
    """The names of a process's threads; a thread that exits while they are listed is left out."""
    names = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            names.append(pathlib.Path(f"/proc/{pid}/task/{task}/comm").read_text().strip())
        except FileNotFoundError:
            pass
    return names


def test_search_threads_changes_take_effect_and_non_finite_timeouts_are_refused(conn):
    rng = random.Random(9)
    # Three flushed memtables: three segments of one tier, fewer than a merge takes, so every
    # query fans out over the search pool.
    make_table(conn, "items", 900, rng, memtable_rows=300)
    conn.execute("SELECT strata_flush('items_idx')")
    assert conn.execute("SELECT count(*) FROM strata_index_stats('items_idx') WHERE part = 'segment'").fetchone()[0] == 3
    q = vec(rng)
    conn.execute("SET enable_seqscan = off")
    results = []
    for threads in (1, 2, 3, 1, 4):
        conn.execute(f"SET strata.search_threads = {threads}")
        results.append([r[0] for r in conn.execute("SELECT id FROM items ORDER BY v <-> %s LIMIT 10", (q,)).fetchall()])
        if threads > 1:
            pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            # A pool thread names itself when it first runs, which on a loaded machine may come
            # after the query that created the pool has returned.
            deadline = time.monotonic() + 5
            while True:
                names = thread_names(pid)
                if sum(name.startswith("strata-search") for name in names) >= threads or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert sum(name.startswith("strata-search") for name in names) >= threads, names
    assert all(r == results[0] for r in results)
    for bad in ("'NaN'", "'Infinity'", "-1"):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="timeout_seconds must be a finite number"):
            conn.execute(f"SELECT strata_wait_for_merges('items_idx', {bad})")


# ---------------------------------------------------------------------------------------------
# Item 3: when memtable memory runs out because an index cannot flush, writers are told which.


def test_writers_out_of_memtable_memory_get_an_error_naming_the_stuck_index_and_recover(conn):
    rng = random.Random(10)
    make_table(conn, "stuck", 0, rng, memtable_rows=64)
    make_table(conn, "healthy", 100, rng, memtable_rows=64)
    conn.execute("SELECT strata_flush('healthy_idx')")
    conn.execute("SELECT strata_inject_fault('create', 'segment', 'ENOSPC', -1, 'stuck_idx'::regclass)")
    slabs = 0
    try:
        # Every memtable of the stuck index holds a slab it cannot give back; each batch fills one.
        with pytest.raises(psycopg.errors.InsufficientResources) as raised:
            for _ in range(64):
                insert(conn, "stuck", 64, rng)
                slabs += 1
        assert 'the memtables of index "stuck_idx"' in str(raised.value), raised.value
        assert "No space left on device" in str(raised.value)
        assert "strata.memtable_memory" in str(raised.value.diag.message_detail)
        # Another index's writers are told the same, instead of waiting forever.
        started = time.monotonic()
        with pytest.raises(psycopg.errors.InsufficientResources, match='index "stuck_idx"'):
            insert(conn, "healthy", 10, rng)
        assert time.monotonic() - started < 30
        # Every committed row of the stuck index is still served, from shared memory.
        assert_index_matches_heap(conn, "stuck", rng, queries=2)
    finally:
        conn.execute("SELECT strata_clear_fault()")
    assert slabs < 64
    conn.execute("SELECT strata_flush('stuck_idx')")
    insert(conn, "healthy", 10, rng)
    conn.execute("SELECT strata_flush('healthy_idx')")
    for name in ("stuck", "healthy"):
        conn.execute(f"VACUUM (INDEX_CLEANUP ON) {name}")
        assert_index_matches_heap(conn, name, rng, queries=2)
        assert live_entries(conn, f"{name}_idx") == conn.execute(f"SELECT count(*) FROM {name}").fetchone()[0]


def test_the_service_passes_by_an_index_whose_manifest_lock_is_busy(conn):
    """The sweeper takes each index's manifest lock only if it is free. It once built its lock guard
    even when the lock was busy, and dropping that guard released a lock the service did not hold:
    an ERROR that ended the index service (found by the crash harness, where a VACUUM or recovery
    held the lock at a sweep). Holding the lock across several sweeps must leave the service
    running, and the index usable afterwards."""
    rng = random.Random(21)
    make_table(conn, "busy", 300, rng, memtable_rows=64)
    conn.execute("SELECT strata_flush('busy_idx')")
    service = service_pid()
    assert service is not None
    start = log_size()
    # Longer than two sweep intervals (2 s each); the function itself checks the try path.
    conn.execute("SELECT strata_hold_manifest_lock('busy_idx'::regclass, 5)")
    insert(conn, "busy", 100, rng)
    conn.execute("SELECT strata_flush('busy_idx')")
    time.sleep(2.5)
    log = log_since(start)
    assert "is not held" not in log, log[-2000:]
    assert service_pid() == service, "the index service restarted"
    assert_index_matches_heap(conn, "busy", rng, queries=2)


# ---------------------------------------------------------------------------------------------
# Issue 39: a settle that fails leaves the flushed groups to the next writer.


def open_groups(conn, index: str) -> int:
    return conn.execute(f"SELECT open FROM strata_index_groups('{index}')").fetchone()[0]


def test_a_failed_settle_raises_the_flag_again_for_the_next_writer(conn):
    """`aminsert` takes the index's settle flag down before settling the groups the service
    flushed. When settling raises an error, the flag must be raised again: otherwise nothing
    settles those groups until another flush (each open group costs a standby a memtable slab).
    The injected fault (`status`) makes every settle of the index fail, the settler worker's too."""
    rng = random.Random(39)
    make_table(conn, "settle", 0, rng, memtable_rows=64)
    conn.execute("SELECT strata_inject_fault('write', 'status', 'EIO', -1, 'settle_idx'::regclass)")
    try:
        # The 65th row seals the first memtable (no later row of this statement meets the flag).
        insert(conn, "settle", 65, rng)
        wait_until(lambda: conn.execute("SELECT count(*) FROM strata_index_stats('settle_idx') "
                                        "WHERE part = 'segment'").fetchone()[0] == 1, 30, "the flush")
        # A writer that finds the flag raised settles first, and fails.
        failed = False
        for _ in range(100):
            try:
                insert(conn, "settle", 1, rng)
            except psycopg.errors.IoError as e:
                assert "settling flushed memtables failed" in str(e), e
                failed = True
                break
            time.sleep(0.1)
        assert failed, "no insert met the raised flag"
        assert open_groups(conn, "settle_idx") >= 2
    finally:
        conn.execute("SELECT strata_clear_fault()")
    # The flag is up again: the next writer (or the settler worker) settles the flushed group.
    insert(conn, "settle", 1, rng)
    wait_until(lambda: open_groups(conn, "settle_idx") == 1, 15, "the flushed group to be settled")
    assert_index_matches_heap(conn, "settle", rng, queries=2)
