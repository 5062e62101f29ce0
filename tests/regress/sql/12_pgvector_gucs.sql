-- pgvector's scan parameters act as aliases of strata's: hnsw.ef_search, hnsw.max_scan_tuples,
-- ivfflat.probes (read at scan time as custom variables, never defined by pg_strata, so that
-- pgvector's library can be loaded in the same cluster); strata's own setting wins when it is
-- not at its default. hnsw.iterative_scan accepts pgvector's three values.
\set SHOW_CONTEXT never

CREATE TABLE alias_docs (id int PRIMARY KEY, v vector(4));
SELECT setseed(0.5);
INSERT INTO alias_docs
SELECT i, ARRAY[random(), random(), random(), random()]::real[]
FROM generate_series(1, 3000) AS i;
CREATE INDEX alias_hnsw ON alias_docs USING strata (v) WITH (kind = 'hnsw');
SET enable_seqscan = off;

-- Rows one scan returns (it stops widening at max_scan_tuples).
CREATE FUNCTION alias_rows(op text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM (SELECT id FROM alias_docs ORDER BY v %s ''[0.5,0.5,0.5,0.5]'' LIMIT 100) s', op)
        INTO n;
    RETURN n;
END $$;
-- The candidates counter of EXPLAIN ANALYZE's "Strata Scans" line.
CREATE FUNCTION alias_candidates(op text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    line text;
BEGIN
    FOR line IN EXECUTE format('EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) '
                               'SELECT id FROM alias_docs ORDER BY v %s ''[0.5,0.5,0.5,0.5]'' LIMIT 10', op) LOOP
        IF line LIKE '%Strata Scans:%' THEN
            RETURN substring(line FROM 'candidates=([0-9]+)')::bigint;
        END IF;
    END LOOP;
    RETURN NULL;
END $$;

-- hnsw.max_scan_tuples caps the rows as strata.max_scan_tuples does.
SELECT alias_rows('<->') AS uncapped;
SET hnsw.max_scan_tuples = 7;
SELECT alias_rows('<->') AS capped_by_alias;
SET strata.max_scan_tuples = 12;
SELECT alias_rows('<->') AS strata_setting_wins;
RESET strata.max_scan_tuples;
RESET hnsw.max_scan_tuples;

-- hnsw.ef_search widens the first round of an HNSW search.
SET hnsw.ef_search = 10;
CREATE TEMP TABLE small_ef AS SELECT alias_candidates('<->') AS c;
SET hnsw.ef_search = 400;
SELECT alias_candidates('<->') > (SELECT c FROM small_ef) AS larger_ef_more_candidates;
RESET hnsw.ef_search;

-- ivfflat.probes reaches the IVF search (strata's IVF scans widen to further lists as needed, so
-- at this size the probe count changes speed, not answers: checked here by the values a scan
-- refuses, below, and that 1 and 64 are both taken).
DROP INDEX alias_hnsw;
CREATE INDEX alias_ivf ON alias_docs USING strata (v) WITH (kind = 'ivf', lists = 64);
SET ivfflat.probes = 1;
SELECT alias_rows('<->') AS one_probe;
SET ivfflat.probes = 64;
SELECT alias_rows('<->') AS all_lists;
RESET ivfflat.probes;

-- Values pgvector would refuse are refused when a scan reads them, naming the parameter.
SET ivfflat.probes = 'many';
SELECT id FROM alias_docs ORDER BY v <-> '[0.5,0.5,0.5,0.5]' LIMIT 1;
SET ivfflat.probes = -1;
SELECT id FROM alias_docs ORDER BY v <-> '[0.5,0.5,0.5,0.5]' LIMIT 1;
RESET ivfflat.probes;
SET hnsw.iterative_scan = strict_order;
SELECT count(*) FROM (SELECT id FROM alias_docs ORDER BY v <-> '[0.5,0.5,0.5,0.5]' LIMIT 3) s;
SET hnsw.iterative_scan = relaxed_order;
SELECT count(*) FROM (SELECT id FROM alias_docs ORDER BY v <-> '[0.5,0.5,0.5,0.5]' LIMIT 3) s;
SET hnsw.iterative_scan = off;
SELECT count(*) FROM (SELECT id FROM alias_docs ORDER BY v <-> '[0.5,0.5,0.5,0.5]' LIMIT 3) s;
SET hnsw.iterative_scan = sometimes;
SELECT count(*) FROM (SELECT id FROM alias_docs ORDER BY v <-> '[0.5,0.5,0.5,0.5]' LIMIT 3) s;
RESET hnsw.iterative_scan;

RESET enable_seqscan;
DROP TABLE alias_docs;
DROP FUNCTION alias_rows, alias_candidates;
