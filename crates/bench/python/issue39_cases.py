"""The cases quoted in issue 39's "Why", rerun against pg_strata and pgvector side by side.

Run by pg_recall_matrix.py as its last section (or alone with `--cases-only`), on the same
cluster: database `strata_bench` (pg_strata + pg_strata_pgvector) and `pgvector_bench`. Each case
reports recall (exact answers in numpy, ties counted as hits; recall_util.py), rows returned
against min(LIMIT, matching rows), strict-order inversions and client p50, for both systems with
the settings the issue names. Queries: 100 per case (quick 30) unless the issue names a count;
the issue's own runs used 20 random queries, so small differences in recall are noise.

1. Low-dimensional cosine: 10,000 uniform 3-d rows, `USING strata (v vector_cosine_ops)` at the
   default ef_search and at 400; `sparsevec` the same; pgvector `USING hnsw` at its defaults.
2. Inner product on unnormalised rows (MIPS): GloVe 50-d, 100,000 rows as they come,
   `kind = 'ivf'` at probes 32 / 64 / 100 of ⌈√rows⌉ lists, the same rows under cosine, HNSW at
   ef_search 100; pgvector IVFFlat with the same lists and probes, HNSW.
3. Probing every list: 100,000 uniform 3-d rows, `USING ivfflat … WITH (lists = 100)`,
   `ivfflat.probes = 100`, LIMIT 20, under `<#>`, `<=>`, `<->`.
4. Short results under filters: (a) the same 100k rows, `USING ivfflat (lists = 100)`, probes
   10, `ivfflat.iterative_scan = relaxed_order`, `WHERE id % 10000 = 0 … LIMIT 11`; (b) 50,000
   3-d rows, `USING hnsw`, `WHERE id % 50 = 0` / `id % 500 = 0 … LIMIT 20` with
   `hnsw.iterative_scan` strict_order / relaxed_order, cosine and L2; (c) the MiniLM set through a
   plain `USING strata (v vector_cosine_ops)` (no filter column in the index, no btree, no
   enable_* setting): 10 %, 1 %, 0.1 % and a 1 % filter correlated with the vectors, p50 against
   the unfiltered p50; pgvector HNSW with iterative scans off / strict / relaxed beside it;
   (d) 1,000 rows × 32-d, `USING ivfflat (v vector_l2_ops)` at the default probes, 31 queries
   (the standby half of that case is the replication benchmark's).
5. Statistics: `pg_stat_user_indexes` after index scans of each access method.
6. `USING ivfflat (v bit_hamming_ops)` and `kind = 'ivf'` on `bit`.
7. A backend keeps a dropped index's segment files mapped (`/proc/<pid>/maps`).
"""

import os
import time

import numpy as np

from recall_util import (METRICS, Truth, build, connect, copy_vectors, plan_uses_index, query_value,
                         run_queries, sqrt_lists)
from vecs import read_vecs


def _result(case, system, index, settings, res, **extra):
    row = {"case": case, "system": system, "index": index, "settings": settings}
    row.update(res)
    row.update(extra)
    return row


