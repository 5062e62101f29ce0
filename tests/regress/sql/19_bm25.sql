-- The bm25 access method: options, and top-10 ids and scores against a reference BM25 written in
-- SQL from the formula (issue 17) over PostgreSQL's own to_tsvector output, through a build,
-- inserts into memtables, flushes, deletes + VACUUM, merges and a REINDEX.

CREATE TABLE articles (id int PRIMARY KEY, body text);

-- Bad options are rejected with errors that name the problem.
CREATE INDEX ON articles USING bm25 (body) WITH (k1 = -1);
CREATE INDEX ON articles USING bm25 (body) WITH (b = 2);
CREATE INDEX ON articles USING bm25 (body) WITH (k1 = 1.2345);
CREATE INDEX ON articles USING bm25 (body) WITH (text_config = 'klingon');
CREATE INDEX ON articles USING bm25 (body) WITH (memtable_slots = 1);
CREATE INDEX ON articles USING bm25 (body) WITH (nonsense = 1);

-- A corpus of sentences drawn from a small vocabulary (repeated words give tf > 1, lengths
-- vary), plus rows with only stop words, an empty body and a NULL body.
CREATE FUNCTION sentence(seed int) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT string_agg((ARRAY['postgres', 'replication', 'lag', 'index', 'vectors', 'searching',
                             'ranking', 'wal', 'standby', 'queries', 'planner', 'vacuum', 'tables',
                             'segment', 'merges', 'memtable', 'the', 'of', 'crash', 'recovery',
                             'latency', 'throughput', 'postgres', 'index'])
                      [1 + abs(hashint4(seed * 131 + j)) % 24], ' ')
    FROM generate_series(1, 2 + abs(hashint4(seed)) % 14) AS j
$$;
INSERT INTO articles SELECT i, sentence(i) FROM generate_series(1, 3000) AS i;
INSERT INTO articles VALUES (3001, 'the of the'), (3002, ''), (3003, NULL);

