"""pg_strata next to pgvector itself in one cluster (issue 14, item 3): nothing collides.

Run by `cargo xtask compat` after it built and installed pgvector (the same Debian source package
whose regression files it runs) into the cluster's PostgreSQL. The cluster preloads pg_strata.
Checks, each an assertion with the observed value in its message:

1. pgvector works in a database of its own: CREATE EXTENSION vector, an hnsw index, an ordered
   index scan; pgvector's library defines its hnsw.* / ivfflat.* parameters while pg_strata is
   loaded in the same backend (pg_strata defines none of them).
2. pg_strata cannot be created in that database (both define the type `vector`): a clear error,
   and the database is left as it was.
3. A second database with pg_strata and pg_strata_pgvector: `USING hnsw` builds a strata index; with
   pgvector's library also loaded into that backend (`LOAD 'vector'`), a set hnsw.max_scan_tuples
   (now pgvector's own variable) still caps strata scans, and a flat index stays exact.
4. The companion refuses to install where pgvector's access methods exist (a copy of pgvector's
   database, pgvector's objects moved to another schema so that pg_strata's types fit): the
   message names the access method, which still belongs to pgvector.

Environment: PGHOST (socket directory), PGPORT, PGUSER. Prints "alongside: N passed, 0 failed".
"""

import psycopg

CHECKS = []


def check(name):
    def wrap(function):
        CHECKS.append((name, function))
        return function

    return wrap


def connect(dbname):
    return psycopg.connect(dbname=dbname, autocommit=True)


def reset_databases():
    with connect("postgres") as conn:
        for name in ("strata_alongside_pgvector", "strata_alongside_strata", "strata_alongside_copy"):
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute("CREATE DATABASE strata_alongside_pgvector")
        conn.execute("CREATE DATABASE strata_alongside_strata")


@check("pgvector works in its own database, its parameters defined next to pg_strata")
def pgvector_works():
    with connect("strata_alongside_pgvector") as conn:
        conn.execute("CREATE EXTENSION vector")
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        assert version.startswith("0.8"), version
        conn.execute("CREATE TABLE items (id int, embedding vector(3))")
        conn.execute("INSERT INTO items SELECT i, ARRAY[i, i % 7, i % 3]::real[] FROM generate_series(1, 500) i")
        conn.execute("CREATE INDEX ON items USING hnsw (embedding vector_l2_ops)")
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN SELECT id FROM items ORDER BY embedding <-> '[3,3,0]' LIMIT 3"))
        assert "items_embedding_idx" in plan, plan
        ids = [r[0] for r in conn.execute("SELECT id FROM items ORDER BY embedding <-> '[3,3,0]' LIMIT 1")]
        assert ids == [3], ids
        loaded = conn.execute("SELECT count(*) FROM pg_settings WHERE name IN ('hnsw.ef_search', 'ivfflat.probes')").fetchone()[0]
        assert loaded == 2, f"pgvector's parameters defined: {loaded}"
        strata = conn.execute("SELECT setting FROM pg_settings WHERE name = 'strata.ef_search'").fetchone()
        assert strata is not None, "pg_strata is preloaded in the same backend"


@check("pg_strata is refused, clearly, in a database that has pgvector")
def strata_refused_next_to_pgvector():
    with connect("strata_alongside_pgvector") as conn:
        try:
            conn.execute("CREATE EXTENSION pg_strata")
        except psycopg.errors.DuplicateObject as error:
            assert 'type "vector" already exists' in str(error), str(error)
        else:
            raise AssertionError("CREATE EXTENSION pg_strata succeeded next to pgvector")
        names = [r[0] for r in conn.execute("SELECT extname FROM pg_extension ORDER BY 1")]
        assert names == ["plpgsql", "vector"], names


