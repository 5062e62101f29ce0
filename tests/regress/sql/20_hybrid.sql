-- strata_hybrid: BM25 and vector index scans fused by reciprocal rank fusion, against a
-- reference fused from exact rankings of every row (sequential scans, full sorts); and the
-- plain-SQL RRF pattern, which EXPLAIN ANALYZE shows reading only LIMIT rows from each index.

CREATE TABLE notes (id int PRIMARY KEY, body text, embedding vector(8));
-- Documents of distinct lengths over a vocabulary without stop words, so that no two documents
-- tie on a BM25 score (dl differs) and ranks are unambiguous; vectors on a spiral.
CREATE FUNCTION note_text(seed int, words int) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT string_agg((ARRAY['postgres', 'replication', 'lag', 'index', 'vectors', 'ranking', 'wal',
                             'standby', 'planner', 'vacuum', 'segment', 'merges', 'memtable', 'crash',
                             'recovery', 'latency', 'throughput', 'checkpoint', 'tables', 'queries'])
                      [1 + abs(hashint4(seed * 131 + j)) % 20], ' ')
    FROM generate_series(1, words) AS j
$$;
CREATE FUNCTION note_vector(seed int) RETURNS vector LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY[sin(seed), cos(seed), sin(seed * 1.7), cos(seed * 2.3), sin(seed * 0.31),
                 cos(seed * 0.53), sin(seed * 3.1), 0.25]::vector
$$;
INSERT INTO notes SELECT i, note_text(i, 2 + i), note_vector(i) FROM generate_series(1, 300) AS i;
CREATE INDEX notes_bm25 ON notes USING bm25 (body);
CREATE INDEX notes_embedding ON notes USING strata (embedding vector_cosine_ops) WITH (kind = 'flat');

-- The reference: every row ranked exactly by each branch (no index: the function turns index
-- scans off), ranks past `depth` dropped, fused as strata_hybrid documents.
CREATE FUNCTION reference_hybrid(query text, query_vector vector, k int, depth int,
                                 rrf_k float8 DEFAULT 60, text_weight float8 DEFAULT 1, vector_weight float8 DEFAULT 1)
RETURNS TABLE (ctid tid, score float8, text_rank bigint, text_score float8, vector_rank bigint, vector_distance float8)
LANGUAGE sql STABLE SET enable_indexscan = off SET enable_bitmapscan = off AS $$
    WITH text_ranked AS (
        SELECT s.ctid, -s.score AS score, row_number() OVER (ORDER BY s.score, s.ctid) AS rank
        FROM (SELECT n.ctid, n.body <@> to_bm25query(query, 'notes_bm25') AS score FROM notes n) s
        WHERE s.score < 0),
    vector_ranked AS (
        SELECT n.ctid, n.embedding <=> query_vector AS distance,
               row_number() OVER (ORDER BY n.embedding <=> query_vector, n.ctid) AS rank
        FROM notes n WHERE query_vector IS NOT NULL),
    t AS (SELECT * FROM text_ranked WHERE rank <= depth),
    v AS (SELECT * FROM vector_ranked WHERE rank <= depth)
    SELECT coalesce(t.ctid, v.ctid),
           coalesce(text_weight / (rrf_k + t.rank), 0) + coalesce(vector_weight / (rrf_k + v.rank), 0),
           t.rank, t.score, v.rank, v.distance
    FROM t FULL JOIN v ON t.ctid = v.ctid
    ORDER BY 2 DESC, least(t.rank, v.rank), 1 LIMIT k
$$;

-- Whether strata_hybrid equals the reference row by row (scores within a relative 1e-9).
CREATE FUNCTION matches_reference(query text, query_vector vector, k int, depth int,
                                  rrf_k int DEFAULT 60, text_weight float8 DEFAULT 1, vector_weight float8 DEFAULT 1)
