-- A bm25 index's text search configuration is resolved once, at CREATE INDEX, and kept as its
-- OID (issue 39): inserts, scans and <@> scoring after the `text_config` name has come to mean
-- another configuration still tokenise with the index's own; REINDEX keeps it; the configuration
-- cannot be dropped while the index uses it.

CREATE SCHEMA cfg_stemmed;
CREATE SCHEMA cfg_plain;
-- Two configurations of the same name: one stems English words, the other does not.
CREATE TEXT SEARCH CONFIGURATION cfg_stemmed.tok (COPY = pg_catalog.english);
CREATE TEXT SEARCH CONFIGURATION cfg_plain.tok (COPY = pg_catalog.simple);
CREATE TABLE cfg_docs (id int, body text);
INSERT INTO cfg_docs VALUES (1, 'running dogs'), (2, 'the runner ran away'), (3, 'run');

-- Qualified: from PostgreSQL 17 on, CREATE INDEX resolves names with search_path = pg_catalog,
-- pg_temp whatever the session's path, so an unqualified 'tok' would not be found.
CREATE INDEX cfg_docs_bm25 ON cfg_docs USING bm25 (body) WITH (text_config = 'cfg_stemmed.tok');

-- The schemas trade names: 'cfg_stemmed.tok' now names the configuration that does not stem, and
-- so does 'tok' on this session's search path.
ALTER SCHEMA cfg_stemmed RENAME TO cfg_was_stemmed;
ALTER SCHEMA cfg_plain RENAME TO cfg_stemmed;
SET search_path = cfg_stemmed, public;
SELECT pg_describe_object(refclassid, refobjid, refobjsubid) AS index_depends_on FROM pg_depend
WHERE classid = 'pg_class'::regclass AND objid = 'public.cfg_docs_bm25'::regclass
  AND refclassid = 'pg_ts_config'::regclass;
SELECT to_tsvector('tok', 'runs running');
INSERT INTO cfg_docs VALUES (4, 'runs running'), (5, 'dogs running far');
SET enable_seqscan = off;
-- 'running' is the lexeme 'run' to the index: every row holding a form of it, stemmed alike.
SELECT id FROM cfg_docs ORDER BY body <@> 'running' LIMIT 10;
SELECT id, round((-(body <@> to_bm25query('running', 'public.cfg_docs_bm25')))::numeric, 4) AS score
FROM cfg_docs ORDER BY body <@> to_bm25query('running', 'public.cfg_docs_bm25') LIMIT 10;
SELECT round((-('a running start' <@> to_bm25query('runs', 'public.cfg_docs_bm25')))::numeric, 4) AS scored_outside_a_scan;
-- Flushed into segments, and rebuilt: the same.
SELECT strata_flush('public.cfg_docs_bm25') >= 1 AS flushed;
SELECT id FROM cfg_docs ORDER BY body <@> 'running' LIMIT 10;
REINDEX INDEX public.cfg_docs_bm25;
SELECT id FROM cfg_docs ORDER BY body <@> 'running' LIMIT 10;
RESET enable_seqscan;

-- The index depends on its configuration.
\set VERBOSITY terse
DROP TEXT SEARCH CONFIGURATION cfg_was_stemmed.tok;
\set VERBOSITY default
RESET search_path;
DROP TABLE cfg_docs;
DROP SCHEMA cfg_was_stemmed, cfg_stemmed CASCADE;
