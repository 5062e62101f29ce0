"""Shared pieces of the recall matrix (`pg_recall_matrix.py`) and the issue-39 cases
(`issue39_cases.py`): exact distances in numpy, recall with ties, query values for each SQL type,
timed query loops, index builds that report a refusal instead of failing.

Exact answers are computed here, in float64 over the values the database stores (`halfvec` rows
and queries rounded to float16 first, `bit` rows as pgvector's `binary_quantize` makes them), not
by a database scan. A returned row is a hit when its exact distance is at most the k-th smallest
exact distance plus a float32 rounding allowance `tau` (see `tolerance`), so rows tied with the
k-th neighbour count as hits, whichever of them a system returns.
"""

import math
import time

import numpy as np
import psycopg
from pgvector import Bit, HalfVector, SparseVector
from pgvector.psycopg import register_vector

EPS32 = 2.0 ** -24

# metric -> (SQL operator, operator class suffix)
METRICS = {
    "l2": ("<->", "l2_ops"),
    "ip": ("<#>", "ip_ops"),
    "cosine": ("<=>", "cosine_ops"),
    "l1": ("<+>", "l1_ops"),
    "hamming": ("<~>", "hamming_ops"),
    "jaccard": ("<%>", "jaccard_ops"),
}


def connect(host, port, db):
    conn = psycopg.connect(f"host={host} port={port} user=postgres dbname={db}", autocommit=True)
    register_vector(conn)
    return conn


def opclass(sql_type, metric):
    return f"{sql_type}_{METRICS[metric][1]}"


def column_type(sql_type, dims):
    return f"{sql_type}({dims})"


def stored_values(sql_type, base):
    """The rows as the database holds them, for exact distances: float16-rounded for `halfvec`,
    booleans (`x > 0`, pgvector's binary_quantize) for `bit`, float32 otherwise."""
    if sql_type == "halfvec":
        return base.astype(np.float16).astype(np.float32)
    if sql_type == "bit":
        return base > 0
    return base


def query_value(sql_type, q):
    """The query parameter for a column of `sql_type` (pgvector-python's adapters, binary)."""
    if sql_type == "vector":
        return np.asarray(q, dtype=np.float32)
    if sql_type == "halfvec":
        return HalfVector(np.asarray(q, dtype=np.float32))
    if sql_type == "sparsevec":
        return SparseVector(np.asarray(q, dtype=np.float32))
    if sql_type == "bit":
        return Bit(np.asarray(q) > 0)
    raise ValueError(sql_type)


def exact_distances(metric, base, queries):
    """Distances (float64, rows × queries) of every stored row to every query; `base` and
    `queries` already as stored (`stored_values`)."""
    if metric in ("hamming", "jaccard"):
        b = np.packbits(base, axis=1)
        out = np.empty((len(base), len(queries)))
        pop = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(axis=1)
        nb = pop[b].sum(axis=1)
        for j, q in enumerate(queries):
            qb = np.packbits(q)
            both = pop[b & qb].sum(axis=1)
            if metric == "hamming":
                out[:, j] = pop[b ^ qb].sum(axis=1)
            else:
                union = nb + pop[qb].sum() - both
                with np.errstate(invalid="ignore", divide="ignore"):
                    out[:, j] = np.where(both == 0, 1.0, 1.0 - both / np.maximum(union, 1))
        return out
    b = base.astype(np.float64)
    q = np.asarray(queries, dtype=np.float64)
    if metric == "l1":
        out = np.empty((len(base), len(q)))
        for j in range(len(q)):
            out[:, j] = np.abs(base - queries[j].astype(base.dtype)).sum(axis=1, dtype=np.float64)
        return out
    dots = b @ q.T
    if metric == "ip":
        return -dots
    bn = np.sqrt((b * b).sum(axis=1))
    qn = np.sqrt((q * q).sum(axis=1))
    if metric == "cosine":
        with np.errstate(invalid="ignore", divide="ignore"):
            return 1.0 - dots / np.maximum(bn[:, None] * qn[None, :], 1e-300)
    if metric == "l2":
        return np.sqrt(np.maximum(bn[:, None] ** 2 + qn[None, :] ** 2 - 2 * dots, 0.0))
    raise ValueError(metric)


def tolerance(metric, dk, q, base_max_norm):
    """The float32 rounding allowance for ties at the k-th distance `dk`: 4 · 2⁻²⁴ · S with S the
    magnitude the distance is computed from (cosine 1; inner product |q|·max|x|; L2 the squared
    norms over 2·dk, as an expansion |q|² + |x|² − 2q·x would lose them; L1 dk); none for bits."""
    if metric in ("hamming", "jaccard"):
        return 1e-12
    if metric == "cosine":
        scale = 1.0
    elif metric == "ip":
        scale = float(np.linalg.norm(q)) * base_max_norm
    elif metric == "l2":
        scale = dk + (float(np.dot(q, q)) + base_max_norm ** 2) / max(2 * dk, 1e-12)
    else:
        scale = abs(dk)
    return 4 * EPS32 * scale