@check("pg_strata's hnsw in another database, with pgvector's library loaded in the backend")
def strata_with_pgvector_library_loaded():
    with connect("strata_alongside_strata") as conn:
        conn.execute("CREATE EXTENSION pg_strata_pgvector CASCADE")
        conn.execute("CREATE TABLE items (id int, embedding vector(3))")
        conn.execute("INSERT INTO items SELECT i, ARRAY[i, i % 7, i % 3]::real[] FROM generate_series(1, 500) i")
        conn.execute("CREATE INDEX items_hnsw ON items USING hnsw (embedding vector_l2_ops)")
        conn.execute("CREATE INDEX items_flat ON items USING hnsw (embedding vector_l1_ops) WITH (kind = 'flat')")
        conn.execute("LOAD 'vector'")
        defined = conn.execute("SELECT count(*) FROM pg_settings WHERE name = 'hnsw.ef_search'").fetchone()[0]
        assert defined == 1, "pgvector's library defines hnsw.ef_search in this backend"
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN SELECT id FROM items ORDER BY embedding <-> '[3,3,0]' LIMIT 3"))
        assert "items_hnsw" in plan, plan
        query = "SELECT count(*) FROM (SELECT id FROM items ORDER BY embedding <-> '[3,3,0]' LIMIT 100) s"
        assert conn.execute(query).fetchone()[0] == 100
        # pgvector's variable, now defined by its library, still reaches strata scans.
        conn.execute("SET hnsw.max_scan_tuples = 5")
        returned = conn.execute(query).fetchone()[0]
        assert returned == 5, f"a scan under hnsw.max_scan_tuples = 5 returned {returned} rows"
        conn.execute("RESET hnsw.max_scan_tuples")
        exact = [r[0] for r in conn.execute("SELECT id FROM items ORDER BY embedding <+> '[3,3,0]' LIMIT 5")]
        conn.execute("SET enable_indexscan = off")
        conn.execute("SET enable_seqscan = on")
        oracle = [r[0] for r in conn.execute("SELECT id FROM items ORDER BY embedding <+> '[3,3,0]', id LIMIT 5")]
        assert exact == oracle, (exact, oracle)


@check("the companion refuses where pgvector's access methods exist")
def companion_refused_next_to_pgvector_access_methods():
    with connect("postgres") as conn:
        conn.execute("CREATE DATABASE strata_alongside_copy TEMPLATE strata_alongside_pgvector")
    with connect("strata_alongside_copy") as conn:
        conn.execute("DROP TABLE items")
        # pg_strata's types cannot coexist with pgvector's: move pgvector's type out of the way
        # only as far as needed to reach the companion's own check.
        conn.execute("CREATE SCHEMA pgvector_objects")
        conn.execute("ALTER EXTENSION vector SET SCHEMA pgvector_objects")
        conn.execute("CREATE EXTENSION pg_strata")
        try:
            conn.execute("CREATE EXTENSION pg_strata_pgvector")
        except psycopg.errors.DuplicateObject as error:
            assert "access methods hnsw and ivfflat already exist" in str(error), str(error)
            detail = error.diag.message_detail or ""
            assert detail == "They belong to extension vector.", detail
        else:
            raise AssertionError("the companion installed next to pgvector's access methods")
        owner = conn.execute(
            "SELECT e.extname FROM pg_am a JOIN pg_depend d ON d.objid = a.oid AND d.classid = 'pg_am'::regclass"
            " JOIN pg_extension e ON e.oid = d.refobjid WHERE a.amname = 'hnsw'"
        ).fetchone()[0]
        assert owner == "vector", owner


def main():
    reset_databases()
    passed, failed = 0, 0
    for name, function in CHECKS:
        try:
            function()
        except Exception as error:  # noqa: BLE001 - report every check's failure and go on
            failed += 1
            print(f"FAILED {name}: {type(error).__name__}: {error}")
        else:
            passed += 1
            print(f"ok     {name}")
    print(f"alongside: {passed} passed, {failed} failed")
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
