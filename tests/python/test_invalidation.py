"""A backend lets go of a dropped index's files (issue 39).

Each backend keeps the segments it searched mapped while their manifest generation stays the same.
A long-lived backend (a pooled connection) that searched an index another session then dropped
kept its `.seg` files mapped — `/proc/<pid>/maps` listed them `(deleted)` — until it exited, so
the disk space never came back. PostgreSQL's relation cache invalidation of the dropped index
now drops the backend's cached segments at its next statement.
"""

from __future__ import annotations

import os
import pathlib
import random
import time

import psycopg

DIMS = 8


def index_dir(conn, index: str) -> pathlib.Path:
    db, spc, node = conn.execute(
        "SELECT d.oid, CASE WHEN c.reltablespace = 0 THEN (SELECT oid FROM pg_tablespace WHERE spcname = 'pg_default') "
        "ELSE c.reltablespace END, c.relfilenode FROM pg_class c, pg_database d "
        "WHERE c.oid = %s::regclass AND d.datname = current_database()",
        (index,),
    ).fetchone()
    return pathlib.Path(os.path.realpath(os.environ["STRATA_PGDATA"])) / "pg_strata" / f"{db}_{spc}_{node}"


def mapped(pid: int, directory: pathlib.Path) -> list[str]:
    """The mappings of process `pid` of files in `directory` (deleted ones included)."""
    prefix = str(directory) + "/"
    with open(f"/proc/{pid}/maps") as maps:
        return [line.split(None, 5)[5].strip() for line in maps if prefix in line]


def mapped_anywhere(directory: pathlib.Path) -> list[str]:
    """Mappings of files in `directory` by any process of the machine."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found += [f"{entry.name}: {m}" for m in mapped(int(entry.name), directory)]
            except OSError:
                pass
    return found


def wait_until(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {seconds} s waiting for {what}")


def test_a_backend_unmaps_an_index_that_another_session_drops(conn):
    rng = random.Random(39)
    conn.execute(f"CREATE TABLE docs (id int, v vector({DIMS}), body text)")
    conn.execute("CREATE INDEX docs_v ON docs USING strata (v vector_l2_ops) WITH (kind = 'hnsw')")
    conn.execute("CREATE INDEX docs_body ON docs USING bm25 (body)")
    with conn.cursor().copy("COPY docs FROM STDIN") as copy:
        for i in range(2000):
            vector = "[" + ",".join(f"{rng.uniform(-1, 1):.4f}" for _ in range(DIMS)) + "]"
            copy.write_row((i, vector, f"row {i} {'even' if i % 2 == 0 else 'odd'} words"))
    for index in ("docs_v", "docs_body"):
        assert conn.execute(f"SELECT strata_flush('{index}')").fetchone()[0] >= 1
    vector_dir, text_dir = index_dir(conn, "docs_v"), index_dir(conn, "docs_body")

    # Session A searches both indexes: their segments are mapped.
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    conn.execute("SET enable_seqscan = off")
    assert len(conn.execute("SELECT id FROM docs ORDER BY v <-> %s LIMIT 5", ("[" + ",".join(["0"] * DIMS) + "]",)).fetchall()) == 5
    assert len(conn.execute("SELECT id FROM docs ORDER BY body <@> 'even' LIMIT 5").fetchall()) == 5
    conn.execute("RESET enable_seqscan")
    assert any(m.endswith(".seg") for m in mapped(pid, vector_dir)), mapped(pid, vector_dir)
    assert any(m.endswith(".seg") for m in mapped(pid, text_dir)), mapped(pid, text_dir)

    # Session B drops the vector index, then the table (and with it the bm25 index).
    dsn = f"host={os.environ['STRATA_PGHOST']} port={os.environ['STRATA_PGPORT']} user=postgres dbname={conn.info.dbname}"
    with psycopg.connect(dsn, autocommit=True) as other:
        other.execute("DROP INDEX docs_v")
        # A's next statement processes the invalidation and lets go of the vector index's files.
        conn.execute("SELECT 1")
        assert mapped(pid, vector_dir) == [], mapped(pid, vector_dir)
        assert mapped(pid, text_dir), "the bm25 index is still there, and still mapped"
        other.execute("DROP TABLE docs")
    conn.execute("SELECT 1")
    assert mapped(pid, text_dir) == [], mapped(pid, text_dir)

    # The index service removes the dropped indexes' directories; no process maps their files, so
    # the space is free.
    for directory in (vector_dir, text_dir):
        wait_until(lambda d=directory: not d.exists(), 30, f"{directory} to be removed")
        assert mapped_anywhere(directory) == []
    assert conn.execute("SELECT 1").fetchone()[0] == 1