class Cases:
    def __init__(self, args, conns):
        self.args = args
        self.conns = conns
        self.rows = []
        self.notes = {}
        self.nq = 30 if args.quick else 100

    def systems(self):
        yield "pg_strata", self.conns["strata"]
        if "pgvector" in self.conns:
            yield "pgvector", self.conns["pgvector"]

    def measure(self, case, system, conn, index_sql, query_sql, params, truth, settings_list, limit=10, extra=None):
        """Builds `index_sql` (index `c_idx`), measures each settings dict, drops the index."""
        conn.execute("DROP INDEX IF EXISTS c_idx")
        seconds, refused = build(conn, index_sql, [f"SET maintenance_work_mem = '{self.args.maintenance_work_mem}'"])
        if refused:
            self.rows.append(_result(case, system, index_sql, {}, {"na": refused}))
            print(f"    {case} {system}: n/a: {refused}", flush=True)
            return
        if system == "pg_strata":
            conn.execute("SELECT strata_wait_for_merges('c_idx')")
        for settings in settings_list:
            # The index's own behaviour is the point of these cases: the planner is kept on it.
            settings = dict({"enable_seqscan": "off"}, **settings)
            res = run_queries(conn, query_sql, params, truth, settings)
            uses = plan_uses_index(conn, query_sql, params[0], "c_idx", settings)
            self.rows.append(_result(case, system, index_sql, settings, res, build_s=seconds, plan_uses_index=uses,
                                     limit=limit, **(extra or {})))
            print(f"    {case} {system} {settings or 'defaults'}: recall {res['recall']:.4f}, rows {res['rows_returned_mean']:.2f}"
                  f"/{res['rows_expected_mean']:.2f} (short {res['short_queries']}), inversions {res['order_inversions']}, "
                  f"p50 {res['p50_ms']:.3f} ms" + ("" if uses else " [no index in plan]"), flush=True)
        conn.execute("DROP INDEX c_idx")

    def load(self, table, base, extra_columns=()):
        for _, conn in self.systems():
            copy_vectors(conn, table, base, extra_columns)

    def drop(self, *tables):
        for _, conn in self.systems():
            for t in tables:
                conn.execute(f"DROP TABLE IF EXISTS {t}")

    # 1 ----------------------------------------------------------------------------------------
    def low_dim_cosine(self):
        rng = np.random.default_rng(391)
        base = rng.random((10_000, 3), dtype=np.float32)
        queries = rng.random((self.nq, 3), dtype=np.float32)
        self.load("c_low", base)
        for _, conn in self.systems():
            conn.execute("CREATE TABLE c_low_sparse AS SELECT id, v::sparsevec(3) AS v FROM c_low")
        truth = Truth("cosine", base, queries)
        d = np.sort(truth.d, axis=0)[:10]
        self.notes["1"] = (f"true top-10 cosine distances span {np.median(d[9] - d[0]):.2e} (median over queries; "
                           f"smallest gap between neighbours {np.min(np.diff(d, axis=0)):.1e})")
        params = [query_value("vector", q) for q in queries]
        sql = "SELECT id FROM c_low ORDER BY v <=> %s LIMIT 10"
        self.measure("1 low-dim cosine (10k × 3)", "pg_strata", self.conns["strata"], "CREATE INDEX c_idx ON c_low USING strata (v vector_cosine_ops)",
                     sql, params, truth, [{}, {"strata.ef_search": 400}])
        if "pgvector" in self.conns:
            self.measure("1 low-dim cosine (10k × 3)", "pgvector", self.conns["pgvector"], "CREATE INDEX c_idx ON c_low USING hnsw (v vector_cosine_ops)",
                         sql, params, truth, [{}])
        sparse = [query_value("sparsevec", q) for q in queries]
        sql = "SELECT id FROM c_low_sparse ORDER BY v <=> %s LIMIT 10"
        self.measure("1 low-dim cosine, sparsevec", "pg_strata", self.conns["strata"],
                     "CREATE INDEX c_idx ON c_low_sparse USING strata (v sparsevec_cosine_ops)", sql, sparse, truth, [{}])
        if "pgvector" in self.conns:
            self.measure("1 low-dim cosine, sparsevec", "pgvector", self.conns["pgvector"],
                         "CREATE INDEX c_idx ON c_low_sparse USING hnsw (v sparsevec_cosine_ops)", sql, sparse, truth, [{}])
        self.drop("c_low", "c_low_sparse")

    # 2 ----------------------------------------------------------------------------------------
    def mips(self, load_glove):
        try:
            emb = load_glove()
        except ImportError as e:
            self.notes["2"] = f"skipped: {e}"
            return
        rows = 20_000 if self.args.quick else 100_000
        order = np.random.default_rng(392).permutation(len(emb))
        base, queries = emb[order[:rows]], emb[order[rows:rows + self.nq]]
        norms = np.linalg.norm(base, axis=1)
        lists = sqrt_lists(rows)
        self.notes["2"] = f"{rows:,} GloVe rows, norms {norms.min():.3f}–{norms.max():.2f}; ⌈√rows⌉ = {lists} lists for both systems"
        self.load("c_glove", base)
        params = [query_value("vector", q) for q in queries]
        probes = [32, 64, 100]
        for metric in ("ip", "cosine"):
            op, suffix = METRICS[metric]
            truth = Truth(metric, base, queries)
            sql = f"SELECT id FROM c_glove ORDER BY v {op} %s LIMIT 10"
            case = f"2 GloVe {metric}, ivf"
            self.measure(case, "pg_strata", self.conns["strata"], f"CREATE INDEX c_idx ON c_glove USING strata (v vector_{suffix}) WITH (kind = 'ivf')",
                         sql, params, truth, [{"strata.probes": p} for p in probes])
            if "pgvector" in self.conns:
                self.measure(case, "pgvector", self.conns["pgvector"], f"CREATE INDEX c_idx ON c_glove USING ivfflat (v vector_{suffix}) WITH (lists = {lists})",
                             sql, params, truth, [{"ivfflat.probes": p} for p in probes])
            if metric == "ip":
                case = "2 GloVe ip, hnsw"
                self.measure(case, "pg_strata", self.conns["strata"], "CREATE INDEX c_idx ON c_glove USING strata (v vector_ip_ops) WITH (kind = 'hnsw')",
                             sql, params, truth, [{}])
                if "pgvector" in self.conns:
                    self.measure(case, "pgvector", self.conns["pgvector"], "CREATE INDEX c_idx ON c_glove USING hnsw (v vector_ip_ops)",
                                 sql, params, truth, [{}, {"hnsw.ef_search": 100}])
        self.drop("c_glove")

    # 3, 4a ------------------------------------------------------------------------------------
    def every_list_and_ivf_filter(self):
        rows = 20_000 if self.args.quick else 100_000
        rng = np.random.default_rng(393)
        base = rng.random((rows, 3), dtype=np.float32)
        queries = rng.random((self.nq, 3), dtype=np.float32)
        self.load("c_u3", base)
        params = [query_value("vector", q) for q in queries]
        for metric in ("ip", "cosine", "l2"):
            op, suffix = METRICS[metric]
            truth = Truth(metric, base, queries, k=20)
            sql = f"SELECT id FROM c_u3 ORDER BY v {op} %s LIMIT 20"
            for system, conn in self.systems():
                self.measure(f"3 every list probed, {metric} (LIMIT 20)", system, conn,
                             f"CREATE INDEX c_idx ON c_u3 USING ivfflat (v vector_{suffix}) WITH (lists = 100)",
                             sql, params, truth, [{"ivfflat.probes": 100}], limit=20)
        mask = np.arange(rows) % 10_000 == 0
        truth = Truth("l2", base, queries, k=11, mask=mask)
        sql = "SELECT id FROM c_u3 WHERE id %% 10000 = 0 ORDER BY v <-> %s LIMIT 11"
        for system, conn in self.systems():
            self.measure(f"4a ivfflat filter id % 10000 = 0 ({mask.sum()} rows match), LIMIT 11", system, conn,
                         "CREATE INDEX c_idx ON c_u3 USING ivfflat (v vector_l2_ops) WITH (lists = 100)", sql, params, truth,
                         [{"ivfflat.probes": 10, "ivfflat.iterative_scan": "relaxed_order"}, {"ivfflat.probes": 10}], limit=11)
        self.drop("c_u3")

    # 4b ---------------------------------------------------------------------------------------
    def hnsw_filters(self):
        rows = 50_000
        rng = np.random.default_rng(394)
        base = rng.random((rows, 3), dtype=np.float32)
        queries = rng.random((self.nq, 3), dtype=np.float32)
        self.load("c_f3", base)
        params = [query_value("vector", q) for q in queries]
        for metric, orders in (("cosine", ["strict_order", "relaxed_order"]), ("l2", ["strict_order", "relaxed_order"])):
            op, suffix = METRICS[metric]
            for modulo in (50, 500):
                mask = np.arange(rows) % modulo == 0
                truth = Truth(metric, base, queries, k=20, mask=mask)
                sql = f"SELECT id FROM c_f3 WHERE id %% {modulo} = 0 ORDER BY v {op} %s LIMIT 20"
                for system, conn in self.systems():
                    self.measure(f"4b hnsw {metric}, id % {modulo} = 0 ({mask.sum()} rows match), LIMIT 20", system, conn,
                                 f"CREATE INDEX c_idx ON c_f3 USING hnsw (v vector_{suffix})", sql, params, truth,
                                 [{"hnsw.iterative_scan": o} for o in orders], limit=20)
        self.drop("c_f3")

    # 4c ---------------------------------------------------------------------------------------
    def minilm_filters(self):
        rows = self.args.case_minilm_rows or (20_000 if self.args.quick else 100_000)
        base = read_vecs(os.path.join(self.args.data, "base.fvecs"), rows, "<f4")
        queries = read_vecs(os.path.join(self.args.data, "query.fvecs"), self.nq, "<f4")
        rng = np.random.default_rng(395)
        centroids = base[rng.choice(len(base), 100, replace=False)]
        cluster = np.concatenate([np.argmax(base[i:i + 10_000] @ centroids.T, axis=1) for i in range(0, len(base), 10_000)])
        qcluster = np.argmax(queries @ centroids.T, axis=1)
        self.load("c_mini", base, extra_columns=[("c", cluster)])
        params = [query_value("vector", q) for q in queries]
        filters = [("none", "", None), ("10 %: id % 10 = 0", "WHERE id %% 10 = 0", np.arange(rows) % 10 == 0),
                   ("1 %: id % 100 = 0", "WHERE id %% 100 = 0", np.arange(rows) % 100 == 0),
                   ("0.1 %: id % 1000 = 0", "WHERE id %% 1000 = 0", np.arange(rows) % 1000 == 0),
                   ("correlated ~1 %: c = the query's nearest of 100 centroids", "WHERE c = {c}", cluster[:, None] == qcluster[None, :])]
        self.notes["4c"] = (f"{rows:,} MiniLM rows; the correlated filter allows {np.mean((cluster[:, None] == qcluster[None, :]).mean(axis=0)):.2%} "
                            "of the rows on average (the query's own region)")
        settings = {"pg_strata": [{}], "pgvector": [{}, {"hnsw.iterative_scan": "strict_order"}, {"hnsw.iterative_scan": "relaxed_order"}]}
        index = {"pg_strata": "CREATE INDEX c_idx ON c_mini USING strata (v vector_cosine_ops)",
                 "pgvector": "CREATE INDEX c_idx ON c_mini USING hnsw (v vector_cosine_ops)"}
        for system, conn in self.systems():
            conn.execute("DROP INDEX IF EXISTS c_idx")
            seconds, refused = build(conn, index[system], [f"SET maintenance_work_mem = '{self.args.maintenance_work_mem}'"])
            if refused:
                self.rows.append(_result("4c MiniLM filters", system, index[system], {}, {"na": refused}))
                continue
            if system == "pg_strata":
                conn.execute("SELECT strata_wait_for_merges('c_idx')")
            for s in settings[system]:
                unfiltered = None
                for name, where, mask in filters:
                    truth = Truth("cosine", base, queries, mask=mask)
                    if "{c}" in where:
                        # one statement per query (the cluster differs): prepared per value
                        res = self._per_query(conn, where, params, qcluster, truth, s)
                        uses = None
                    else:
                        sql = f"SELECT id FROM c_mini {where} ORDER BY v <=> %s LIMIT 10"
                        res = run_queries(conn, sql, params, truth, s)
                        uses = plan_uses_index(conn, sql, params[0], "c_idx", s)
                    if unfiltered is None:
                        unfiltered = res["p50_ms"]
                    self.rows.append(_result(f"4c MiniLM filter {name}", system, index[system], s, res, build_s=seconds,
                                             plan_uses_index=uses, p50_vs_unfiltered=res["p50_ms"] / unfiltered, limit=10))
                    print(f"    4c {system} {s or 'defaults'} {name}: recall {res['recall']:.4f}, short {res['short_queries']}, "
                          f"p50 {res['p50_ms']:.3f} ms ({res['p50_ms'] / unfiltered:.1f}× unfiltered)", flush=True)
            conn.execute("DROP INDEX c_idx")
        self.drop("c_mini")

    def _per_query(self, conn, where, params, qcluster, truth, settings):
        """run_queries for a filter whose constant differs per query (the cluster), as a
        parameter: `WHERE c = $2`."""
        import time as _t
        conn.execute("RESET ALL")
        for k, v in settings.items():
            conn.execute(f"SET {k} = {v}")
        sql = "SELECT id FROM c_mini WHERE c = %s ORDER BY v <=> %s LIMIT 10"
        for j in range(min(10, len(params))):
            conn.execute(sql, (int(qcluster[j]), params[j]), prepare=True).fetchall()
        walls, hits, short, returned, expected = [], 0, 0, [], 0
        for j, p in enumerate(params):
            t = _t.perf_counter()
            ids = [r[0] for r in conn.execute(sql, (int(qcluster[j]), p), prepare=True).fetchall()]
            walls.append((_t.perf_counter() - t) * 1e3)
            hits += truth.hits(j, ids)
            returned.append(len(ids))
            short += len(ids) < truth.expected(j)
            expected += truth.expected(j)
        conn.execute("RESET ALL")
        return {"recall": hits / expected, "p50_ms": float(np.percentile(walls, 50)), "short_queries": short,
                "rows_returned_mean": float(np.mean(returned)), "rows_returned_min": int(min(returned)),
                "rows_expected_mean": expected / len(params), "order_inversions": 0, "queries": len(params)}

    # 4d ---------------------------------------------------------------------------------------
    def small_ivfflat(self):
        rng = np.random.default_rng(396)
        base = rng.standard_normal((1_000, 32)).astype(np.float32)
        queries = rng.standard_normal((31, 32)).astype(np.float32)
        self.load("c_small", base)
        truth = Truth("l2", base, queries)
        params = [query_value("vector", q) for q in queries]
        for system, conn in self.systems():
            self.measure("4d 1,000 × 32-d ivfflat l2, default probes, 31 queries", system, conn,
                         "CREATE INDEX c_idx ON c_small USING ivfflat (v vector_l2_ops)",
                         "SELECT id FROM c_small ORDER BY v <-> %s LIMIT 10", params, truth, [{}])
        self.drop("c_small")

    # 5 ----------------------------------------------------------------------------------------
    def statistics(self):
        rng = np.random.default_rng(397)
        base = rng.random((2_000, 8), dtype=np.float32)
        q = query_value("vector", rng.random(8, dtype=np.float32))
        indexes = {"pg_strata": [("strata", "USING strata (v vector_l2_ops)"), ("hnsw (companion)", "USING hnsw (v vector_l2_ops)"),
                                 ("ivfflat (companion)", "USING ivfflat (v vector_l2_ops)"), ("btree (reference)", "(id)")],
                   "pgvector": [("hnsw", "USING hnsw (v vector_l2_ops)"), ("ivfflat", "USING ivfflat (v vector_l2_ops) WITH (lists = 10)"),
                                ("btree (reference)", "(id)")]}
        for system, conn in self.systems():
            out = []
            for j, (name, using) in enumerate(indexes[system]):
                table = f"c_stat{j}"
                copy_vectors(conn, table, base)
                conn.execute(f"CREATE INDEX {table}_idx ON {table} {using}")
                scanner = connect(self.args.host, self.args.port, conn.info.dbname)
                scanner.execute("SET enable_seqscan = off")
                for _ in range(5):
                    if name.startswith("btree"):
                        scanner.execute(f"SELECT id FROM {table} WHERE id = 7").fetchall()
                    else:
                        scanner.execute(f"SELECT id FROM {table} ORDER BY v <-> %s LIMIT 10", (q,)).fetchall()
                scanner.close()  # a backend's exit flushes its statistics
                time.sleep(1.0)
                conn.execute("SELECT pg_stat_clear_snapshot()")
                stat = conn.execute("SELECT idx_scan, idx_tup_read, idx_tup_fetch FROM pg_stat_user_indexes WHERE indexrelname = %s",
                                    (f"{table}_idx",)).fetchone()
                out.append({"index": name, "scans_run": 5, "idx_scan": stat[0], "idx_tup_read": stat[1], "idx_tup_fetch": stat[2]})
                conn.execute(f"DROP TABLE {table}")
            self.rows.append({"case": "5 pg_stat_user_indexes after 5 index scans", "system": system, "stats": out})
            print(f"    5 {system}: {out}", flush=True)

    # 6 ----------------------------------------------------------------------------------------
    def bit_ivf(self):
        rows = 10_000
        base = read_vecs(os.path.join(self.args.data, "base.fvecs"), rows, "<f4")
        queries = read_vecs(os.path.join(self.args.data, "query.fvecs"), self.nq, "<f4")
        self.load("c_bitsrc", base)
        for _, conn in self.systems():
            conn.execute("CREATE TABLE c_bit AS SELECT id, binary_quantize(v)::bit(384) AS v FROM c_bitsrc")
        truth = Truth("hamming", base > 0, queries > 0)
        params = [query_value("bit", q) for q in queries]
        sql = "SELECT id FROM c_bit ORDER BY v <~> %s LIMIT 10"
        self.measure("6 bit hamming, USING ivfflat", "pg_strata", self.conns["strata"], "CREATE INDEX c_idx ON c_bit USING ivfflat (v bit_hamming_ops)",
                     sql, params, truth, [{}])
        self.measure("6 bit hamming, USING strata kind = 'ivf'", "pg_strata", self.conns["strata"],
                     "CREATE INDEX c_idx ON c_bit USING strata (v bit_hamming_ops) WITH (kind = 'ivf')", sql, params, truth, [{}])
        if "pgvector" in self.conns:
            self.measure("6 bit hamming, USING ivfflat", "pgvector", self.conns["pgvector"], "CREATE INDEX c_idx ON c_bit USING ivfflat (v bit_hamming_ops)",
                         sql, params, truth, [{}])
        self.drop("c_bitsrc", "c_bit")

    # 7 ----------------------------------------------------------------------------------------
    def mapped_after_drop(self):
        conn = self.conns["strata"]
        rng = np.random.default_rng(398)
        copy_vectors(conn, "c_map", rng.random((5_000, 8), dtype=np.float32))
        conn.execute("CREATE INDEX c_map_idx ON c_map USING strata (v vector_l2_ops)")
        conn.execute("SELECT strata_flush('c_map_idx')")
        reader = connect(self.args.host, self.args.port, "strata_bench")
        pid = reader.execute("SELECT pg_backend_pid()").fetchone()[0]
        reader.execute("SET enable_seqscan = off")
        q = query_value("vector", rng.random(8, dtype=np.float32))
        reader.execute("SELECT id FROM c_map ORDER BY v <-> %s LIMIT 10", (q,)).fetchall()

        def mapped(pattern=""):
            """The `.seg` files the reader's backend maps (lines of /proc/PID/maps containing `pattern`)."""
            with open(f"/proc/{pid}/maps") as f:
                return sorted({line.split(None, 5)[-1].strip() for line in f if ".seg" in line and pattern in line})
        before = mapped()
        conn.execute("DROP TABLE c_map")
        # The index service removes a dropped index's directory on its next sweep: wait until the
        # files the reader maps are gone from the disk (at most 60 s).
        started = time.perf_counter()
        while any(os.path.exists(path) for path in before) and time.perf_counter() - started < 60:
            time.sleep(0.2)
        unlinked = not any(os.path.exists(path) for path in before)
        after_drop = mapped("(deleted)")
        reader.execute("SELECT 1").fetchall()
        after_next = mapped("(deleted)")
        reader.close()
        self.rows.append({"case": "7 segment files mapped by another backend after DROP", "system": "pg_strata",
                          "seg_mappings_before_drop": len(before), "files_unlinked": unlinked,
                          "seconds_until_unlinked": time.perf_counter() - started if unlinked else None,
                          "deleted_seg_mappings_after_drop": len(after_drop),
                          "deleted_seg_mappings_after_next_statement": len(after_next)})
        print(f"    7: .seg mappings before {len(before)}, files unlinked {unlinked}, deleted but mapped {len(after_drop)}, "
              f"after the next statement {len(after_next)}", flush=True)


