"""Shard moves, rebalancing and worker failover on a Citus cluster with pg_strata indexes
(`cargo xtask citus ops`).

A table of real MiniLM rows distributed by `id` over 8 shards, with a strata hnsw index on its
vectors and a bm25 index on its texts, takes a concurrent load of inserts and deletes through
the coordinator while:

  move block_writes   citus_move_shard_placement(…, 'block_writes') of one shard
  move logical        citus_move_shard_placement(…, 'force_logical') of another
  rebalance           citus_rebalance_start() + citus_rebalance_wait() after the moves left
                      the workers uneven
  failover            a streaming standby of a worker (pg_basebackup -R) is promoted after the
                      worker is killed (kill -9), and registered in its place (citus_update_node)

After each step (the load paused): index == heap on every shard placement (a scan without LIMIT
through the shard's strata index and through its bm25 index, counted against the shard's rows),
the moved shard's index answers a query at once, and the table's rows are those the load
committed. Prints one JSON object; exits non-zero when a check fails. Runs as root; nodes run as
`postgres`.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import subprocess
import sys
import threading
import time

import numpy as np
import psycopg

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from conftest import read_texts, read_vecs  # noqa: E402

TABLE = "ops_items"


def vec(row: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in row) + "]"


class Load(threading.Thread):
    """Inserts (new ids) and deletes (random live ids) through the coordinator until paused."""

    def __init__(self, conninfo: str, base: np.ndarray, texts: list[str], live: set[int], next_id: int):
        super().__init__(daemon=True)
        self.conninfo, self.base, self.texts = conninfo, base, texts
        self.live, self.next_id = live, next_id
        self.running = threading.Event()
        self.stop = False
        self.done = 0
        self.errors: list[str] = []
        self.idle = threading.Event()

    def run(self) -> None:
        rng = random.Random(7)
        with psycopg.connect(self.conninfo, autocommit=True) as c:
            while not self.stop:
                if not self.running.is_set():
                    self.idle.set()
                    time.sleep(0.02)
                    continue
                self.idle.clear()
                try:
                    if rng.random() < 0.6 or len(self.live) < 100:
                        i = self.next_id
                        src = i % len(self.base)
                        c.execute(f"INSERT INTO {TABLE} (id, body, v) VALUES (%s, %s, %s)",
                                  (i, self.texts[src], vec(self.base[src])))
                        self.live.add(i)
                        self.next_id += 1
                    else:
                        i = rng.choice(tuple(self.live))
                        c.execute(f"DELETE FROM {TABLE} WHERE id = %s", (i,))
                        self.live.discard(i)
                    self.done += 1
                except psycopg.Error as e:
                    self.errors.append(str(e).splitlines()[0])
                    if len(self.errors) > 50:
                        return

    def pause(self) -> None:
        self.running.clear()
        self.idle.wait(30)


def placements(coord: psycopg.Connection) -> list[tuple]:
    return coord.execute(
        "SELECT s.shardid, shard_name(%s::regclass, s.shardid), p.nodename, p.nodeport "
        "FROM pg_dist_shard s JOIN pg_dist_shard_placement p USING (shardid) "
        "WHERE s.logicalrelid = %s::regclass ORDER BY s.shardid", (TABLE, TABLE)).fetchall()


def index_vs_heap(coord: psycopg.Connection, probe: np.ndarray, probe_text: str) -> dict:
    """Every placement: ids through the strata index (no LIMIT) and through the bm25 index
    against the heap (the bm25 scan returns the rows holding a query lexeme)."""
    shards = []
    for shardid, shard, host, port in placements(coord):
        with psycopg.connect(f"host={host} port={port} user=postgres dbname=postgres", autocommit=True) as w:
            for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
                w.execute(f"SET {setting} = off")
            w.execute("SET strata.max_scan_tuples = 2147483647")
            w.execute("SET hnsw.iterative_scan = relaxed_order")
            sql = f"SELECT id FROM {shard} ORDER BY v <=> %s::vector"
            plan = "\n".join(r[0] for r in w.execute("EXPLAIN (COSTS OFF) " + sql, (vec(probe),)).fetchall())
            vector_ids = [r[0] for r in w.execute(sql, (vec(probe),)).fetchall()]
            heap = sorted(r[0] for r in w.execute(f"SELECT id FROM {shard}").fetchall())
            text_sql = f"SELECT id FROM {shard} ORDER BY body <@> %s"
            text_ids = sorted(r[0] for r in w.execute(text_sql, (probe_text,)).fetchall())
            w.execute("RESET ALL")
            w.execute("SET enable_indexscan = off")
            # The rows holding any of the probe's lexemes (a bm25 scan returns exactly those).
            matching = sorted(r[0] for r in w.execute(
                f"SELECT id FROM {shard} WHERE to_tsvector('english', body) @@ "
                "to_tsquery('english', replace(plainto_tsquery('english', %s)::text, '&', '|'))",
                (probe_text,)).fetchall())
        vector_ok = "Index Scan" in plan and sorted(vector_ids) == heap
        bm25_ok = text_ids == matching
        shards.append({"shard": shardid, "port": port, "heap": len(heap), "index": len(vector_ids),
                       "bm25": len(text_ids), "bm25_heap": len(matching), "vector_ok": vector_ok,
                       "bm25_ok": bm25_ok, "ok": vector_ok and bm25_ok})
    return {"ok": all(s["ok"] for s in shards), "rows": sum(s["heap"] for s in shards), "shards": shards}


def check(coord, live: set[int], base, probe, probe_text: str, name: str) -> dict:
    ids = {r[0] for r in coord.execute(f"SELECT id FROM {TABLE}").fetchall()}
    result = index_vs_heap(coord, probe, probe_text)
    top = coord.execute(f"SELECT id FROM {TABLE} ORDER BY v <=> %s::vector LIMIT 10", (vec(probe),)).fetchall()
    result.update({"step": name, "rows_as_committed": ids == live, "top10": len(top)})
    result["ok"] = result["ok"] and result["rows_as_committed"] and len(top) == 10
    print(json.dumps({k: v for k, v in result.items() if k != "shards"}), flush=True)
    return result


def as_postgres(args: list[str]) -> None:
    subprocess.run(["runuser", "-u", "postgres", "--", *args], check=True, capture_output=True, text=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--load-seconds", type=float, default=3.0)
    parser.add_argument("--standby-port", type=int, required=True)
    args = parser.parse_args()
    host, port = os.environ["STRATA_CITUS_HOST"], os.environ["STRATA_CITUS_PORT"]
    cluster_dir = pathlib.Path(os.environ["STRATA_CITUS_DIR"])
    pg_bin = pathlib.Path(os.environ["STRATA_PG_BIN"])
    conninfo = f"host={host} port={port} user=postgres dbname=postgres"
    root = pathlib.Path(os.environ.get("STRATA_SHARED_DATA", "../shared/data")) / "pypi-minilm-100k"
    base = read_vecs(root / "base.fvecs", "<f4", args.rows)
    texts = read_texts(root / "base_texts.jsonl", args.rows)
    probe = read_vecs(root / "query.fvecs", "<f4", 1)[0]
    probe_text = "python library for data"
    steps = []
    coord = psycopg.connect(conninfo, autocommit=True)
    coord.execute(f"DROP TABLE IF EXISTS {TABLE}")
    coord.execute(f"CREATE TABLE {TABLE} (id bigint PRIMARY KEY, body text, v vector(384))")
    coord.execute(f"SELECT create_distributed_table('{TABLE}', 'id', shard_count => 8)")
    with coord.cursor().copy(f"COPY {TABLE} (id, body, v) FROM STDIN") as copy:
        for i, (row, text) in enumerate(zip(base, texts)):
            copy.write_row((i, text, vec(row)))
    coord.execute(f"CREATE INDEX {TABLE}_v ON {TABLE} USING strata (v vector_cosine_ops) WITH (kind = 'hnsw')")
    coord.execute(f"CREATE INDEX {TABLE}_bm25 ON {TABLE} USING bm25 (body) WITH (text_config = 'english')")
    live = set(range(args.rows))
    load = Load(conninfo, base, texts, live, args.rows)
    load.start()

    def under_load(name: str, action) -> None:
        load.running.set()
        time.sleep(args.load_seconds / 2)
        started = time.time()
        action()
        took = time.time() - started
        time.sleep(args.load_seconds / 2)
        load.pause()
        result = check(coord, live, base, probe, probe_text, name)
        result["seconds"] = round(took, 2)
        result["load_ops"] = load.done
        steps.append(result)

    workers = [r[0] for r in coord.execute(
        "SELECT nodeport FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary' ORDER BY nodeport").fetchall()]

    def move(mode: str) -> None:
        shardid, from_port = next(
            (s, p) for s, _, _, p in placements(coord) if p == workers[0])
        coord.execute(
            "SELECT citus_move_shard_placement(%s, 'localhost', %s, 'localhost', %s, shard_transfer_mode => %s)",
            (shardid, from_port, workers[1], mode))

    under_load("move block_writes", lambda: move("block_writes"))
    under_load("move logical", lambda: move("force_logical"))

    def rebalance() -> None:
        coord.execute("SELECT citus_rebalance_start(shard_transfer_mode => 'force_logical')")
        coord.execute("SELECT citus_rebalance_wait()")

    under_load("rebalance", rebalance)
    per_worker = dict(coord.execute(
        "SELECT p.nodeport, count(*) FROM pg_dist_shard s JOIN pg_dist_shard_placement p USING (shardid) "
        f"WHERE s.logicalrelid = '{TABLE}'::regclass GROUP BY 1").fetchall())
    steps[-1]["shards_per_worker"] = per_worker

    # Failover: a standby of the last worker, the worker killed, the standby promoted.
    victim = workers[-1]
    victim_dir = cluster_dir / f"worker{len(workers)}"
    standby_dir = cluster_dir / f"standby{len(workers)}"
    subprocess.run(["rm", "-rf", str(standby_dir)], check=True)
    standby_dir.mkdir()
    subprocess.run(["chown", "postgres:postgres", str(standby_dir)], check=True)
    standby_dir.chmod(0o700)
    as_postgres([str(pg_bin / "pg_basebackup"), "-h", "localhost", "-p", str(victim), "-U", "postgres",
                 "-D", str(standby_dir / "data"), "-R", "-X", "stream", "-c", "fast"])
    with open(standby_dir / "data" / "postgresql.conf", "a") as conf:
        conf.write(f"\nport = {args.standby_port}\nunix_socket_directories = '{standby_dir}'\n")
    as_postgres([str(pg_bin / "pg_ctl"), "-D", str(standby_dir / "data"), "-l", str(standby_dir / "log"),
                 "-w", "start"])
    load.running.set()
    time.sleep(args.load_seconds)
    load.pause()
    # The standby has replayed everything the worker committed before it dies.
    with psycopg.connect(f"host=localhost port={victim} user=postgres", autocommit=True) as w:
        lsn = w.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
    standby = psycopg.connect(f"host=localhost port={args.standby_port} user=postgres dbname=postgres",
                              autocommit=True)
    deadline = time.time() + 60
    while standby.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0] is not True:
        if time.time() > deadline:
            raise RuntimeError("the standby did not catch up")
        time.sleep(0.1)
    pid = int((victim_dir / "data" / "postmaster.pid").read_text().split()[0])
    started = time.time()
    os.kill(pid, 9)
    as_postgres([str(pg_bin / "pg_ctl"), "-D", str(standby_dir / "data"), "-w", "promote"])
    standby.close()
    node_id = coord.execute("SELECT nodeid FROM pg_dist_node WHERE nodeport = %s", (victim,)).fetchone()[0]
    coord.execute("SELECT citus_update_node(%s, 'localhost', %s)", (node_id, args.standby_port))
    failover_seconds = time.time() - started
    # Queries go on through the promoted standby.
    load.running.set()
    time.sleep(args.load_seconds)
    load.pause()
    result = check(coord, live, base, probe, probe_text, "failover")
    result["seconds"] = round(failover_seconds, 2)
    steps.append(result)
    load.stop = True
    load.join(10)
    # Leave the cluster as it was: the killed worker's directory restarts as a stale node, so
    # the promoted standby stays registered; `cargo xtask citus stop` stops every node.
    coord.execute(f"DROP TABLE {TABLE}")
    ok = all(s["ok"] for s in steps) and not load.errors
    print(json.dumps({"ok": ok, "load_errors": load.errors[:5], "steps": steps}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
