-- pg_strata: the bm25 index access method (BM25 ranking of text), the bm25query type and the
-- <@> operator, with pg_textsearch's SQL surface:
--   CREATE INDEX docs_bm25 ON docs USING bm25 (body) WITH (text_config = 'english', k1 = 1.2, b = 0.75);
--   SELECT id FROM docs ORDER BY body <@> 'postgres replication lag' LIMIT 10;
--   SELECT id, body <@> to_bm25query('replication lag', 'docs_bm25') AS score FROM docs ORDER BY score LIMIT 10;
-- <@> is the negative BM25 score, so ascending order is best first.

CREATE TYPE bm25query;
CREATE FUNCTION bm25query_in(cstring) RETURNS bm25query
    AS 'MODULE_PATHNAME', 'strata_bm25query_in' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION bm25query_out(bm25query) RETURNS cstring
    AS 'MODULE_PATHNAME', 'strata_bm25query_out' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE TYPE bm25query (
    INPUT = bm25query_in,
    OUTPUT = bm25query_out,
    INTERNALLENGTH = VARIABLE,
    STORAGE = extended
);
COMMENT ON TYPE bm25query IS 'pg_strata: a BM25 query text, optionally bound to a bm25 index';

CREATE FUNCTION to_bm25query(query text) RETURNS bm25query
    AS 'MODULE_PATHNAME', 'strata_to_bm25query' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION to_bm25query(query text, index_name text) RETURNS bm25query
    AS 'MODULE_PATHNAME', 'strata_to_bm25query_bound' LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION strata_bm25_score(text, bm25query) RETURNS float8
    AS 'MODULE_PATHNAME', 'strata_bm25_score' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION strata_bm25_score_text(text, text) RETURNS float8
    AS 'MODULE_PATHNAME', 'strata_bm25_score_text' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE OPERATOR <@> (LEFTARG = text, RIGHTARG = bm25query, PROCEDURE = strata_bm25_score);
CREATE OPERATOR <@> (LEFTARG = text, RIGHTARG = text, PROCEDURE = strata_bm25_score_text);

CREATE FUNCTION strata_bm25_amhandler(internal) RETURNS index_am_handler
    AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE ACCESS METHOD bm25 TYPE INDEX HANDLER strata_bm25_amhandler;
COMMENT ON ACCESS METHOD bm25 IS 'pg_strata: BM25 text ranking over memtables and immutable text segments';

CREATE FUNCTION strata_bm25_support(internal) RETURNS internal AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE OPERATOR CLASS text_bm25_ops DEFAULT FOR TYPE text USING bm25 AS
    OPERATOR 1 <@> (text, bm25query) FOR ORDER BY float_ops,
    OPERATOR 2 <@> (text, text) FOR ORDER BY float_ops,
    FUNCTION 1 strata_bm25_support(internal);
