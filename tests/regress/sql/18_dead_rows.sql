-- Rows the executor finds dead before VACUUM does (PostgreSQL's kill_prior_tuple hint) are
-- skipped by later searches of the backend that found them (strata_lsm::dead_rows). Only rows
-- dead to every transaction are hinted: a flat index's top 10 stays the exact plan's through
-- committed and rolled-back deletes, deletes of the scan's own open transaction, and VACUUM.

CREATE TABLE d_items (id int PRIMARY KEY, embedding vector(32)) WITH (autovacuum_enabled = false);
SELECT setseed(0.25);
INSERT INTO d_items
SELECT i, (SELECT array_agg(random() - 0.5) FROM generate_series(1, 32) WHERE i > 0)::vector
FROM generate_series(1, 6000) AS i;
CREATE TABLE d_queries AS
SELECT g AS q, (SELECT array_agg(random() - 0.5) FROM generate_series(1, 32) WHERE g > 0)::vector AS v
FROM generate_series(1, 20) AS g;

-- The top 10 through the index or by the exact plan.
CREATE FUNCTION d_top(v vector, via_index bool) RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE
    result int[];
BEGIN
    PERFORM set_config('enable_indexscan', via_index::text, true);
    PERFORM set_config('enable_seqscan', (NOT via_index)::text, true);
    PERFORM set_config('enable_bitmapscan', 'false', true);
    SELECT array_agg(id ORDER BY n) INTO result FROM (
        SELECT id, row_number() OVER () AS n FROM (
            SELECT id FROM d_items ORDER BY embedding <-> v LIMIT 10) s) t;
    RETURN result;
END $$;

-- Rows hinted dead by one scan of every query (EXPLAIN ANALYZE's "dead rows hinted").
CREATE FUNCTION d_hinted() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    line text;
    total bigint := 0;
    query vector;
BEGIN
    FOR query IN SELECT v FROM d_queries ORDER BY q LOOP
        FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) '
                            'SELECT id FROM d_items ORDER BY embedding <-> $1 LIMIT 10' USING query LOOP
            IF line LIKE '%Strata Scans:%' THEN
                total := total + coalesce(substring(line FROM 'dead rows hinted=([0-9]+)')::bigint, 0);
            END IF;
        END LOOP;
    END LOOP;
    RETURN total;
END $$;

CREATE FUNCTION d_mismatches() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FILTER (WHERE d_top(v, true) <> d_top(v, false)) FROM d_queries
$$;

CREATE INDEX d_flat ON d_items USING strata (embedding vector_l2_ops) WITH (kind = 'flat');
SELECT count(*) AS segments FROM strata_index_stats('d_flat') WHERE part = 'segment';

-- Rows this transaction deletes are invisible to it but not dead to every transaction: no row
-- is hinted (none other is dead yet), and they come back when it rolls back.
BEGIN;
DELETE FROM d_items WHERE id % 3 = 2;
SET LOCAL enable_seqscan = off;
SELECT d_hinted() AS hinted_for_own_open_delete;
SELECT d_mismatches() AS top10_mismatches_in_open_delete;
ROLLBACK;
SELECT d_mismatches() AS top10_mismatches_after_open_delete;

-- A delete rolled back: no row is dead, none is hinted or lost.
BEGIN;
DELETE FROM d_items WHERE id % 3 = 1;
ROLLBACK;
SET enable_seqscan = off;
SELECT d_hinted() AS hinted_after_rollback;
RESET enable_seqscan;
SELECT d_mismatches() AS top10_mismatches_after_rollback;

-- A committed delete of every third row: the first scans hint the dead rows they meet, the
-- same scans again meet none, and results equal the exact plan's throughout.
DELETE FROM d_items WHERE id % 3 = 0;
SET enable_seqscan = off;
SELECT d_hinted() > 0 AS first_scans_hint_dead_rows;
SELECT d_hinted() AS second_scans_hint;
RESET enable_seqscan;
SELECT d_mismatches() AS top10_mismatches_after_delete;

-- VACUUM deletes the rows in the index; results stay exact.
VACUUM d_items;
SELECT d_mismatches() AS top10_mismatches_after_vacuum;
SELECT sum(deleted) AS deleted_by_vacuum FROM strata_index_stats('d_flat') WHERE part = 'segment';

-- HNSW: with a third of the rows dead and not vacuumed, every query still returns 10 live rows.
DROP INDEX d_flat;
DELETE FROM d_items WHERE id % 3 = 1;
CREATE INDEX d_hnsw ON d_items USING strata (embedding vector_l2_ops) WITH (kind = 'hnsw');
DELETE FROM d_items WHERE id % 5 = 0;
SET enable_seqscan = off;
SELECT d_hinted() > 0 AS hnsw_scans_hint_dead_rows;
RESET enable_seqscan;
SELECT count(*) FILTER (WHERE cardinality(d_top(v, true)) = 10) AS hnsw_queries_with_10_rows
FROM d_queries;

DROP TABLE d_items, d_queries;
DROP FUNCTION d_top, d_hinted, d_mismatches;
