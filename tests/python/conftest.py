"""Fixtures for client tests against a running pg_strata cluster.

`cargo xtask test` starts the cluster and passes its socket directory and port in
STRATA_PGHOST / STRATA_PGPORT, and the shared data folder in STRATA_SHARED_DATA.
"""

import os
import pathlib
import uuid

import numpy as np
import psycopg
import pytest


def _conninfo(dbname: str) -> str:
    host = os.environ.get("STRATA_PGHOST")
    port = os.environ.get("STRATA_PGPORT")
    if not host or not port:
        raise RuntimeError("STRATA_PGHOST and STRATA_PGPORT must name a running cluster (cargo xtask test sets them)")
    return f"host={host} port={port} user=postgres dbname={dbname}"


@pytest.fixture()
def conn():
    """A connection to a fresh database with pg_strata installed, dropped afterwards."""
    name = f"client_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_conninfo("postgres"), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(_conninfo(name), autocommit=True) as connection:
            connection.execute("CREATE EXTENSION pg_strata")
            yield connection
    finally:
        with psycopg.connect(_conninfo("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def read_vecs(path: pathlib.Path, dtype, rows: int | None = None) -> np.ndarray:
    """Reads .fvecs/.ivecs (little-endian int32 count, then that many values per row)."""
    raw = np.fromfile(path, dtype="<i4")
    dims = int(raw[0])
    table = raw.reshape(-1, dims + 1)
    if rows is not None:
        table = table[:rows]
    return table[:, 1:].copy().view(dtype)


@pytest.fixture(scope="session")
def minilm():
    """(base, queries) from shared/data/pypi-minilm-100k as float32 arrays."""
    root = pathlib.Path(os.environ.get("STRATA_SHARED_DATA", "../shared/data")) / "pypi-minilm-100k"
    if not (root / "base.fvecs").is_file():
        raise RuntimeError(f"{root} is missing: the client tests need shared/data/pypi-minilm-100k")
    return read_vecs(root / "base.fvecs", "<f4", rows=20_000), read_vecs(root / "query.fvecs", "<f4", rows=20)
