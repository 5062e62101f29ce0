-- The strata index access method: options, exact results (kind = flat) against the sequential
-- scan oracle through memtables, flushes, deletes, VACUUM, updates, filters and rebuilds.

CREATE TABLE docs (id int PRIMARY KEY, tenant int NOT NULL, v vector(3));

-- Bad options are rejected with errors that name the problem.
CREATE INDEX ON docs USING strata (v) WITH (kind = 'bogus');
CREATE INDEX ON docs USING strata (v) WITH (m = 1000);
CREATE INDEX ON docs USING strata (v) WITH (bits = 4);
CREATE INDEX ON docs USING strata (v) WITH (kind = 'ivf', bits = 3);
CREATE INDEX ON docs USING strata (v) WITH (nonsense = 1);
CREATE INDEX ON docs USING strata (v) WITH (m = 16, ef_construction = 8);
CREATE INDEX ON docs USING strata (v) WITH (memtable_rows = 1);
CREATE INDEX ON docs USING strata (v) WITH (rerank = 'disk');
CREATE INDEX ON docs USING strata (v) WITH (kind = 'hnsw', rerank = 'heap');
CREATE INDEX ON docs USING strata (v) WITH (lists = 10);
CREATE INDEX ON docs USING strata (v) WITH (kind = 'ivf', m = 8);
CREATE INDEX ON docs USING strata (v) WITH (kind = 'flat', ef_construction = 100);
CREATE TABLE nodims (v vector);
CREATE INDEX ON nodims USING strata (v);
DROP TABLE nodims;
CREATE TEMP TABLE scratch (v vector(3));
CREATE INDEX ON scratch USING strata (v);
DROP TABLE scratch;

SELECT setseed(0.5);
INSERT INTO docs
SELECT i, i % 10, ARRAY[random() * 10 - 5, random() * 10 - 5, random() * 10 - 5]::real[]
FROM generate_series(1, 2000) AS i;
CREATE INDEX docs_v_l2 ON docs USING strata (v vector_l2_ops) WITH (kind = 'flat', memtable_rows = 256);
SELECT part, kind, rows, deleted FROM strata_index_stats('docs_v_l2') ORDER BY part, id;
EXPLAIN (COSTS OFF) SELECT id FROM docs ORDER BY v <-> '[1,2,3]' LIMIT 10;

-- The oracle: the same query with and without the index.
CREATE FUNCTION nearest(q vector, k int, via_index bool, op text DEFAULT '<->', filter text DEFAULT 'true')
RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE
    result int[];
BEGIN
    PERFORM set_config('enable_indexscan', via_index::text, true);
    PERFORM set_config('enable_seqscan', (NOT via_index)::text, true);
    PERFORM set_config('enable_bitmapscan', 'false', true);
    PERFORM set_config('enable_indexonlyscan', 'false', true);
    EXECUTE format('SELECT array_agg(id) FROM (SELECT id FROM docs WHERE %s ORDER BY v %s $1 LIMIT $2) s', filter, op)
        INTO result USING q, k;
    RETURN result;
END $$;
CREATE TABLE probes AS
SELECT ARRAY[random() * 10 - 5, random() * 10 - 5, random() * 10 - 5]::real[]::vector AS q
FROM generate_series(1, 40) AS g;
CREATE FUNCTION agreement(op text DEFAULT '<->', filter text DEFAULT 'true', k int DEFAULT 10)
RETURNS text LANGUAGE sql AS $$
    SELECT count(*) FILTER (WHERE nearest(q, k, true, op, filter) = nearest(q, k, false, op, filter))
           || ' of ' || count(*) || ' queries identical'
    FROM probes
$$;
SELECT agreement();

-- New rows land in memtables (256 rows each) and are found at once.
INSERT INTO docs
SELECT i, i % 10, ARRAY[random() * 10 - 5, random() * 10 - 5, random() * 10 - 5]::real[]
FROM generate_series(2001, 2700) AS i;
SELECT agreement();
SELECT strata_flush('docs_v_l2');
SELECT part, kind, rows, deleted FROM strata_index_stats('docs_v_l2') ORDER BY part, id;
SELECT agreement();