def run(args, conns, load_glove):
    c = Cases(args, conns)
    steps = [("1", c.low_dim_cosine), ("2", lambda: c.mips(load_glove)), ("3/4a", c.every_list_and_ivf_filter),
             ("4b", c.hnsw_filters), ("4c", c.minilm_filters), ("4d", c.small_ivfflat), ("5", c.statistics),
             ("6", c.bit_ivf), ("7", c.mapped_after_drop)]
    timings = {}
    for name, step in steps:
        started = time.perf_counter()
        try:
            step()
        except Exception as e:  # one case failing must not lose the others' results
            c.notes[name] = f"failed: {type(e).__name__}: {e}"
            print(f"  case {name} failed: {e}", flush=True)
            for _, conn in c.systems():
                conn.execute("RESET ALL")
        timings[name] = time.perf_counter() - started
    return {"results": {"rows": c.rows, "notes": c.notes, "seconds": timings, "queries_per_case": c.nq},
            "markdown": markdown(c)}


def _settings_text(s):
    return ", ".join(f"{k} = {v}" for k, v in s.items() if k != "enable_seqscan") or "defaults"


def markdown_from(results):
    """markdown() of stored results (recall-matrix.json's issue39_cases)."""
    class Stored:
        rows, notes, nq = results["rows"], results["notes"], results["queries_per_case"]
    return markdown(Stored)


