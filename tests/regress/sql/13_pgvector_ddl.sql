-- The companion extension pg_strata_pgvector: a pgvector user's index DDL (USING hnsw / ivfflat,
-- pgvector's operator class and option names) builds strata indexes of the matching kind.
\set SHOW_CONTEXT never

-- Refused, clearly, while an access method of pgvector's names exists (pgvector installed).
CREATE ACCESS METHOD hnsw TYPE INDEX HANDLER bthandler;
CREATE EXTENSION pg_strata_pgvector;
DROP ACCESS METHOD hnsw;
CREATE EXTENSION pg_strata_pgvector;
SELECT amname, amhandler FROM pg_am WHERE amname IN ('hnsw', 'ivfflat') ORDER BY amname;
SELECT c.opcname, a.amname FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
WHERE a.amname IN ('hnsw', 'ivfflat') ORDER BY a.amname, c.opcname;

CREATE TABLE items (id int PRIMARY KEY, embedding vector(3), h halfvec(3));
SELECT setseed(0.75);
INSERT INTO items
SELECT i, a::vector, a::halfvec
FROM (SELECT i, ARRAY[random() * 10 - 5, random() * 10 - 5, random() * 10 - 5]::real[] AS a
      FROM generate_series(1, 2000) AS i) s;

-- pgvector's DDL, as its README and ORMs write it.
CREATE INDEX items_hnsw ON items USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
CREATE INDEX items_ivf ON items USING ivfflat (embedding vector_l2_ops) WITH (lists = 100);
CREATE INDEX items_half ON items USING hnsw (h halfvec_l1_ops);
CREATE INDEX items_plain ON items USING ivfflat (embedding);
-- What pgvector refuses is refused: no L1 for ivfflat, unknown options, out-of-range values.
CREATE INDEX ON items USING ivfflat (embedding vector_l1_ops);
CREATE INDEX ON items USING hnsw (embedding) WITH (probes = 3);
CREATE INDEX ON items USING hnsw (embedding) WITH (m = 1);

-- Segment kinds: hnsw for USING hnsw, ivf for USING ivfflat (also without a WITH clause).
SELECT idx, bool_and(s.kind LIKE i.expected || '%') AS right_kind, sum(s.rows) AS rows
FROM (VALUES ('items_hnsw', 'hnsw'), ('items_ivf', 'ivf'), ('items_half', 'hnsw'), ('items_plain', 'ivf'))
         AS i(idx, expected),
     LATERAL strata_index_stats(i.idx::regclass) s
WHERE s.part = 'segment'
GROUP BY idx ORDER BY idx;
DROP INDEX items_plain;

SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY embedding <=> '[1,2,3]' LIMIT 5;
EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY embedding <-> '[1,2,3]' LIMIT 5;
EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY h <+> '[1,2,3]' LIMIT 5;
RESET enable_seqscan;

-- Index scans against the exact ORDER BY (index scans off), over 30 queries.
CREATE FUNCTION items_nearest(q text, op text, col text, k int, via_index bool) RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE
    result int[];
BEGIN
    PERFORM set_config('enable_indexscan', via_index::text, true);
    PERFORM set_config('enable_seqscan', (NOT via_index)::text, true);
    PERFORM set_config('enable_bitmapscan', 'false', true);
    EXECUTE format('SELECT array_agg(id) FROM (SELECT id FROM items ORDER BY %I %s %L::%s LIMIT %s) s',
                   col, op, q, CASE col WHEN 'h' THEN 'halfvec' ELSE 'vector' END, k)
        INTO result;
    RETURN result;
END $$;
CREATE TABLE item_queries AS
SELECT ARRAY[random() * 10 - 5, random() * 10 - 5, random() * 10 - 5]::real[]::vector::text AS q
FROM generate_series(1, 30) AS g;
CREATE FUNCTION items_agreement(op text, col text) RETURNS int LANGUAGE sql AS $$
    SELECT count(*) FILTER (WHERE items_nearest(q, op, col, 10, true) = items_nearest(q, op, col, 10, false))::int
    FROM item_queries
$$;
-- IVF probing every list (pgvector's parameter name) reranks 4 x k candidates exactly.
SET ivfflat.probes = 100;
SELECT items_agreement('<->', 'embedding') >= 27 AS ivf_all_lists_nearly_always_exact;
RESET ivfflat.probes;
-- HNSW over 2,000 rows finds the exact top 10 for nearly every query.
SELECT items_agreement('<=>', 'embedding') >= 27 AS hnsw_cosine_nearly_always_exact;
SELECT items_agreement('<+>', 'h') >= 27 AS hnsw_half_l1_nearly_always_exact;

-- Rows inserted later reach the memtables of all three indexes, and a flush writes segments.
INSERT INTO items SELECT i, a::vector, a::halfvec
FROM (SELECT i, ARRAY[random() * 10 - 5, random() * 10 - 5, random() * 10 - 5]::real[] AS a
      FROM generate_series(2001, 2300) AS i) s;
SELECT strata_flush('items_hnsw') IS NOT NULL AS flushed, strata_flush('items_ivf') IS NOT NULL AS flushed;
SELECT sum(rows) FILTER (WHERE part = 'segment') AS hnsw_segment_rows FROM strata_index_stats('items_hnsw');
SELECT sum(rows) FILTER (WHERE part = 'segment') AS ivf_segment_rows FROM strata_index_stats('items_ivf');

-- The extension drops cleanly once its indexes are gone.
DROP INDEX items_hnsw, items_ivf, items_half;
DROP EXTENSION pg_strata_pgvector;
SELECT count(*) AS left_over FROM pg_am WHERE amname IN ('hnsw', 'ivfflat');
DROP TABLE items, item_queries;
DROP FUNCTION items_nearest, items_agreement;
