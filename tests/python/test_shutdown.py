"""Bounded shutdown and cancellation: CREATE INDEX and REINDEX end soon after pg_cancel_backend, a
fast shutdown completes quickly in the middle of a big build, a merge or with memtables whose
flushes keep failing (and nothing is lost: the status pages recover unflushed memtables), and
garbage files left by a service killed during a merge's grace period go after the restart.

These tests stop and restart the shared test cluster (STRATA_PG_CTL / STRATA_RESTART, set by
`cargo xtask test`); each leaves it running.
"""

from __future__ import annotations

import os
import pathlib
import random
import signal
import subprocess
import sys
import threading
import time

import psycopg
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "crash"))
from cluster import service_pid  # noqa: E402 - tests/crash/cluster.py, shared with the crash harness
from test_hardening import (  # noqa: E402
    assert_index_matches_heap,
    index_dir,
    insert,
    live_entries,
    log_since,
    log_size,
    make_table,
    unlisted_files,
    wait_until,
)

BIG_DIMS = 128


def conninfo(dbname: str) -> str:
    return f"host={os.environ['STRATA_PGHOST']} port={os.environ['STRATA_PGPORT']} user=postgres dbname={dbname}"


def fast_stop() -> float:
    """Stops the cluster with a fast shutdown; returns the seconds it took."""
    started = time.monotonic()
    subprocess.run(
        f"{os.environ['STRATA_PG_CTL']} stop -m fast -t 60 -D {os.environ['STRATA_PGDATA']}",
        shell=True,
        check=True,
        capture_output=True,
    )
    return time.monotonic() - started


def restart() -> None:
    subprocess.run(os.environ["STRATA_RESTART"], shell=True, check=True, capture_output=True)


def thread_names(pid: int) -> list[str]:
    names = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            names.append(pathlib.Path(f"/proc/{pid}/task/{task}/comm").read_text().strip())
        except OSError:
            pass
    return names


def fill_random(conn, table: str, rows: int, dims: int) -> None:
    """`rows` random vectors of `dims` dimensions, generated inside the server."""
    conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v vector({dims}))")
    conn.execute(
        f"INSERT INTO {table} SELECT g, (SELECT array_agg(random()::real) FROM generate_series(1, {dims}) WHERE g > 0)::vector "
        f"FROM generate_series(1, {rows}) g"
    )


class Statement(threading.Thread):
    """Runs one statement on a connection of its own, which stays open after the statement ends
    (so its backend can be inspected); records the statement's error and when it ended."""

    def __init__(self, dbname: str, sql: str):
        super().__init__()
        self.sql = sql
        self.connection = psycopg.connect(conninfo(dbname), autocommit=True)
        self.pid = self.connection.info.backend_pid
        self.error: Exception | None = None
        self.ended: float | None = None

    def run(self) -> None:
        try:
            self.connection.execute(self.sql)
        except Exception as e:  # noqa: BLE001 - the test inspects whatever ended the statement
            self.error = e
        finally:
            self.ended = time.monotonic()


def wait_for_building_segment(conn, seconds: float = 60) -> None:
    wait_until(
        lambda: conn.execute(
            "SELECT count(*) > 0 FROM pg_stat_progress_create_index WHERE phase = 'building index: building segment'"
        ).fetchone()[0],
        seconds,
        "CREATE INDEX to reach its segment build",
    )


