-- sparsevec of more dimensions than a dense row may have (SPLADE: 30,522), or with max_nnz
-- given: rows are stored packed (their non-zero pairs, at most max_nnz, default 256), kinds flat
-- and hnsw. A flat index returns exactly the rows of the exact plan, by every metric, through
-- memtables, flushes, merges and VACUUM; queries may hold more non-zero elements than max_nnz.

CREATE TABLE sp_docs (id int PRIMARY KEY, s sparsevec(30522));
SELECT setseed(0.3);
-- SPLADE-like rows: 20–60 non-zero elements, most of them among 300 frequent dimensions.
CREATE FUNCTION sp_random(nnz int) RETURNS sparsevec LANGUAGE sql VOLATILE AS $$
    SELECT ('{' || string_agg(k::text || ':' || round((0.05 + random())::numeric, 4), ',' ORDER BY k) || '}/30522')::sparsevec
    FROM (SELECT DISTINCT (1 + CASE WHEN random() < 0.7 THEN floor(random() * 300) ELSE floor(random() * 30000) END)::int AS k
          FROM generate_series(1, nnz)) ks
$$;
INSERT INTO sp_docs SELECT i, sp_random(20 + i % 40) FROM generate_series(1, 1500) AS i;
INSERT INTO sp_docs VALUES (0, NULL), (-1, '{}/30522');

CREATE INDEX sp_ip ON sp_docs USING strata (s sparsevec_ip_ops) WITH (kind = 'flat', memtable_rows = 256);
CREATE INDEX sp_cosine ON sp_docs USING strata (s sparsevec_cosine_ops) WITH (kind = 'flat', memtable_rows = 256);
CREATE INDEX sp_l2 ON sp_docs USING strata (s sparsevec_l2_ops) WITH (kind = 'flat', memtable_rows = 256);
CREATE INDEX sp_l1 ON sp_docs USING strata (s sparsevec_l1_ops) WITH (kind = 'flat', max_nnz = 64, memtable_rows = 256);
SELECT c.relname, (SELECT count(*) FROM strata_index_stats(c.oid)) > 0 AS has_parts
FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'strata' AND c.relname LIKE 'sp\_%' ORDER BY c.relname;

SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM sp_docs ORDER BY s <#> '{1:1,2:0.5}/30522' LIMIT 5;
RESET enable_seqscan;

-- The distances of the k nearest rows by `s op q`, through the index or exactly.
CREATE FUNCTION sp_nearest(op text, q text, k int, via_index bool) RETURNS float8[] LANGUAGE plpgsql AS $$
DECLARE
    result float8[];
BEGIN
    PERFORM set_config('enable_indexscan', via_index::text, true);
    PERFORM set_config('enable_seqscan', (NOT via_index)::text, true);
    PERFORM set_config('enable_bitmapscan', 'false', true);
    EXECUTE format('SELECT array_agg(round(d::numeric, 4)::float8 ORDER BY d) FROM (SELECT s %1$s %2$L AS d FROM sp_docs '
                   'WHERE s IS NOT NULL ORDER BY s %1$s %2$L LIMIT %3$s) t', op, q, k)
        INTO result;
    RETURN result;
END $$;
CREATE TABLE sp_queries AS SELECT g AS qid, sp_random(CASE WHEN g % 4 = 0 THEN 300 ELSE 15 END)::text AS q FROM generate_series(1, 12) AS g;
-- Per operator: the queries whose top 10 (as distances, to 1e-4) differ from the exact plan's.
CREATE FUNCTION sp_check(op text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM sp_queries WHERE sp_nearest(op, q, 10, true) IS DISTINCT FROM sp_nearest(op, q, 10, false)
$$;
-- Cosine has no zero rows in the index (no direction), and the exact plan puts NaN last.
SELECT sp_check('<#>') AS ip, sp_check('<=>') AS cosine, sp_check('<->') AS l2, sp_check('<+>') AS l1;

-- Memtables, flushes, merges, VACUUM.
INSERT INTO sp_docs SELECT i, sp_random(30) FROM generate_series(1501, 2300) AS i;
SELECT sp_check('<#>') AS ip, sp_check('<=>') AS cosine, sp_check('<->') AS l2, sp_check('<+>') AS l1;
SELECT strata_flush('sp_ip'), strata_flush('sp_cosine') >= 0, strata_flush('sp_l2') >= 0, strata_flush('sp_l1') >= 0;
SELECT strata_wait_for_merges('sp_ip') >= 0 AS merged;
DELETE FROM sp_docs WHERE id % 5 = 0;
VACUUM sp_docs;
SELECT sp_check('<#>') AS ip, sp_check('<=>') AS cosine, sp_check('<->') AS l2, sp_check('<+>') AS l1;

-- HNSW over packed rows: at least 9 of 12 queries give the exact top 10 by inner product.
DROP INDEX sp_ip;
CREATE INDEX sp_hnsw ON sp_docs USING strata (s sparsevec_ip_ops) WITH (kind = 'hnsw');
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM sp_docs ORDER BY s <#> '{1:1,2:0.5}/30522' LIMIT 5;
SELECT count(*) >= 9 AS hnsw_mostly_exact FROM sp_queries
WHERE (SELECT array_agg(id ORDER BY d) FROM (SELECT id, s <#> q::sparsevec AS d FROM sp_docs ORDER BY s <#> q::sparsevec LIMIT 10) t)
      = (SELECT array_agg(id ORDER BY d) FROM (SELECT id, s <#> q::sparsevec AS d FROM sp_docs ORDER BY (s <#> q::sparsevec) + 0 LIMIT 10) t);
RESET enable_seqscan;

-- Refusals: a row with more non-zero elements than max_nnz, kinds that cannot hold packed rows,
-- max_nnz on another column type, a query of other dimensions.
INSERT INTO sp_docs VALUES (99999, sp_random(100));
CREATE INDEX ON sp_docs USING strata (s sparsevec_ip_ops) WITH (kind = 'ivf');
CREATE INDEX ON sp_docs USING strata (s sparsevec_ip_ops) WITH (kind = 'flat', bits = 4);
CREATE TABLE sp_dense (v vector(3));
CREATE INDEX ON sp_dense USING strata (v) WITH (max_nnz = 10);
SET enable_seqscan = off;
SELECT id FROM sp_docs ORDER BY s <#> '{1:1}/3' LIMIT 1;
RESET enable_seqscan;

DROP FUNCTION sp_check(text), sp_nearest(text, text, int, bool);
DROP TABLE sp_docs, sp_queries, sp_dense;
DROP FUNCTION sp_random(int);
