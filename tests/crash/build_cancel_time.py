"""Cancel and fast-shutdown latency in the middle of a 1M-row CREATE INDEX (figures for
docs/benchmarks/hardening.md; not part of any test suite).

Against a throwaway cluster:

    cargo xtask cluster start --dir /tmp/hand --port 55520
    STRATA_PGHOST=/tmp/hand STRATA_PGPORT=55520 STRATA_PGDATA=/tmp/hand/data \
        target/python-venv/bin/python tests/crash/build_cancel_time.py [--rows 1000000]

Loads `rows` random 128-dimension vectors, starts CREATE INDEX (HNSW, maintenance_work_mem 2GB so
the rows form one segment build), cancels it 3 s into the build and prints the latency; starts it
again and stops the cluster with `pg_ctl stop -m fast` 3 s into the build, printing how long the
stop took. The cluster is left stopped.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import threading
import time

import psycopg

from cluster import conninfo

BUILD = "CREATE INDEX big_idx ON big USING strata (v vector_l2_ops) WITH (kind = 'hnsw')"


def run(sql: str, out: dict) -> None:
    conn = psycopg.connect(conninfo("postgres"), autocommit=True)
    out["pid"] = conn.info.backend_pid
    conn.execute("SET maintenance_work_mem = '2GB'")
    try:
        conn.execute(sql)
    except psycopg.Error as e:
        out["error"] = type(e).__name__
    out["ended"] = time.monotonic()


def wait_for_build(c) -> None:
    sql = "SELECT count(*) > 0 FROM pg_stat_progress_create_index WHERE phase = 'building index: building segment'"
    while not c.execute(sql).fetchone()[0]:
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    rows = parser.parse_args().rows
    with psycopg.connect(conninfo("postgres"), autocommit=True) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS pg_strata")
        c.execute("DROP TABLE IF EXISTS big")
        c.execute("CREATE TABLE big (id int, v vector(128))")
        c.execute(
            "INSERT INTO big SELECT g, (SELECT array_agg(random()::real) FROM generate_series(1, 128) WHERE g > 0)::vector "
            f"FROM generate_series(1, {rows}) g"
        )
        out: dict = {}
        worker = threading.Thread(target=run, args=(BUILD, out))
        worker.start()
        wait_for_build(c)
        time.sleep(3)
        cancelled = time.monotonic()
        c.execute("SELECT pg_cancel_backend(%s)", (out["pid"],))
        worker.join()
        print(f"{rows} rows: CREATE INDEX ended ({out.get('error')}) {1000 * (out['ended'] - cancelled):.0f} ms after pg_cancel_backend")
        out = {}
        worker = threading.Thread(target=run, args=(BUILD, out))
        worker.start()
        wait_for_build(c)
        time.sleep(3)
    stopping = time.monotonic()
    subprocess.run(
        f"runuser -u postgres -- pg_ctl stop -m fast -D {os.environ['STRATA_PGDATA']}",
        shell=True,
        check=True,
        capture_output=True,
        env={**os.environ, "PATH": f"/usr/lib/postgresql/15/bin:{os.environ['PATH']}"},
    )
    print(f"{rows} rows: fast shutdown during CREATE INDEX took {time.monotonic() - stopping:.2f} s")
    worker.join()


if __name__ == "__main__":
    main()