-- The reference: N and avgdl over the indexed (non-NULL) rows, df, IDF = ln(1 + (N - df + 0.5) /
-- (df + 0.5)), score = sum over the query's distinct lexemes of IDF * tf * (k1 + 1) / (tf + k1 *
-- (1 - b + b * dl / avgdl)); top k by score, ties by ctid (the index's order among equal scores).
CREATE FUNCTION reference_bm25(query text, k int, k1 float8 DEFAULT 1.2, b float8 DEFAULT 0.75)
RETURNS TABLE (id int, score float8) LANGUAGE sql STABLE AS $$
    WITH rows AS (SELECT a.id, a.ctid, to_tsvector('english', a.body) AS v FROM articles a WHERE a.body IS NOT NULL),
    terms AS MATERIALIZED (SELECT r.id, t.lexeme, array_length(t.positions, 1) AS tf FROM rows r, unnest(r.v) AS t),
    lengths AS MATERIALIZED (SELECT r.id, coalesce(sum(t.tf), 0) AS dl FROM rows r LEFT JOIN terms t USING (id) GROUP BY r.id),
    totals AS (SELECT count(*)::float8 AS n, avg(dl)::float8 AS avgdl FROM lengths),
    wanted AS (SELECT DISTINCT t.lexeme FROM unnest(to_tsvector('english', query)) AS t),
    dfs AS (SELECT w.lexeme, count(t.id)::float8 AS df FROM wanted w LEFT JOIN terms t USING (lexeme) GROUP BY w.lexeme),
    scored AS (
        SELECT t.id, sum(ln(1 + (totals.n - d.df + 0.5) / (d.df + 0.5)) * t.tf * (k1 + 1)
                         / (t.tf + k1 * (1 - b + b * l.dl / totals.avgdl))) AS score
        FROM terms t JOIN dfs d USING (lexeme) JOIN lengths l USING (id), totals
        GROUP BY t.id)
    SELECT s.id, s.score FROM scored s JOIN rows r USING (id) ORDER BY s.score DESC, r.ctid LIMIT k
$$;

-- The index's top k (implicit form: the query as text), its negative scores turned back.
CREATE FUNCTION index_bm25(query text, k int) RETURNS TABLE (id int, score float8) LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('enable_seqscan', 'off', true);
    RETURN QUERY SELECT a.id, -(a.body <@> to_bm25query(query, 'articles_bm25'))
                 FROM articles a ORDER BY a.body <@> query LIMIT k;
END
$$;

-- Whether the index's top 10 equals the reference's for every query: the score at each rank
-- within a relative 1e-4, and each returned row's own reference score equal to the score the
-- index gave it (rows of equal scores may come in either order: the two sum the same terms in
-- different orders, so exact ties can differ in the last bit).
CREATE FUNCTION matches_reference(k1 float8 DEFAULT 1.2, b float8 DEFAULT 0.75) RETURNS TABLE (query text, ok bool) LANGUAGE sql AS $$
    SELECT q, (SELECT count(*) = 10 AND count(DISTINCT i.id) = 10
                      AND bool_and(abs(i.score - r.score) <= 1e-4 * r.score
                                   AND abs(i.score - own.score) <= 1e-4 * own.score)
               FROM (SELECT row_number() OVER () AS rank, * FROM index_bm25(q, 10)) i
               JOIN (SELECT row_number() OVER () AS rank, * FROM reference_bm25(q, 10, k1, b)) r USING (rank)
               JOIN reference_bm25(q, 100000, k1, b) own ON own.id = i.id)
    FROM unnest(ARRAY['postgres replication lag', 'crash recovery', 'vacuum', 'the ranking of queries',
                      'WAL standby latency throughput', 'merges segment memtable index']) AS q
$$;

CREATE INDEX articles_bm25 ON articles USING bm25 (body) WITH (text_config = 'english', k1 = 1.2, b = 0.75);
SELECT part, kind, rows, deleted FROM strata_index_stats('articles_bm25') ORDER BY part, id;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM articles ORDER BY body <@> 'postgres replication lag' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id, body <@> to_bm25query('replication lag', 'articles_bm25') AS score
    FROM articles ORDER BY score LIMIT 10;
RESET enable_seqscan;
SELECT * FROM matches_reference();
-- Exhaustive scoring (strata.bm25_block_max = off) returns the same rows and scores.
SET strata.bm25_block_max = off;
SELECT * FROM matches_reference() WHERE NOT ok;
RESET strata.bm25_block_max;

-- Scores are negative (ascending order is best first) and equal in the target list and ORDER BY.
SET enable_seqscan = off;
SELECT count(*) = 10, bool_and(score < 0) FROM (
    SELECT body <@> to_bm25query('postgres replication lag', 'articles_bm25') AS score
    FROM articles ORDER BY score LIMIT 10) s;
-- A query of stop words only matches nothing; a WHERE clause still returns LIMIT rows.
SELECT count(*) FROM (SELECT id FROM articles ORDER BY body <@> 'the of' LIMIT 10) s;
SELECT count(*), bool_and(id % 7 = 0) FROM (
    SELECT id FROM articles WHERE id % 7 = 0 ORDER BY body <@> 'postgres' LIMIT 25) s;
-- At most strata.max_scan_tuples rows come out of one scan, as out of a vector scan: the best
-- ones, in the same order as without the cap.
SELECT count(*) > 15 FROM (SELECT id FROM articles ORDER BY body <@> 'postgres') s;
SET strata.max_scan_tuples = 15;
SELECT count(*) FROM (SELECT id FROM articles ORDER BY body <@> 'postgres') s;
SELECT count(*) <= 15 FROM (SELECT id FROM articles WHERE id % 7 = 0 ORDER BY body <@> 'postgres' LIMIT 25) s;
SELECT array_agg(id) AS capped FROM (SELECT id FROM articles ORDER BY body <@> 'postgres') s \gset
RESET strata.max_scan_tuples;
SELECT array_agg(id) = :'capped' FROM (SELECT id FROM articles ORDER BY body <@> 'postgres' LIMIT 15) s;
RESET enable_seqscan;

-- Inserts land in memtables; scores use statistics over memtables and segments together.
INSERT INTO articles SELECT i, sentence(i) FROM generate_series(3004, 3600) AS i;
SELECT * FROM matches_reference();
-- Flushed into a second segment.
SELECT strata_flush('articles_bm25') >= 2;
SELECT * FROM matches_reference();
-- Deleted rows count in neither N, avgdl nor df, in memtables and segments.
INSERT INTO articles SELECT i, sentence(i) FROM generate_series(3601, 3800) AS i;
DELETE FROM articles WHERE id % 5 = 0;
VACUUM articles;
SELECT * FROM matches_reference();
SELECT strata_flush('articles_bm25') >= 2;
UPDATE articles SET body = body || ' postgres' WHERE id % 11 = 0;
VACUUM articles;
SELECT * FROM matches_reference();
-- Merges keep every row once.
SELECT strata_flush('articles_bm25') >= 1;
SELECT strata_wait_for_merges('articles_bm25');
SELECT * FROM matches_reference();
SELECT sum(rows - deleted) = (SELECT count(*) FROM articles WHERE body IS NOT NULL)
FROM strata_index_stats('articles_bm25') WHERE part <> 'total';

-- Other parameters; REINDEX.
DROP INDEX articles_bm25;
CREATE INDEX articles_bm25 ON articles USING bm25 (body) WITH (k1 = 2, b = 0.3, memtable_slots = 64);
INSERT INTO articles SELECT i, sentence(i) FROM generate_series(3801, 4000) AS i;
SELECT * FROM matches_reference(2, 0.3);
REINDEX INDEX articles_bm25;
SELECT * FROM matches_reference(2, 0.3);

-- CREATE INDEX in chunks of maintenance_work_mem: several segments, ranked as one.
DROP INDEX articles_bm25;
SET maintenance_work_mem = '1MB';
CREATE INDEX articles_bm25 ON articles USING bm25 (body);
RESET maintenance_work_mem;
SELECT count(*) > 1 AS several_segments FROM strata_index_stats('articles_bm25') WHERE part = 'segment';
SELECT * FROM matches_reference();

-- Outside an index scan the query must name its index.
SELECT 'postgres' <@> 'postgres';
SELECT to_bm25query('postgres', 'articles_pkey');
SELECT ('postgres lag' <@> to_bm25query('postgres lag', 'articles_bm25')) < 0;

DROP TABLE articles;
DROP FUNCTION sentence(int), matches_reference(float8, float8), index_bm25(text, int),
  reference_bm25(text, int, float8, float8);