@pytest.fixture(scope="module")
def big_table():
    """A database with 100,000 random 128-dimension vectors (made once for the module)."""
    name = "shutdown_big"
    with psycopg.connect(conninfo("postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    with psycopg.connect(conninfo(name), autocommit=True) as c:
        c.execute("CREATE EXTENSION pg_strata")
        fill_random(c, "big", 100_000, BIG_DIMS)
        c.execute("CREATE INDEX big_flat ON big USING strata (v vector_l2_ops) WITH (kind = 'flat')")
    yield name
    with psycopg.connect(conninfo("postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.parametrize("statement", ["create", "reindex"])
def test_create_index_and_reindex_end_within_a_second_of_pg_cancel_backend(big_table, statement):
    with psycopg.connect(conninfo(big_table), autocommit=True) as c:
        if statement == "create":
            sql = "CREATE INDEX big_hnsw ON big USING strata (v vector_l2_ops) WITH (kind = 'hnsw')"
        else:
            # REINDEX rebuilds with the index's options: make the flat index an HNSW one first.
            c.execute("ALTER INDEX big_flat SET (kind = 'hnsw')")
            sql = "REINDEX INDEX big_flat"
        try:
            running = Statement(big_table, sql)
            running.start()
            wait_for_building_segment(c)
            # The phase is reported just before the build thread starts, and a new thread bears
            # the process's name until it first runs: on a loaded machine, wait for it.
            wait_until(lambda: "pg_strata build" in thread_names(running.pid), 30, "the build thread")
            time.sleep(1.0)
            cancelled_at = time.monotonic()
            assert c.execute("SELECT pg_cancel_backend(%s)", (running.pid,)).fetchone()[0]
            running.join(30)
            latency = running.ended - cancelled_at
            assert isinstance(running.error, psycopg.errors.QueryCanceled), running.error
            print(f"{statement}: ended {latency * 1000:.0f} ms after pg_cancel_backend")
            assert latency < 1.0, f"{statement} ended {latency:.2f} s after pg_cancel_backend"
            # The backend's build thread is gone (joined before the error reached the client), and
            # the session goes on.
            assert "pg_strata build" not in thread_names(running.pid)
            assert running.connection.execute("SELECT 1").fetchone()[0] == 1
            running.connection.close()
            if statement == "reindex":
                c.execute("SET enable_seqscan = off")
                q = "[" + ",".join("0.5" for _ in range(BIG_DIMS)) + "]"
                assert len(c.execute("SELECT id FROM big ORDER BY v <-> %s LIMIT 5", (q,)).fetchall()) == 5
        finally:
            if statement == "reindex":
                c.execute("ALTER INDEX big_flat SET (kind = 'flat')")


def test_fast_shutdown_is_bounded_during_a_big_build_and_nothing_is_lost(big_table):
    with psycopg.connect(conninfo(big_table), autocommit=True) as c:
        running = Statement(big_table, "CREATE INDEX big_hnsw2 ON big USING strata (v vector_l2_ops) WITH (kind = 'hnsw')")
        running.start()
        wait_for_building_segment(c)
    seconds = fast_stop()
    running.join(30)
    running.connection.close()
    print(f"fast shutdown during CREATE INDEX: {seconds:.2f} s")
    assert seconds < 10, f"fast shutdown took {seconds:.1f} s during CREATE INDEX"
    restart()
    with psycopg.connect(conninfo(big_table), autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM pg_class WHERE relname = 'big_hnsw2'").fetchone()[0] == 0


def test_fast_shutdown_is_bounded_during_a_merge_and_with_failing_flushes_and_recovers_every_row(conn):
    rng = random.Random(11)
    dbname = conn.info.dbname
    # Failing flushes: one index whose segment writes all fail.
    conn.execute("CREATE TABLE stuck (id bigserial PRIMARY KEY, v vector(8))")
    conn.execute("CREATE INDEX stuck_idx ON stuck USING strata (v vector_l2_ops) WITH (kind = 'flat', memtable_rows = 100)")
    conn.execute("SELECT strata_inject_fault('create', 'segment', 'EIO', -1, 'stuck_idx'::regclass)")
    insert(conn, "stuck", 250, rng)
    wait_until(
        lambda: conn.execute("SELECT count(*) > 0 FROM strata_index_stats('stuck_idx') WHERE retries > 0").fetchone()[0],
        30,
        "the flushes to fail",
    )
    # A merge in flight: four HNSW segments of 5,000 rows become one on the service's helper thread.
    fill_random(conn, "merging", 0, BIG_DIMS)
    conn.execute(
        "CREATE INDEX merging_idx ON merging USING strata (v vector_l2_ops) WITH (kind = 'hnsw', memtable_rows = 5000)"
    )
    conn.execute(
        f"INSERT INTO merging SELECT g, (SELECT array_agg(random()::real) FROM generate_series(1, {BIG_DIMS}) WHERE g > 0)::vector "
        "FROM generate_series(1, 20000) g"
    )
    # The fourth memtable is full but still active: flushing it (and releasing the flushed
    # memtables' status lists) lets the service merge the four segments.
    conn.execute("SELECT strata_flush('merging_idx')")
    service = service_pid()
    assert service
    wait_until(lambda: "pg_strata merge" in thread_names(service), 120, "the merge to start on its helper thread")
    stop_started = time.monotonic()
    stopping = threading.Thread(target=fast_stop)
    stopping.start()
    wait_until(lambda: not os.path.exists(f"/proc/{service}"), 10, "the index service to exit")
    service_seconds = time.monotonic() - stop_started
    stopping.join(30)
    total = time.monotonic() - stop_started
    print(f"fast shutdown mid-merge with failing flushes: service gone after {service_seconds:.2f} s, cluster after {total:.2f} s")
    assert service_seconds < 1.0, f"the service took {service_seconds:.2f} s to end after SIGTERM"
    assert total < 10
    restart()
    with psycopg.connect(conninfo(dbname), autocommit=True) as c:
        # The fault plan lived in shared memory: the restart cleared it. Recovery refills the
        # memtables that never flushed from the heap.
        assert_index_matches_heap(c, "stuck", rng)
        c.execute("SELECT strata_flush('stuck_idx')")
        c.execute("VACUUM stuck")
        assert live_entries(c, "stuck_idx") == 250
        c.execute("SELECT strata_flush('merging_idx')")
        c.execute("VACUUM merging")
        assert live_entries(c, "merging_idx") == 20000


def test_garbage_left_by_a_service_killed_during_the_grace_period_goes_after_restart(conn):
    rng = random.Random(12)
    dbname = conn.info.dbname
    conn.execute("CREATE TABLE items (id bigserial PRIMARY KEY, v vector(8))")
    conn.execute("CREATE INDEX items_idx ON items USING strata (v vector_l2_ops) WITH (kind = 'flat', memtable_rows = 100)")
    for _ in range(4):
        insert(conn, "items", 100, rng)
        conn.execute("SELECT strata_flush('items_idx')")
    conn.execute("SELECT strata_wait_for_merges('items_idx', 60)")
    directory = index_dir(conn, "items_idx")
    # The merge's inputs wait out the (default, 60 s) grace period; add orphans of a crashed write.
    replaced = unlisted_files(directory, conn, "items_idx")
    assert replaced, "the merged inputs should still be on disk during the grace period"
    for orphan in ("987654.seg", "987655.seg.tmp", "987656.del.3"):
        (directory / orphan).write_bytes(b"left by a crash")
    conn.execute("ALTER SYSTEM SET strata.file_grace_period = 1")
    service = service_pid()
    os.kill(service, signal.SIGKILL)
    wait_until(lambda: service_pid() not in (None, service), 60, "the crash restart")
    wait_until(lambda: _connects(dbname), 60, "the server to accept connections")
    with psycopg.connect(conninfo(dbname), autocommit=True) as c:
        c.execute("SELECT pg_reload_conf()")
        wait_until(lambda: not unlisted_files(directory, c, "items_idx"), 30, "the garbage to be swept")
        assert_index_matches_heap(c, "items", rng)
        c.execute("ALTER SYSTEM RESET strata.file_grace_period")
        c.execute("SELECT pg_reload_conf()")


def test_a_service_sent_sigterm_outside_a_shutdown_is_started_again_and_keeps_flushing(conn):
    """An administrator's `kill` of the index service (SIGTERM, not part of a shutdown): the
    postmaster starts the service again (it exits with code 1, not 0, which would make the
    postmaster forget it), without a crash restart, and the indexes keep flushing."""
    rng = random.Random(14)
    make_table(conn, "items", 250, rng, memtable_rows=100)
    backend = conn.info.backend_pid
    log_start = log_size()
    service = service_pid()
    os.kill(service, signal.SIGTERM)
    wait_until(lambda: service_pid() not in (None, service), 30, "the postmaster to start the index service again")
    # No crash restart: this connection's backend lived through it.
    assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] == backend
    insert(conn, "items", 300, rng)
    conn.execute("SELECT strata_flush('items_idx')")
    assert conn.execute("SELECT count(*) FROM strata_index_stats('items_idx') WHERE part = 'memtable' AND rows > 0").fetchone()[0] == 0
    assert live_entries(conn, "items_idx") == 550
    assert_index_matches_heap(conn, "items", rng)
    log = log_since(log_start)
    assert '"pg_strata index service"' in log and "exited with exit code 1" in log
    assert "terminating any other active server processes" not in log


def _connects(dbname: str) -> bool:
    try:
        with psycopg.connect(conninfo(dbname), connect_timeout=2) as c:
            c.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def test_a_manifest_whose_directory_fsync_fails_panics_like_postgresql_and_recovery_restores_the_index(conn):
    """The manifest was renamed into place but its directory could not be synced: the change is
    visible and may not be durable, and cannot be taken back. pg_strata PANICs, as PostgreSQL does
    for failed fsyncs of its own files; the crash restart's recovery makes index == heap."""
    rng = random.Random(13)
    dbname = conn.info.dbname
    conn.execute("CREATE TABLE items (id bigserial PRIMARY KEY, v vector(8))")
    conn.execute("CREATE INDEX items_idx ON items USING strata (v vector_l2_ops) WITH (kind = 'flat', memtable_rows = 100)")
    insert(conn, "items", 250, rng)
    conn.execute("SELECT strata_flush('items_idx')")
    conn.execute("SELECT strata_inject_fault('fsync_dir', 'manifest', 'EIO', 1, 'items_idx'::regclass)")
    log_start = os.path.getsize(pathlib.Path(os.environ["STRATA_PGHOST"]) / "log")
    service = service_pid()
    insert(conn, "items", 150, rng)
    # The service's next manifest write (the flush of the full memtable) PANICs.
    wait_until(lambda: service_pid() not in (None, service), 60, "the crash restart after the PANIC")
    wait_until(lambda: _connects(dbname), 60, "the server to accept connections")
    with open(pathlib.Path(os.environ["STRATA_PGHOST"]) / "log", "rb") as f:
        f.seek(log_start)
        assert b"PANIC:  pg_strata:" in f.read()
    with psycopg.connect(conninfo(dbname), autocommit=True) as c:
        assert_index_matches_heap(c, "items", rng)
        c.execute("SELECT strata_flush('items_idx')")
        c.execute("VACUUM items")
        assert live_entries(c, "items_idx") == 400
