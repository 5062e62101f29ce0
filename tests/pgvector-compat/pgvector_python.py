"""Runs pgvector-python's own test suite against a pg_strata cluster (issue 14, item 4).

pgvector-python's tests are public but not ours to commit: the caller passes the directory of
its unpacked source distribution (PyPI `pgvector==0.4.2`, `pip download --no-binary :all:`).
This script copies `tests/` to a work directory, applies the only changes the compatibility
claim allows, and runs pytest there:

- `CREATE EXTENSION vector` becomes pg_strata's extensions (`pg_strata_pgvector`, which
  requires `pg_strata` and brings pgvector's `hnsw` / `ivfflat` index DDL);
- connection strings point at the test cluster's unix socket instead of `localhost:5432`.

Every rewrite must match exactly as often as stated, so a new pgvector-python release whose
files differ fails loudly instead of running half-rewritten. The cluster comes from the
environment (PGHOST = socket directory, PGPORT, PGUSER), as libpq reads it; the script creates
the database `pgvector_python_test` afresh.

Usage: pgvector_python.py SDIST_DIR WORK_DIR [pytest arguments...]
"""

import os
import re
import shutil
import subprocess
import sys

EXTENSION = "pg_strata_pgvector CASCADE"

# (file, pattern, replacement, expected number of matches)
REWRITES = [
    # CREATE EXTENSION vector -> pg_strata's extensions.
    ("*", r"CREATE EXTENSION IF NOT EXISTS vector\b", f"CREATE EXTENSION IF NOT EXISTS {EXTENSION}", None),
    # Django creates the extension through pgvector.django.VectorExtension (a CreateExtension('vector')).
    ("test_django.py", r"\bVectorExtension\(\),", "CreateExtension('pg_strata'), CreateExtension('pg_strata_pgvector'),", 1),
    ("test_django.py", r"^import django$", "import django\nfrom django.contrib.postgres.operations import CreateExtension", 1),
    # Connection strings: localhost:5432 -> the cluster's socket (libpq takes PGHOST/PGPORT).
    ("test_psycopg.py", r"postgres://localhost/pgvector_python_test", "postgres:///pgvector_python_test", 2),
    ("test_sqlalchemy.py", r"\+(psycopg2|psycopg|asyncpg)://localhost/pgvector_python_test", r"+\1:///pgvector_python_test", 8),
    ("test_sqlmodel.py", r"\+psycopg2://localhost/pgvector_python_test", "+psycopg2:///pgvector_python_test", 1),
    # pg8000 reads no libpq environment: name the socket file.
    (
        "test_pg8000.py",
        r"Connection\(os\.environ\[\"USER\"\], database='pgvector_python_test'\)",
        "Connection(os.environ[\"USER\"], database='pgvector_python_test', unix_sock=os.environ['STRATA_PG_SOCKET'])",
        1,
    ),
    (
        "test_sqlalchemy.py",
        r"postgresql\+pg8000://\{os\.environ\[\"USER\"\]\}@localhost/pgvector_python_test'",
        "postgresql+pg8000://{os.environ[\"USER\"]}@/pgvector_python_test?unix_sock={os.environ[\"STRATA_PG_SOCKET\"]}'",
        1,
    ),
]


def rewrite(tests_dir):
    names = sorted(n for n in os.listdir(tests_dir) if n.endswith(".py"))
    for file, pattern, replacement, expected in REWRITES:
        targets = names if file == "*" else [file]
        total = 0
        for name in targets:
            path = os.path.join(tests_dir, name)
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            text, count = re.subn(pattern, replacement, text, flags=re.MULTILINE)
            total += count
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
        if expected is not None and total != expected:
            sys.exit(f"rewrite {pattern!r} in {file}: {total} matches, expected {expected}")
        if total == 0:
            sys.exit(f"rewrite {pattern!r} in {file}: no match")
    leftover = []
    for name in names:
        with open(os.path.join(tests_dir, name), encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if re.search(r"EXTENSION[^\n]*\bvector\b|localhost", line):
                    leftover.append(f"{name}:{number}: {line.strip()}")
    if leftover:
        sys.exit("lines left pointing at pgvector or localhost:\n" + "\n".join(leftover))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sdist, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(sdist, work)
    rewrite(os.path.join(work, "tests"))
    host, port = os.environ["PGHOST"], os.environ["PGPORT"]
    os.environ["STRATA_PG_SOCKET"] = os.path.join(host, f".s.PGSQL.{port}")
    os.environ["USER"] = os.environ.get("PGUSER", "postgres")
    for sql in ("DROP DATABASE IF EXISTS pgvector_python_test", "CREATE DATABASE pgvector_python_test"):
        subprocess.run(["psql", "-X", "-q", "-d", "postgres", "-c", sql], check=True)
    subprocess.run(
        ["psql", "-X", "-q", "-d", "pgvector_python_test", "-c", f"CREATE EXTENSION {EXTENSION}"], check=True
    )
    # The suite's own package (pgvector/ beside tests/) is imported from the work directory.
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *sys.argv[3:], "tests"], cwd=work
    )
    sys.exit(result.returncode)


if __name__ == "__main__":
    main()
