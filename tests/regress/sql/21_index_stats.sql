-- Index statistics (issue 39): pg_stat_user_indexes counts scans of every pg_strata access method
-- as it counts a btree's: idx_scan one per (re)scan that fetches, idx_tup_read one per TID the
-- index returns, idx_tup_fetch one per table row fetched through it.

CREATE EXTENSION pg_strata_pgvector;
CREATE TABLE stats_btree (id int PRIMARY KEY, v vector(3));
CREATE TABLE stats_strata (id int, v vector(3));
CREATE TABLE stats_hnsw (id int, v vector(3));
CREATE TABLE stats_ivfflat (id int, v vector(3));
CREATE TABLE stats_bm25 (id int, body text);
INSERT INTO stats_btree SELECT i, ARRAY[i, i % 7, i % 11] FROM generate_series(1, 200) i;
INSERT INTO stats_strata SELECT * FROM stats_btree;
INSERT INTO stats_hnsw SELECT * FROM stats_btree;
INSERT INTO stats_ivfflat SELECT * FROM stats_btree;
INSERT INTO stats_bm25 SELECT i, 'row ' || i || CASE WHEN i % 2 = 0 THEN ' even' ELSE ' odd' END
FROM generate_series(1, 200) i;
CREATE INDEX stats_strata_idx ON stats_strata USING strata (v vector_l2_ops) WITH (kind = 'hnsw');
CREATE INDEX stats_hnsw_idx ON stats_hnsw USING hnsw (v vector_l2_ops);
CREATE INDEX stats_ivfflat_idx ON stats_ivfflat USING ivfflat (v vector_l2_ops) WITH (lists = 4);
CREATE INDEX stats_bm25_idx ON stats_bm25 USING bm25 (body);

SET enable_seqscan = off;
SET enable_bitmapscan = off;
-- Three scans of each index reading 5 rows each; one more that finds none.
SELECT count(*) FROM (SELECT id FROM stats_btree WHERE id <= 5) s;
SELECT count(*) FROM (SELECT id FROM stats_btree WHERE id > 10 AND id <= 15) s;
SELECT count(*) FROM (SELECT id FROM stats_btree WHERE id > 20 AND id <= 25) s;
SELECT count(*) FROM (SELECT id FROM stats_btree WHERE id > 1000) s;
SELECT count(*) FROM (SELECT id FROM stats_strata ORDER BY v <-> '[1,1,1]' LIMIT 5) s;
SELECT count(*) FROM (SELECT id FROM stats_strata ORDER BY v <-> '[50,1,1]' LIMIT 5) s;
SELECT count(*) FROM (SELECT id FROM stats_strata ORDER BY v <-> '[100,1,1]' LIMIT 5) s;
SELECT count(*) FROM (SELECT id FROM stats_hnsw ORDER BY v <-> '[1,1,1]' LIMIT 5) s;
SELECT count(*) FROM (SELECT id FROM stats_hnsw ORDER BY v <-> '[50,1,1]' LIMIT 5) s;
SELECT count(*) FROM (SELECT id FROM stats_hnsw ORDER BY v <-> '[100,1,1]' LIMIT 5) s;
SELECT count(*) FROM (SELECT id FROM stats_ivfflat ORDER BY v <-> '[1,1,1]' LIMIT 5) s;
SELECT count(*) FROM (SELECT id FROM stats_ivfflat ORDER BY v <-> '[50,1,1]' LIMIT 5) s;
SELECT count(*) FROM (SELECT id FROM stats_ivfflat ORDER BY v <-> '[100,1,1]' LIMIT 5) s;
SELECT count(*) FROM (SELECT id FROM stats_bm25 ORDER BY body <@> 'even' LIMIT 5) s;
SELECT count(*) FROM (SELECT id FROM stats_bm25 ORDER BY body <@> 'odd' LIMIT 5) s;
SELECT count(*) FROM (SELECT id FROM stats_bm25 ORDER BY body <@> 'row' LIMIT 5) s;
SELECT count(*) FROM (SELECT id FROM stats_bm25 ORDER BY body <@> 'nothing' LIMIT 5) s;
-- The plans were index scans of those indexes.
EXPLAIN (COSTS OFF) SELECT id FROM stats_hnsw ORDER BY v <-> '[1,1,1]' LIMIT 5;
EXPLAIN (COSTS OFF) SELECT id FROM stats_bm25 ORDER BY body <@> 'even' LIMIT 5;
RESET enable_seqscan;
RESET enable_bitmapscan;

-- Statistics reach the shared store when the backend reports them.
SELECT pg_stat_force_next_flush();
SELECT indexrelname, idx_scan, idx_tup_read, idx_tup_fetch
FROM pg_stat_user_indexes WHERE relname LIKE 'stats\_%' ORDER BY indexrelname;

DROP TABLE stats_btree, stats_strata, stats_hnsw, stats_ivfflat, stats_bm25;
DROP EXTENSION pg_strata_pgvector;
