"""Approximate kinds reach recall@10 ≥ 0.95 at default settings on the full 100k set, against the
exact ground truth shipped with the data (gt.ivecs, computed by brute force)."""

import os
import pathlib

import numpy as np
import pytest
from pgvector.psycopg import register_vector

from conftest import read_vecs

QUERIES = 200


@pytest.fixture(scope="module")
def full_set():
    root = pathlib.Path(os.environ.get("STRATA_SHARED_DATA", "../shared/data")) / "pypi-minilm-100k"
    base = read_vecs(root / "base.fvecs", "<f4")
    queries = read_vecs(root / "query.fvecs", "<f4", rows=QUERIES)
    truth = read_vecs(root / "gt.ivecs", "<i4", rows=QUERIES)
    return base, queries, truth


@pytest.mark.parametrize("kind", ["ivf", "ivf_heap", "hnsw"])
def test_default_settings_reach_recall_095_on_100k(conn, full_set, kind):
    base, queries, truth = full_set
    register_vector(conn)
    conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, embedding vector(384))")
    with conn.cursor().copy("COPY items (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "vector"])
        for i, row in enumerate(base):
            copy.write_row([i, row])
    conn.execute("SET maintenance_work_mem = '1GB'")
    options = "kind = 'ivf', rerank = 'heap'" if kind == "ivf_heap" else f"kind = '{kind}'"
    conn.execute(f"CREATE INDEX items_idx ON items USING strata (embedding vector_cosine_ops) WITH ({options})")
    conn.execute("SET enable_seqscan = off")
    hits = 0
    for query, gt in zip(queries, truth):
        rows = conn.execute("SELECT id FROM items ORDER BY embedding <=> %s LIMIT 10", (query,)).fetchall()
        assert len(rows) == 10
        hits += len({r[0] for r in rows} & set(gt[:10].tolist()))
    recall = hits / (10 * len(queries))
    print(f"{kind}: recall@10 = {recall:.4f} over {len(queries)} queries")
    # Tolerance: the bar for default settings.
    assert recall >= 0.95, f"{kind} recall@10 {recall:.4f} < 0.95"