RETURNS bool LANGUAGE sql STABLE AS $$
    WITH got AS (SELECT row_number() OVER () AS position, *
                 FROM strata_hybrid('notes', 'body', 'embedding', query, query_vector, k => k, depth => depth,
                                    rrf_k => rrf_k, text_weight => text_weight, vector_weight => vector_weight)),
    want AS (SELECT row_number() OVER () AS position, *
             FROM reference_hybrid(query, query_vector, k, depth, rrf_k, text_weight, vector_weight))
    SELECT count(*) = (SELECT count(*) FROM want) AND count(*) = (SELECT count(*) FROM got) AND count(*) > 0
           AND bool_and(g.ctid = w.ctid AND abs(g.score - w.score) <= 1e-9 * w.score
                        AND g.text_rank IS NOT DISTINCT FROM w.text_rank
                        AND g.vector_rank IS NOT DISTINCT FROM w.vector_rank
                        AND (g.text_score IS NULL AND w.text_score IS NULL OR abs(g.text_score - w.text_score) <= 1e-9 * w.text_score)
                        AND (g.vector_distance IS NULL AND w.vector_distance IS NULL
                             OR abs(g.vector_distance - w.vector_distance) <= 1e-9))
    FROM got g JOIN want w USING (position)
$$;

CREATE FUNCTION all_match() RETURNS TABLE (query text, k int, depth int, ok bool) LANGUAGE sql STABLE AS $$
    SELECT q.query, c.k, c.depth, matches_reference(q.query, note_vector(q.seed), c.k, c.depth)
    FROM (VALUES ('replication lag', 7), ('crash recovery latency', 1001), ('vacuum', 42),
                 ('planner queries tables index', 9999)) AS q (query, seed),
         (VALUES (10, 40), (5, 5), (20, 100)) AS c (k, depth)
$$;

SELECT * FROM all_match() WHERE NOT ok;
SELECT count(*) FROM all_match() WHERE ok;
-- Weights and rrf_k change the fusion as documented; one branch alone is its own ranking.
SELECT matches_reference('replication lag', note_vector(3), 10, 40, 0, 2.0, 0.5) AS weighted,
       matches_reference('replication lag', NULL, 10, 40) AS text_only,
       matches_reference(NULL, note_vector(3), 10, 40) AS vector_only;
SELECT count(*) FROM strata_hybrid('notes', 'body', 'embedding', NULL, NULL::vector);
-- A query of stop words only finds no text rows; the vector branch still answers.
SELECT count(*), count(text_rank) FROM strata_hybrid('notes', 'body', 'embedding', 'the of a', note_vector(5));

-- The plain-SQL pattern: two ordered index scans with ranks, UNION ALL, GROUP BY. Each index
-- scan stops after its LIMIT (the table is one segment per index here, as the build left it).
-- Memory figures (sort, hash, window storage) vary with the server's version and build: masked.
CREATE FUNCTION hybrid_plan() RETURNS SETOF text LANGUAGE plpgsql AS $f$
DECLARE
    line text;
BEGIN
    FOR line IN EXECUTE $q$EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
WITH bm25 AS (
    SELECT id, row_number() OVER (ORDER BY score) AS rank
    FROM (SELECT id, body <@> to_bm25query('replication lag', 'notes_bm25') AS score
          FROM notes ORDER BY score LIMIT 40) hits),
semantic AS (
    SELECT id, row_number() OVER (ORDER BY distance) AS rank
    FROM (SELECT id, embedding <=> note_vector(7) AS distance FROM notes ORDER BY distance LIMIT 40) hits)
SELECT id, sum(1.0 / (60 + rank)) AS score
FROM (SELECT * FROM bm25 UNION ALL SELECT * FROM semantic) both_lists
GROUP BY id ORDER BY score DESC, id LIMIT 10$q$
    LOOP
        RETURN NEXT regexp_replace(line, '\d+kB', 'NkB', 'g');
    END LOOP;
