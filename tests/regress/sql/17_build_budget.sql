-- CREATE INDEX within maintenance_work_mem (issue 15): vectors past what fits in memory spill to
-- an unnamed file in the index directory (a NOTICE says so), HNSW's links and traversal codes to
-- unnamed files beside it, and a build whose private working memory for all rows exceeds the
-- budget makes several segments (a NOTICE says so). Results are those
-- of an index built in memory: a flat index equals the exact plan, with and without a filter.

CREATE TABLE b_items (id int PRIMARY KEY, grp int, embedding vector(64));
SELECT setseed(0.5);
INSERT INTO b_items
SELECT i, i % 7, (SELECT array_agg(random() - 0.5) FROM generate_series(1, 64) WHERE i > 0)::vector
FROM generate_series(1, 10000) AS i;
CREATE TABLE b_queries AS
SELECT g AS q, (SELECT array_agg(random() - 0.5) FROM generate_series(1, 64) WHERE g > 0)::vector AS v
FROM generate_series(1, 10) AS g;

-- The top 10 through the index or by the exact plan.
CREATE FUNCTION b_top(v vector, filtered bool, via_index bool) RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE
    result int[];
BEGIN
    PERFORM set_config('enable_indexscan', via_index::text, true);
    PERFORM set_config('enable_seqscan', (NOT via_index)::text, true);
    PERFORM set_config('enable_bitmapscan', 'false', true);
    SELECT array_agg(id ORDER BY n) INTO result FROM (
        SELECT id, row_number() OVER () AS n FROM (
            SELECT id FROM b_items WHERE NOT filtered OR grp = 3 ORDER BY embedding <-> v LIMIT 10) s) t;
    RETURN result;
END $$;

SET maintenance_work_mem = '1MB';

-- Flat: one segment; its vectors came from the spill file.
CREATE INDEX b_flat ON b_items USING strata (embedding vector_l2_ops, grp) WITH (kind = 'flat');
SELECT count(*) AS segments, sum(rows) AS rows FROM strata_index_stats('b_flat') WHERE part = 'segment';
SELECT count(*) FILTER (WHERE b_top(v, false, true) <> b_top(v, false, false)) AS top10_mismatches,
       count(*) FILTER (WHERE b_top(v, true, true) <> b_top(v, true, false)) AS filtered_top10_mismatches
FROM b_queries;
DROP INDEX b_flat;

-- HNSW: the vectors, link lists and codes of 10,000 rows do not fit in 1 MB: they spill, and the
-- rows build one segment. Every row is indexed once; recall stays that of a graph.
CREATE INDEX b_hnsw ON b_items USING strata (embedding vector_l2_ops) WITH (kind = 'hnsw');
SELECT count(*) AS segments, sum(rows) AS rows FROM strata_index_stats('b_hnsw') WHERE part = 'segment';
SET enable_seqscan = off;
SET hnsw.iterative_scan = relaxed_order;
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_rows
FROM (SELECT id FROM b_items ORDER BY embedding <-> (SELECT v FROM b_queries WHERE q = 1)) s;
RESET hnsw.iterative_scan;
RESET enable_seqscan;
SET strata.ef_search = 200;
SELECT avg(cardinality(ARRAY(SELECT unnest(b_top(v, false, true)) INTERSECT SELECT unnest(b_top(v, false, false))))) >= 9
       AS recall_at_least_0_9
FROM b_queries;
RESET strata.ef_search;
DROP INDEX b_hnsw;

-- IVF keeps its codes in memory: 10,000 rows of its working memory exceed 1 MB, so several
-- segments. Every row is indexed once.
CREATE INDEX b_ivf ON b_items USING strata (embedding vector_l2_ops) WITH (kind = 'ivf', lists = 16);
SELECT count(*) > 1 AS several_segments, sum(rows) AS rows FROM strata_index_stats('b_ivf') WHERE part = 'segment';
SET enable_seqscan = off;
SET hnsw.iterative_scan = relaxed_order;
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_rows
FROM (SELECT id FROM b_items ORDER BY embedding <-> (SELECT v FROM b_queries WHERE q = 1)) s;
RESET hnsw.iterative_scan;
RESET enable_seqscan;
RESET maintenance_work_mem;

DROP TABLE b_items, b_queries;
DROP FUNCTION b_top;
