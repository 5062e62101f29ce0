"""Sustained ingest with and without the write stall (`strata.max_waiting_memtables`).

Builds one HNSW segment over the first 100k rows of a dataset, then runs `pg_scale.sustained_ingest`
(one writer of 1,000-row COPY batches, one searcher at `strata.ef_search` 100) for each limit given,
printing rows/s, client p50/p99, the memtable share of index time and the memtables left at the end.
The cluster must be running with pg_strata installed (e.g. `cargo xtask cluster start`).

    target/bench-venv/bin/python crates/bench/python/pg_ingest_stall.py --host /tmp/strata --port 5433 \\
        --data ../shared/data/pypi-minilm-100k --seconds 30 --limits 0,2
"""

import argparse
import time

import psycopg
from pgvector.psycopg import register_vector

import pg_scale
from vecs import read_vecs


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--limits", default="0,2")
    args = parser.parse_args()
    base = read_vecs(f"{args.data}/base.fvecs", 100_000, "<f4")
    queries = read_vecs(f"{args.data}/query.fvecs", 200, "<f4")
    server = f"host={args.host} port={args.port} user=postgres"
    with psycopg.connect(f"{server} dbname=postgres", autocommit=True) as admin:
        if not admin.execute("SELECT 1 FROM pg_database WHERE datname = 'ingest_stall'").fetchone():
            admin.execute("CREATE DATABASE ingest_stall")
        for limit in (int(x) for x in args.limits.split(",")):
            admin.execute(f"ALTER SYSTEM SET strata.max_waiting_memtables = {limit}")
            admin.execute("SELECT pg_reload_conf()")
            conninfo = f"{server} dbname=ingest_stall"
            with psycopg.connect(conninfo, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_strata")
                register_vector(conn)
                conn.execute("DROP TABLE IF EXISTS items")
                conn.execute(f"CREATE TABLE items (id bigint PRIMARY KEY, embedding vector({base.shape[1]}))")
                pg_scale.append_rows(conn, base, 0, len(base))
                conn.execute("SET maintenance_work_mem = '2GB'")
                started = time.time()
                conn.execute("CREATE INDEX bench_idx ON items USING strata (embedding vector_cosine_ops) "
                             "WITH (kind = 'hnsw', m = 16, ef_construction = 64)")
                conn.execute("SELECT strata_flush('bench_idx')")
                print(f"max_waiting_memtables = {limit}: build {time.time() - started:.1f} s", flush=True)
            result = pg_scale.sustained_ingest(conninfo, base, queries, 100, args.seconds)
            print(f"  {result['rows_per_second']:,.0f} rows/s, client p50 {result['client_p50_ms']:.2f} ms, "
                  f"p99 {result['client_p99_ms']:.2f} ms, memtable share {result['memtable_share_p50']}, "
                  f"at the end {result['parts_at_end']}", flush=True)
        admin.execute("ALTER SYSTEM RESET strata.max_waiting_memtables")
        admin.execute("SELECT pg_reload_conf()")
    with psycopg.connect(f"{server} dbname=postgres", autocommit=True) as admin:
        admin.execute("DROP DATABASE ingest_stall")


if __name__ == "__main__":
    main()