END
$f$;
SELECT * FROM hybrid_plan();
-- It gives the same rows as strata_hybrid.
SELECT array_agg(id ORDER BY position) = (
    SELECT array_agg(n.id ORDER BY h.score DESC, least(h.text_rank, h.vector_rank), n.id)
    FROM strata_hybrid('notes', 'body', 'embedding', 'replication lag', note_vector(7), k => 10, depth => 40) h
    JOIN notes n ON n.ctid = h.ctid) AS same_rows
FROM (SELECT row_number() OVER () AS position, id FROM (
    WITH bm25 AS (
        SELECT id, row_number() OVER (ORDER BY score) AS rank
        FROM (SELECT id, body <@> to_bm25query('replication lag', 'notes_bm25') AS score
              FROM notes ORDER BY score LIMIT 40) hits),
    semantic AS (
        SELECT id, row_number() OVER (ORDER BY distance) AS rank
        FROM (SELECT id, embedding <=> note_vector(7) AS distance FROM notes ORDER BY distance LIMIT 40) hits)
    SELECT id, sum(1.0 / (60 + rank)) AS score
    FROM (SELECT * FROM bm25 UNION ALL SELECT * FROM semantic) both_lists
    GROUP BY id ORDER BY score DESC, id LIMIT 10) fused) plain;

