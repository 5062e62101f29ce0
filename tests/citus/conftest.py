"""Fixtures for the Citus suite: a running Citus cluster (`cargo xtask citus start`), whose
coordinator `cargo xtask test` names in STRATA_CITUS_HOST / STRATA_CITUS_PORT, and the shared data
folder in STRATA_SHARED_DATA."""

import json
import os
import pathlib

import numpy as np
import psycopg
import pytest

ROWS = int(os.environ.get("STRATA_CITUS_ROWS", "10000"))
QUERIES = 20
SHARDS = 4


def coordinator_conninfo() -> str:
    host = os.environ.get("STRATA_CITUS_HOST")
    port = os.environ.get("STRATA_CITUS_PORT")
    if not host or not port:
        raise RuntimeError("STRATA_CITUS_HOST and STRATA_CITUS_PORT must name a Citus coordinator (cargo xtask test sets them)")
    return f"host={host} port={port} user=postgres dbname=postgres"


def read_vecs(path: pathlib.Path, dtype, rows: int | None = None) -> np.ndarray:
    raw = np.fromfile(path, dtype="<i4")
    dims = int(raw[0])
    table = raw.reshape(-1, dims + 1)
    if rows is not None:
        table = table[:rows]
    return table[:, 1:].copy().view(dtype)


def read_texts(path: pathlib.Path, rows: int) -> list[str]:
    out = []
    with path.open() as f:
        for line in f:
            if len(out) == rows:
                break
            out.append(json.loads(line)["text"])
    return out


@pytest.fixture(scope="session")
def data():
    """(base vectors, base texts, query vectors, query texts) from shared/data/pypi-minilm-100k."""
    root = pathlib.Path(os.environ.get("STRATA_SHARED_DATA", "../shared/data")) / "pypi-minilm-100k"
    base = read_vecs(root / "base.fvecs", "<f4", ROWS)
    queries = read_vecs(root / "query.fvecs", "<f4", QUERIES)
    return base, read_texts(root / "base_texts.jsonl", ROWS), queries, read_texts(root / "query_texts.jsonl", QUERIES)


@pytest.fixture(scope="session")
def coord():
    with psycopg.connect(coordinator_conninfo(), autocommit=True) as c:
        yield c