def markdown(c):
    lines = ["## Issue 39's cases, rerun", "",
             f"`crates/bench/python/issue39_cases.py`: the cases of the issue's \"Why\", both systems, {c.nq} queries per case "
             "unless named (the issue's runs used 20). \"rows\" = mean rows returned / min(LIMIT, matching rows); "
             "\"short\" = queries that returned fewer; \"inv.\" = adjacent result pairs out of distance order. Every case but 4c "
             "runs with `enable_seqscan = off` so that the index is what answers (the issue's cases are about the index's "
             "answers); 4c changes no planner setting and says where the planner chose no index scan.", ""]
    for k, v in c.notes.items():
        lines.append(f"- case {k}: {v}")
    lines += ["", "| case | system | index | settings | recall | rows | short | inv. | p50 ms | note |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in c.rows:
        if "stats" in r or "seg_mappings_before_drop" in r:
            continue
        index = r["index"].replace("CREATE INDEX c_idx ON ", "")
        if r.get("na"):
            lines.append(f"| {r['case']} | {r['system']} | `{index}` | | n/a: {r['na']} | | | | | |")
            continue
        note = []
        if r.get("p50_vs_unfiltered") is not None and "none" not in r["case"]:
            note.append(f"{r['p50_vs_unfiltered']:.1f}× unfiltered p50")
        if r.get("plan_uses_index") is False:
            note.append("planner chose no index scan")
        lines.append(f"| {r['case']} | {r['system']} | `{index}` | {_settings_text(r['settings'])} | {r['recall']:.4f} | "
                     f"{r['rows_returned_mean']:.2f} / {r['rows_expected_mean']:.2f} | {r['short_queries']} | {r['order_inversions']} | "
                     f"{r['p50_ms']:.3f} | {'; '.join(note)} |")
    stats = [r for r in c.rows if "stats" in r]
    if stats:
        lines += ["", "Statistics (case 5): `pg_stat_user_indexes` after 5 index scans, read from another session after the "
                  "scanning backend exited.", "", "| system | index | idx_scan | idx_tup_read | idx_tup_fetch |", "|---|---|---|---|---|"]
        for r in stats:
            for s in r["stats"]:
                lines.append(f"| {r['system']} | {s['index']} | {s['idx_scan']} | {s['idx_tup_read']} | {s['idx_tup_fetch']} |")
    maps = [r for r in c.rows if "seg_mappings_before_drop" in r]
    for r in maps:
        lines += ["", f"Case 7: a backend that scanned a strata index mapped {r['seg_mappings_before_drop']} `.seg` file(s); another "
                  "session dropped the table; once the index service had unlinked the files "
                  + (f"({r['seconds_until_unlinked']:.1f} s later)" if r["files_unlinked"] else "(they were still on disk after 60 s)")
                  + f", the backend still mapped {r['deleted_seg_mappings_after_drop']} deleted `.seg` file(s), and "
                  f"{r['deleted_seg_mappings_after_next_statement']} after running its next statement (the disk space comes back only "
                  "when none is mapped)."]
    return lines
