-- The strata operator classes for bit (bit_hamming_ops, bit_jaccard_ops) and sparsevec
-- (sparsevec_l2_ops, _ip_ops, _cosine_ops, _l1_ops): an ordered index scan returns the rows the
-- exact ORDER BY returns (compared by their distances, since bit distances tie often), through
-- memtables, flushed segments and deletions; kinds that cannot serve a metric are refused. Last,
-- kind = 'ivf' on bit under both metrics (and the companion's USING ivfflat (b bit_hamming_ops))
-- with every list probed: the exact answer too.

CREATE TABLE bs_docs (id int PRIMARY KEY, b bit(64), s sparsevec(200));
SELECT setseed(0.5);
CREATE FUNCTION bs_random_bits(seed int) RETURNS bit(64) LANGUAGE sql VOLATILE AS $$
    SELECT string_agg(CASE WHEN random() < 0.3 THEN '1' ELSE '0' END, '')::bit(64)
    FROM generate_series(1, 64) WHERE seed IS NOT NULL
$$;
CREATE FUNCTION bs_random_sparse(seed int) RETURNS sparsevec LANGUAGE sql VOLATILE AS $$
    SELECT ('{' || string_agg(k || ':' || ((CASE WHEN random() < 0.5 THEN -1 ELSE 1 END)
                                           * (0.01 + round(random()::numeric, 3))), ',' ORDER BY k)
            || '}/200')::sparsevec
    FROM (SELECT DISTINCT (1 + floor(random() * 200))::int AS k FROM generate_series(1, 12) WHERE seed IS NOT NULL) ks
$$;
INSERT INTO bs_docs SELECT i, bs_random_bits(i), bs_random_sparse(i) FROM generate_series(1, 1200) AS i;
INSERT INTO bs_docs VALUES (0, NULL, NULL);

-- Refusals: quantized codes cannot estimate Hamming or Jaccard (an ivf index of a bit column
-- keeps the packed bits instead: no bits, no rerank from the heap); a query of another length.
CREATE INDEX ON bs_docs USING strata (b bit_jaccard_ops) WITH (kind = 'flat', bits = 4);
CREATE INDEX ON bs_docs USING strata (b bit_hamming_ops) WITH (kind = 'ivf', bits = 4);
CREATE INDEX ON bs_docs USING strata (b bit_jaccard_ops) WITH (kind = 'ivf', rerank = 'heap');
CREATE TABLE bs_wide (s sparsevec(20000));
CREATE INDEX ON bs_wide USING strata (s sparsevec_ip_ops) WITH (kind = 'ivf');
DROP TABLE bs_wide;

CREATE INDEX bs_hamming ON bs_docs USING strata (b bit_hamming_ops) WITH (kind = 'flat', memtable_rows = 256);
CREATE INDEX bs_jaccard ON bs_docs USING strata (b bit_jaccard_ops) WITH (kind = 'hnsw', memtable_rows = 256);
CREATE INDEX bs_ip ON bs_docs USING strata (s sparsevec_ip_ops) WITH (kind = 'flat', memtable_rows = 256);
CREATE INDEX bs_cosine ON bs_docs USING strata (s sparsevec_cosine_ops) WITH (kind = 'hnsw', memtable_rows = 256);
CREATE INDEX bs_l2 ON bs_docs USING strata (s sparsevec_l2_ops) WITH (kind = 'ivf', lists = 4, memtable_rows = 256);
CREATE INDEX bs_l1 ON bs_docs USING strata (s sparsevec_l1_ops) WITH (kind = 'flat', memtable_rows = 256);

SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM bs_docs ORDER BY b <~> B'1010' LIMIT 5;
SELECT id FROM bs_docs ORDER BY b <~> B'1010' LIMIT 5;
EXPLAIN (COSTS OFF) SELECT id FROM bs_docs ORDER BY s <#> '{1:1}/200' LIMIT 5;
SELECT id FROM bs_docs ORDER BY s <#> '{1:1}/20' LIMIT 5;
RESET enable_seqscan;

-- The oracle: the distances of the k nearest rows by `col op q`, through the index or exactly.
CREATE FUNCTION bs_nearest(col text, op text, q text, k int, via_index bool) RETURNS float8[] LANGUAGE plpgsql AS $$
DECLARE
    result float8[];
BEGIN
    PERFORM set_config('enable_indexscan', via_index::text, true);
    PERFORM set_config('enable_seqscan', (NOT via_index)::text, true);
    PERFORM set_config('enable_bitmapscan', 'false', true);
    EXECUTE format('SELECT array_agg(d ORDER BY d) FROM (SELECT %1$I %2$s %3$L AS d FROM bs_docs WHERE %1$I IS NOT NULL ORDER BY %1$I %2$s %3$L LIMIT %4$s) s',
                   col, op, q, k)
        INTO result;
    RETURN result;
END $$;
CREATE TABLE bs_probes AS
SELECT bs_random_bits(g)::text AS bq, bs_random_sparse(g)::text AS sq FROM generate_series(1, 20) AS g;
-- Exact kinds give the exact distances for every query (to 1e-4: the index sums a row's
-- distance in another order than the SQL function, so two rows whose distances differ in the
-- last bits may trade places at the 10th position); HNSW over 1,200 rows at the default
-- ef_search for nearly every query (at least 18 of 20 here).
CREATE FUNCTION bs_close(a float8[], b float8[]) RETURNS bool LANGUAGE sql AS $$
    SELECT cardinality(a) = cardinality(b) AND bool_and(abs(x - y) <= 1e-4)
    FROM unnest(a, b) AS u(x, y)
$$;
CREATE FUNCTION bs_agreement(col text, op text) RETURNS int LANGUAGE sql AS $$
    SELECT count(*) FILTER (WHERE bs_close(bs_nearest(col, op, CASE col WHEN 'b' THEN bq ELSE sq END, 10, true),
                                           bs_nearest(col, op, CASE col WHEN 'b' THEN bq ELSE sq END, 10, false)))::int
    FROM bs_probes
$$;
CREATE FUNCTION bs_report(stage text) RETURNS TABLE (stage text, hamming_flat int, jaccard_hnsw_at_least_18 bool,
                                                      ip_flat int, cosine_hnsw_at_least_18 bool, l2_ivf_at_least_18 bool, l1_flat int)
LANGUAGE sql AS $$
    SELECT stage, bs_agreement('b', '<~>'), bs_agreement('b', '<%>') >= 18, bs_agreement('s', '<#>'),
           bs_agreement('s', '<=>') >= 18, bs_agreement('s', '<->') >= 18, bs_agreement('s', '<+>')
$$;
-- A candidate list as long as the HNSW segments' rows makes their searches visit every node
-- their graph reaches (the default one leaves the multi-threaded build's graph to chance on
-- these nearly orthogonal rows: fewer than 18 of 20 in one loaded CI run at 200).
SET strata.ef_search = 1500;
SELECT * FROM bs_report('built');

-- New rows in memtables, a flush to segments, deletions: still the exact answer.
INSERT INTO bs_docs SELECT i, bs_random_bits(i), bs_random_sparse(i) FROM generate_series(1201, 1500) AS i;
SELECT * FROM bs_report('with memtables');
SELECT count(*) FILTER (WHERE strata_flush(c::regclass) IS NOT NULL) AS flushed
FROM unnest(ARRAY['bs_hamming', 'bs_jaccard', 'bs_ip', 'bs_cosine', 'bs_l2', 'bs_l1']) AS c;
DELETE FROM bs_docs WHERE id % 5 = 0;
VACUUM bs_docs;
SELECT * FROM bs_report('flushed, deleted');
RESET strata.ef_search;

-- The operator's value comes back as the exact function computes it.
SET enable_seqscan = off;
SELECT b <~> B'0000000000000000000000000000000000000000000000000000000000000001'
       = hamming_distance(b, B'0000000000000000000000000000000000000000000000000000000000000001') AS same
FROM bs_docs ORDER BY b <~> B'0000000000000000000000000000000000000000000000000000000000000001' LIMIT 3;
RESET enable_seqscan;

-- kind = 'ivf' on bit columns: lists of the packed rows around bit-string centroids and exact
-- distances, so probing every list (8 a segment here) gives the exact top 10 under Hamming and
-- Jaccard, through the build, memtables, flushed segments and deletions.
DROP INDEX bs_hamming, bs_jaccard;
CREATE INDEX bs_hamming_ivf ON bs_docs USING strata (b bit_hamming_ops) WITH (kind = 'ivf', lists = 8, memtable_rows = 256);
CREATE INDEX bs_jaccard_ivf ON bs_docs USING strata (b bit_jaccard_ops) WITH (kind = 'ivf', lists = 8, memtable_rows = 256);
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM bs_docs ORDER BY b <~> (SELECT bq::bit(64) FROM bs_probes LIMIT 1) LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM bs_docs ORDER BY b <%> (SELECT bq::bit(64) FROM bs_probes LIMIT 1) LIMIT 10;
RESET enable_seqscan;
SET strata.probes = 8;
SELECT 'built' AS stage, bs_agreement('b', '<~>') AS hamming_ivf, bs_agreement('b', '<%>') AS jaccard_ivf;
INSERT INTO bs_docs SELECT i, bs_random_bits(i), bs_random_sparse(i) FROM generate_series(1501, 1800) AS i;
SELECT 'with memtables' AS stage, bs_agreement('b', '<~>') AS hamming_ivf, bs_agreement('b', '<%>') AS jaccard_ivf;
SELECT count(*) FILTER (WHERE strata_flush(c::regclass) IS NOT NULL) AS flushed
FROM unnest(ARRAY['bs_hamming_ivf', 'bs_jaccard_ivf']) AS c;
DELETE FROM bs_docs WHERE id % 7 = 0;
VACUUM bs_docs;
SELECT 'flushed, deleted' AS stage, bs_agreement('b', '<~>') AS hamming_ivf, bs_agreement('b', '<%>') AS jaccard_ivf;
-- One probe still returns the full LIMIT (further lists are scanned until it is reached).
SET strata.probes = 1;
SELECT min(cardinality(bs_nearest('b', op, bq, 10, true))) AS fewest_rows
FROM bs_probes, unnest(ARRAY['<~>', '<%>']) AS op;
RESET strata.probes;

-- pgvector's DDL through the companion: USING ivfflat (b bit_hamming_ops), ivfflat.probes = lists.
DROP INDEX bs_hamming_ivf, bs_jaccard_ivf;
CREATE EXTENSION pg_strata_pgvector;
CREATE INDEX bs_hamming_ivfflat ON bs_docs USING ivfflat (b bit_hamming_ops) WITH (lists = 8);
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM bs_docs ORDER BY b <~> (SELECT bq::bit(64) FROM bs_probes LIMIT 1) LIMIT 10;
RESET enable_seqscan;
SET ivfflat.probes = 8;
SELECT bs_agreement('b', '<~>') AS hamming_ivfflat;
RESET ivfflat.probes;
DROP INDEX bs_hamming_ivfflat;
DROP EXTENSION pg_strata_pgvector;

DROP TABLE bs_docs, bs_probes;
DROP FUNCTION bs_nearest(text, text, text, int, bool), bs_close(float8[], float8[]), bs_agreement(text, text), bs_report(text),
    bs_random_bits(int), bs_random_sparse(int);
