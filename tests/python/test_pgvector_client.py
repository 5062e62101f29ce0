"""psycopg 3 + pgvector-python work against pg_strata unchanged (register_vector, numpy in and
out, text and binary formats), and exact search returns the brute-force ground truth."""

import numpy as np
import psycopg
import pytest
from pgvector import HalfVector
from pgvector.psycopg import register_vector

ROWS = 20_000
TIE = 1e-5  # distances closer than this are treated as ties (f32 kernels vs numpy's float64)


def brute_force_top10(base: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    base64 = base.astype(np.float64)
    q = query.astype(np.float64)
    cosine = 1.0 - (base64 @ q) / (np.linalg.norm(base64, axis=1) * np.linalg.norm(q))
    order = np.argsort(cosine, kind="stable")[:10]
    return order, cosine[order]


def load(conn, base: np.ndarray) -> None:
    register_vector(conn)
    conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, embedding vector(384) NOT NULL)")
    with conn.cursor().copy("COPY items (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "vector"])
        for i, row in enumerate(base):
            copy.write_row([i, row])


def test_exact_top10_equals_ground_truth(conn, minilm):
    base, queries = minilm
    load(conn, base)
    assert conn.execute("SELECT count(*) FROM items").fetchone()[0] == ROWS
    for query in queries[:10]:
        rows = conn.execute(
            "SELECT id, embedding <=> %s AS d FROM items ORDER BY embedding <=> %s LIMIT 10", (query, query)
        ).fetchall()
        ids = np.array([r[0] for r in rows])
        distances = np.array([r[1] for r in rows])
        gt_ids, gt_distances = brute_force_top10(base, query)
        assert np.all(np.diff(distances) >= 0), "results are not in distance order"
        assert np.allclose(distances, gt_distances, atol=TIE), (distances, gt_distances)
        boundary = gt_distances[-1] - TIE
        assert set(ids[distances < boundary]) == set(gt_ids[gt_distances < boundary])
        # Without near-ties the ids match position by position.
        if np.all(np.diff(gt_distances) > TIE):
            assert list(ids) == list(gt_ids)


def test_numpy_round_trip_text_and_binary(conn, minilm):
    base, _ = minilm
    load(conn, base[:100])
    for binary in (False, True):
        with conn.cursor(binary=binary) as cur:
            cur.execute("SELECT id, embedding FROM items ORDER BY id")
            for i, value in cur:
                # pgvector-python returns numpy arrays (older releases) or Vector objects that
                # convert to them (0.5+); either way the float32 values must come back bit-exact.
                embedding = value.to_numpy() if hasattr(value, "to_numpy") else value
                assert isinstance(embedding, np.ndarray)
                assert embedding.dtype == np.float32
                np.testing.assert_array_equal(embedding, base[i])


def test_halfvec_and_operators(conn):
    register_vector(conn)
    conn.execute("CREATE TABLE h (id int, v halfvec(3))")
    conn.execute("INSERT INTO h VALUES (1, %s), (2, %s)", (HalfVector([1, 2, 3]), HalfVector([0.5, -1, 2])))
    for binary in (False, True):
        with conn.cursor(binary=binary) as cur:
            rows = cur.execute("SELECT v FROM h ORDER BY id").fetchall()
            assert [list(r[0].to_list()) for r in rows] == [[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]]
    a, b = np.array([1, 2, 3], dtype=np.float32), np.array([4, 5, 6], dtype=np.float32)
    l2, ip, cos = conn.execute("SELECT %s <-> %s, %s <#> %s, %s <=> %s", (a, b, a, b, a, b)).fetchone()
    assert l2 == pytest.approx(np.sqrt(27.0), rel=1e-6)
    assert ip == pytest.approx(-32.0, rel=1e-6)
    assert cos == pytest.approx(1 - 32 / np.sqrt(14 * 77), abs=1e-7)


def test_bad_vectors_raise_clear_errors_and_change_nothing(conn):
    register_vector(conn)
    conn.execute("CREATE TABLE t (v vector(3))")
    conn.execute("INSERT INTO t VALUES (%s)", (np.array([1, 2, 3], dtype=np.float32),))
    cases = [
        (np.array([1, np.nan, 3], dtype=np.float32), "NaN not allowed in vector"),
        (np.array([1, np.inf, 3], dtype=np.float32), "infinite value not allowed in vector"),
        (np.array([1, 2], dtype=np.float32), "expected 3 dimensions, not 2"),
    ]
    for value, message in cases:
        for binary in (False, True):
            with pytest.raises(psycopg.errors.DataException, match=message):
                # %b sends the parameter in binary (vector_recv), %s in text (vector_in).
                conn.execute("INSERT INTO t VALUES (%b)" if binary else "INSERT INTO t VALUES (%s)", (value,))
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 1
