-- The bytes pg_strata writes are the same on every supported PostgreSQL version (15, 16, 18):
-- this file's expected output holds digests of an index's status pages, its segment file and its
-- manifest, and one expected file serves every version, so a version writing other bytes fails.
-- Status pages are changed through generic WAL records, whose payload is the page bytes, so equal
-- pages mean equal WAL record payloads.
--
-- The rows, the build and so the bytes are deterministic: one flat segment (CREATE INDEX), then
-- 20 rows in a memtable whose TIDs the status pages list. Each page is digested without the
-- first 10 bytes of its header (the LSN and the checksum, which depend on the WAL position and
-- on whether the cluster has data checksums, on by default from 18).
CREATE TABLE golden (id int, v vector(4));
INSERT INTO golden SELECT i, ARRAY[i, i % 7, -i, 1.0 / i] FROM generate_series(1, 200) i;
CREATE INDEX golden_idx ON golden USING strata (v vector_l2_ops) WITH (kind = 'flat');
INSERT INTO golden SELECT i, ARRAY[i, i % 5, i, 2.0 / i] FROM generate_series(201, 220) i;
CHECKPOINT;

-- The index relation: the status pages (metadata, group catalogue, TID lists).
SELECT pg_relation_size('golden_idx') / current_setting('block_size')::int AS status_pages;
SELECT b AS block,
       md5(substr(pg_read_binary_file(pg_relation_filepath('golden_idx'), b * 8192, 8192), 11)) AS page
FROM generate_series(0, pg_relation_size('golden_idx') / 8192 - 1) b
ORDER BY b;

-- The index's directory ($PGDATA/pg_strata/{database}_{tablespace}_{relfilenode}): every file.
SELECT f AS file, (pg_stat_file(d || '/' || f)).size AS bytes, md5(pg_read_binary_file(d || '/' || f)) AS digest
FROM (SELECT 'pg_strata/' || d AS d
      FROM pg_ls_dir('pg_strata') d
      WHERE d = (SELECT oid FROM pg_database WHERE datname = current_database())
                || '_' || (SELECT oid FROM pg_tablespace WHERE spcname = 'pg_default')
                || '_' || pg_relation_filenode('golden_idx')) dir,
     pg_ls_dir(d) f
WHERE f NOT LIKE 'pgsql_tmp%'
ORDER BY f;

-- The segment header (the first 64 bytes: magic, format version, section table) as text.
SELECT encode(substr(pg_read_binary_file(d || '/' || f), 1, 64), 'hex') AS segment_header
FROM (SELECT 'pg_strata/' || d AS d
      FROM pg_ls_dir('pg_strata') d
      WHERE d LIKE '%\_' || pg_relation_filenode('golden_idx')) dir,
     pg_ls_dir(d) f
WHERE f LIKE '%.seg';

-- Index scans still answer as the exact plan does.
SET enable_seqscan = off;
SELECT id FROM golden ORDER BY v <-> '[10, 3, -10, 0.1]' LIMIT 5;
RESET enable_seqscan;
DROP TABLE golden;