class Truth:
    """Exact answers for one (rows, queries, metric): per query the k-th distance, the allowance,
    and the distance of every row (to score any returned id). `mask` (rows, or rows × queries)
    marks the rows a filter allows."""

    def __init__(self, metric, base_stored, queries_stored, k=10, mask=None):
        self.metric = metric
        self.k = k
        nq = len(queries_stored)
        self.d = exact_distances(metric, base_stored, queries_stored)
        if mask is None:
            self.allowed = np.full(nq, len(base_stored))
        else:
            mask = mask if mask.ndim == 2 else np.repeat(mask[:, None], nq, axis=1)
            self.d[~mask] = np.inf  # rows a filter excludes are never answers
            self.allowed = mask.sum(axis=0)
        max_norm = 0.0 if metric in ("hamming", "jaccard") else float(np.sqrt((base_stored.astype(np.float64) ** 2).sum(axis=1)).max())
        self.dk = np.full(nq, np.inf)
        for j in range(nq):
            kk = self.expected(j)
            if kk > 0:
                self.dk[j] = np.partition(self.d[:, j], kk - 1)[kk - 1]
        self.tau = np.array([tolerance(metric, self.dk[j], np.asarray(queries_stored[j], dtype=np.float64), max_norm)
                             for j in range(nq)])

    def expected(self, j):
        """Rows a full answer to query `j` has: min(k, rows allowed)."""
        return int(min(self.k, self.allowed[j]))

    def hits(self, j, ids):
        """Hits of query `j`'s returned `ids` (distinct rows within the k-th distance + tau)."""
        ids = list(dict.fromkeys(int(i) for i in ids))
        return min(sum(1 for i in ids if self.d[i, j] <= self.dk[j] + self.tau[j]), self.expected(j))

    def inversions(self, j, ids):
        """Adjacent pairs returned out of distance order (beyond tau): a strict-order check."""
        dist = [self.d[int(i), j] for i in ids]
        return sum(1 for a, b in zip(dist, dist[1:]) if b < a - self.tau[j])


def run_queries(conn, sql, params, truth, gucs=None, warmup=10):
    """Runs `sql` (one %s: the query value) for every query after `gucs` are SET; returns recall,
    client p50 (ms, prepared statements over the unix socket), queries whose answer was shorter
    than min(k, allowed rows), rows returned, and order inversions."""
    conn.execute("RESET ALL")
    for k, v in (gucs or {}).items():
        conn.execute(f"SET {k} = {v}")
    for p in params[:warmup]:
        conn.execute(sql, (p,), prepare=True).fetchall()
    walls, hits, short, returned, inversions, expected = [], 0, 0, [], 0, 0
    for j, p in enumerate(params):
        started = time.perf_counter()
        rows = conn.execute(sql, (p,), prepare=True).fetchall()
        walls.append((time.perf_counter() - started) * 1e3)
        ids = [r[0] for r in rows]
        hits += truth.hits(j, ids)
        returned.append(len(ids))
        short += len(ids) < truth.expected(j)
        expected += truth.expected(j)
        inversions += truth.inversions(j, ids)
    conn.execute("RESET ALL")
    return {
        "recall": hits / expected if expected else 1.0,
        "p50_ms": float(np.percentile(walls, 50)),
        "short_queries": short,
        "rows_returned_mean": float(np.mean(returned)),
        "rows_returned_min": int(min(returned)),
        "rows_expected_mean": expected / len(params),
        "order_inversions": inversions,
        "queries": len(params),
    }


def plan_uses_index(conn, sql, param, index, gucs=None):
    """Whether the plan of `sql` scans `index`."""
    conn.execute("RESET ALL")
    for k, v in (gucs or {}).items():
        conn.execute(f"SET {k} = {v}")
    plan = conn.execute("EXPLAIN (FORMAT JSON) " + sql, (param,)).fetchone()[0]
    conn.execute("RESET ALL")

    def walk(node):
        if node.get("Index Name") == index:
            return True
        return any(walk(child) for child in node.get("Plans", []))
    return walk(plan[0]["Plan"])


def build(conn, sql, setup=()):
    """Runs CREATE INDEX `sql`; returns (seconds, None) or (None, the server's message) when it is
    refused."""
    conn.execute("RESET ALL")
    for statement in setup:
        conn.execute(statement)
    started = time.perf_counter()
    try:
        conn.execute(sql)
    except psycopg.Error as e:
        message = (e.diag.message_primary or str(e)).strip()
        return None, message
    return time.perf_counter() - started, None


def strata_parts(conn, index):
    """(segments, memtables) of a strata index."""
    rows = conn.execute("SELECT part, count(*) FROM strata_index_stats(%s::regclass) GROUP BY part", (index,)).fetchall()
    parts = dict(rows)
    return int(parts.get("segment", 0)), int(parts.get("memtable", 0))


def copy_vectors(conn, table, base, extra_columns=()):
    """CREATE TABLE `table` (id int, v vector(d)[, extra int columns]) and binary COPY of `base`."""
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    cols = "".join(f", {name} int" for name, _ in extra_columns)
    conn.execute(f"CREATE TABLE {table} (id int, v vector({base.shape[1]}){cols})")
    with conn.cursor().copy(f"COPY {table} FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "vector"] + ["int4"] * len(extra_columns))
        for i, row in enumerate(base):
            copy.write_row([i, row] + [int(values[i]) for _, values in extra_columns])
    conn.execute(f"VACUUM ANALYZE {table}")


def sqrt_lists(rows):
    """pg_strata's automatic IVF lists for a segment of `rows` rows (⌈√rows⌉)."""
    return max(1, math.ceil(math.sqrt(rows)))