-- MVCC: a transaction sees its own uncommitted rows; rolled-back rows never appear.
BEGIN;
INSERT INTO docs VALUES (9001, 1, '[0,0,0]');
SELECT id FROM docs ORDER BY v <-> '[0,0,0]' LIMIT 1;
ROLLBACK;
SET enable_seqscan = off;
SELECT id FROM docs ORDER BY v <-> '[0,0,0]' LIMIT 1;
SELECT count(*) FROM docs WHERE id = 9001;

-- UPDATE of the vector column.
UPDATE docs SET v = '[0,0,0.001]' WHERE id = 1500;
SELECT id FROM docs ORDER BY v <-> '[0,0,0]' LIMIT 1;
RESET enable_seqscan;

-- Deletes disappear at once (visibility) and from the index at VACUUM, and never come back.
DELETE FROM docs WHERE id <= 1000 OR id BETWEEN 2301 AND 2400;
SELECT agreement();
VACUUM docs;
-- (The service may already be rebuilding the half-deleted segment: count live rows per part.)
SELECT part, sum(rows) - sum(deleted) AS live FROM strata_index_stats('docs_v_l2') GROUP BY part ORDER BY part;
SELECT agreement();
SET enable_seqscan = off;
SET strata.max_scan_tuples = 100000;
SET hnsw.iterative_scan = relaxed_order;
SELECT count(*) AS reachable_through_index FROM (SELECT id FROM docs ORDER BY v <-> '[0,0,0]' LIMIT 100000) s;
SELECT count(*) AS heap_rows FROM docs;
RESET strata.max_scan_tuples;
RESET hnsw.iterative_scan;
RESET enable_seqscan;

-- Filters that keep 10 % and 1 % of the rows still return LIMIT rows, in exact order.
SELECT agreement('<->', 'tenant = 3');
SELECT agreement('<->', 'id % 100 = 7', 5);
SELECT min(cardinality(nearest(q, 5, true, '<->', 'id % 100 = 7'))) AS fewest_rows FROM probes;

-- Inner product and cosine indexes on the same column, chosen by the operator.
CREATE INDEX docs_v_ip ON docs USING strata (v vector_ip_ops) WITH (kind = 'flat');
CREATE INDEX docs_v_cos ON docs USING strata (v vector_cosine_ops) WITH (kind = 'flat');
EXPLAIN (COSTS OFF) SELECT id FROM docs ORDER BY v <#> '[1,2,3]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM docs ORDER BY v <=> '[1,2,3]' LIMIT 10;
SELECT agreement('<#>');
SELECT agreement('<=>');

-- A halfvec expression index.
CREATE INDEX docs_h ON docs USING strata ((v::halfvec(3)) halfvec_l2_ops) WITH (kind = 'flat');
EXPLAIN (COSTS OFF) SELECT id FROM docs ORDER BY v::halfvec(3) <-> '[1,2,3]'::halfvec LIMIT 5;
SET enable_seqscan = off;
SELECT count(*) FROM (SELECT id FROM docs ORDER BY v::halfvec(3) <-> '[1,2,3]'::halfvec LIMIT 5) s;
RESET enable_seqscan;

-- Queries of the wrong dimension fail clearly.
SET enable_seqscan = off;
SELECT id FROM docs ORDER BY v <-> '[1,2]' LIMIT 1;
RESET enable_seqscan;

-- REINDEX, CREATE INDEX CONCURRENTLY and TRUNCATE keep the index exact.
REINDEX INDEX docs_v_l2;
SELECT agreement();
DROP INDEX docs_v_l2;
CREATE INDEX CONCURRENTLY docs_v_l2 ON docs USING strata (v vector_l2_ops) WITH (kind = 'flat');
SELECT agreement();
TRUNCATE docs;
SET enable_seqscan = off;
SELECT count(*) FROM (SELECT id FROM docs ORDER BY v <-> '[0,0,0]' LIMIT 10) s;
INSERT INTO docs VALUES (1, 1, '[1,1,1]'), (2, 1, '[2,2,2]');
SELECT id FROM docs ORDER BY v <-> '[0,0,0]' LIMIT 10;
RESET enable_seqscan;
DROP TABLE docs, probes;
DROP FUNCTION nearest, agreement;