-- The query vector as an untyped literal (read as the column's type) or NULL (text branch only).
SELECT array_agg(h.ctid ORDER BY h.score DESC) = (
    SELECT array_agg(t.ctid ORDER BY t.score DESC)
    FROM strata_hybrid('notes', 'body', 'embedding', 'replication lag', note_vector(7), k => 10) t) AS literal_same
FROM strata_hybrid('notes', 'body', 'embedding', 'replication lag', note_vector(7)::text, k => 10) h;
SELECT count(*), count(text_rank), count(vector_rank)
FROM strata_hybrid('notes', 'body', 'embedding', 'replication lag', NULL, k => 5);

-- Rows in memtables (inserted after the build) and deletions (before and after VACUUM) are
-- fused like the rest.
INSERT INTO notes SELECT i, note_text(i, 2 + i), note_vector(i) FROM generate_series(301, 380) AS i;
SELECT * FROM all_match() WHERE NOT ok;
DELETE FROM notes WHERE id % 7 = 0;
SELECT * FROM all_match() WHERE NOT ok;
VACUUM notes;
SELECT strata_flush('notes_bm25') >= 0 AS flushed, strata_flush('notes_embedding') >= 0 AS flushed;
SELECT * FROM all_match() WHERE NOT ok;
SELECT count(*) FROM all_match() WHERE ok;

-- Bad arguments.
\set VERBOSITY terse
SELECT * FROM strata_hybrid('notes', 'body', 'embedding', 'lag', note_vector(1), k => 0);
SELECT * FROM strata_hybrid('notes', 'body', 'embedding', 'lag', note_vector(1), k => 10, depth => 5);
SELECT * FROM strata_hybrid('notes', 'body', 'embedding', 'lag', note_vector(1), rrf_k => -1);
SELECT * FROM strata_hybrid('notes', 'body', 'embedding', 'lag', note_vector(1), text_weight => -1);
SELECT * FROM strata_hybrid('notes', 'body', 'embedding', 'lag', note_vector(1), vector_weight => 'NaN');
SELECT * FROM strata_hybrid('notes', 'body', 'embedding', 'lag', note_vector(1), k => NULL);
SELECT * FROM strata_hybrid('notes', 'title', 'embedding', 'lag', note_vector(1));
SELECT * FROM strata_hybrid('notes', 'body', 'vec', 'lag', note_vector(1));
SELECT * FROM strata_hybrid('notes', 'embedding', 'body', 'lag', note_vector(1));
SELECT * FROM strata_hybrid('no_such_table', 'body', 'embedding', 'lag', note_vector(1));
SELECT * FROM strata_hybrid('notes', 'body', 'embedding', 'lag', '[1,2,3]');

\set VERBOSITY default

-- Operators and functions another role creates on the search path strata_hybrid runs with (the
-- extension's schema, public here), each a better match for an argument it passes than the
-- built-in one, are never called: it qualifies every operator and function it uses.
CREATE TABLE hybrid_before AS
SELECT q.query, h.ctid AS row_ctid, h.score, h.text_rank, h.text_score, h.vector_rank, h.vector_distance
FROM (VALUES ('replication lag', 7), ('vacuum', 42)) AS q (query, seed),
    LATERAL strata_hybrid('notes', 'body', 'embedding', q.query, note_vector(q.seed), k => 10) h;
INSERT INTO hybrid_before
SELECT 'as text', h.* FROM strata_hybrid('notes', 'body', 'embedding', 'lag', note_vector(3)::text, k => 10) h;
CREATE ROLE hybrid_intruder;
GRANT CREATE ON SCHEMA public TO hybrid_intruder;
SET ROLE hybrid_intruder;
CREATE FUNCTION public.intruder(float8, bigint) RETURNS float8 LANGUAGE plpgsql
    AS $$ BEGIN RAISE EXCEPTION 'intruder: +(float8, bigint)'; END $$;
CREATE OPERATOR public.+ (LEFTARG = float8, RIGHTARG = bigint, FUNCTION = public.intruder);
CREATE FUNCTION public.intruder(oid, regclass) RETURNS bool LANGUAGE plpgsql
    AS $$ BEGIN RAISE EXCEPTION 'intruder: =(oid, regclass)'; END $$;
CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = regclass, FUNCTION = public.intruder);
CREATE FUNCTION public.intruder(float8, integer) RETURNS bool LANGUAGE plpgsql
    AS $$ BEGIN RAISE EXCEPTION 'intruder: >=(float8, integer)'; END $$;
CREATE OPERATOR public.>= (LEFTARG = float8, RIGHTARG = integer, FUNCTION = public.intruder);
CREATE FUNCTION public.format(text, name, name) RETURNS text LANGUAGE plpgsql
    AS $$ BEGIN RAISE EXCEPTION 'intruder: format(text, name, name)'; END $$;
CREATE FUNCTION public.quote_ident(name) RETURNS text LANGUAGE plpgsql
    AS $$ BEGIN RAISE EXCEPTION 'intruder: quote_ident(name)'; END $$;
RESET ROLE;
CREATE TABLE hybrid_after AS
SELECT q.query, h.ctid AS row_ctid, h.score, h.text_rank, h.text_score, h.vector_rank, h.vector_distance
FROM (VALUES ('replication lag', 7), ('vacuum', 42)) AS q (query, seed),
    LATERAL strata_hybrid('notes', 'body', 'embedding', q.query, note_vector(q.seed), k => 10) h;
INSERT INTO hybrid_after
SELECT 'as text', h.* FROM strata_hybrid('notes', 'body', 'embedding', 'lag', note_vector(3)::text, k => 10) h;
SELECT (SELECT count(*) FROM hybrid_before) AS rows,
       (SELECT count(*) FROM (TABLE hybrid_before EXCEPT ALL TABLE hybrid_after) d) AS missing,
       (SELECT count(*) FROM (TABLE hybrid_after EXCEPT ALL TABLE hybrid_before) d) AS extra;
\set VERBOSITY terse
SELECT * FROM strata_hybrid('notes', 'embedding', 'body', 'lag', note_vector(1));
SELECT * FROM strata_hybrid('notes', 'body', 'embedding', 'lag', note_vector(1), text_weight => -1);
\set VERBOSITY default
DROP OWNED BY hybrid_intruder;
DROP ROLE hybrid_intruder;
DROP TABLE hybrid_before, hybrid_after;
\set VERBOSITY terse

-- It runs with the caller's rights.
CREATE ROLE hybrid_reader;
SET ROLE hybrid_reader;
SELECT * FROM strata_hybrid('notes', 'body', 'embedding', 'lag', note_vector(1));
RESET ROLE;
\set VERBOSITY default
DROP ROLE hybrid_reader;

DROP TABLE notes;
DROP FUNCTION all_match, matches_reference, reference_hybrid, note_text, note_vector, hybrid_plan;
