-- pg_strata: hybrid (BM25 + vector) search in one call, fused by reciprocal rank fusion.
--
--   SELECT d.id, h.score, h.text_rank, h.vector_rank
--   FROM strata_hybrid('docs', 'body', 'embedding', 'replication lag', $1::vector, k => 10) h
--   JOIN docs d ON d.ctid = h.ctid ORDER BY h.score DESC;
--
-- Each branch is an ordered index scan reading `depth` rows: `body <@> to_bm25query(query,
-- <the bm25 index on body>)` and `embedding <op> query_vector`, where <op> is the ORDER BY
-- operator of the index on `embedding` (a strata index first, else any index with an ORDER BY
-- operator for the column's type). A row's fused score is
--   text_weight / (rrf_k + text_rank) + vector_weight / (rrf_k + vector_rank),
-- a missing branch adding 0; ranks start at 1 and equal scores are ranked by ctid. The result is
-- the `k` best rows, best first (ties: the better of the two ranks, then ctid), each with
-- `text_score` (the positive BM25 score) and `vector_distance`, NULL where the row is not in that
-- branch. A NULL `query` or `query_vector` leaves that branch out. The function runs with the
-- caller's rights, so it reads only what the caller may SELECT; ctids name row versions of the
-- caller's snapshot (the function is STABLE), so join on them in the same statement.
--
-- Every operator and function the bodies use is qualified (`OPERATOR(pg_catalog.=)`,
-- `pg_catalog.format`, `@extschema@.to_bm25query`): the functions run with the search path of
-- CREATE EXTENSION (`SET search_path FROM CURRENT`), and an operator or function another role
-- creates in a schema on that path could otherwise match the arguments better than the built-in
-- one and be called instead.

CREATE FUNCTION strata_hybrid(
    relation regclass,
    text_column name,
    vector_column name,
    query text,
    query_vector anyelement,
    k integer DEFAULT 10,
    depth integer DEFAULT NULL,
    rrf_k integer DEFAULT 60,
    text_weight float8 DEFAULT 1.0,
    vector_weight float8 DEFAULT 1.0)
RETURNS TABLE (ctid tid, score float8, text_rank bigint, text_score float8, vector_rank bigint, vector_distance float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path FROM CURRENT
AS $function$
DECLARE
    text_attnum smallint;
    vector_attnum smallint;
    vector_type oid;
    text_index regclass;
    distance_operator text;
    rows_per_branch integer;
    strata_schema text := '@extschema@';
    text_branch text;
    vector_branch text;
BEGIN
    IF relation IS NULL OR text_column IS NULL OR vector_column IS NULL OR k IS NULL OR rrf_k IS NULL
       OR text_weight IS NULL OR vector_weight IS NULL THEN
        RAISE EXCEPTION 'strata_hybrid: relation, columns, k, rrf_k and weights must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF @extschema@.strata_is_distributed(relation) THEN
        RAISE EXCEPTION 'strata_hybrid: % is a Citus distributed table, whose ctids do not identify rows', relation
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Use strata_hybrid_keys(relation, key_column, text_column, vector_column, query, query_vector, ...).';
    END IF;
    IF k OPERATOR(pg_catalog.<) 1 OR k OPERATOR(pg_catalog.>) 100000 THEN
        RAISE EXCEPTION 'strata_hybrid: k must be between 1 and 100000, not %', k
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    rows_per_branch := coalesce(depth, greatest(4 OPERATOR(pg_catalog.*) k, 40));
    IF rows_per_branch OPERATOR(pg_catalog.<) k OR rows_per_branch OPERATOR(pg_catalog.>) 1000000 THEN
        RAISE EXCEPTION 'strata_hybrid: depth must be between k (%) and 1000000, not %', k, rows_per_branch
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF rrf_k OPERATOR(pg_catalog.<) 0 THEN
        RAISE EXCEPTION 'strata_hybrid: rrf_k must be 0 or more, not %', rrf_k
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT (text_weight OPERATOR(pg_catalog.>=) 0::float8 AND vector_weight OPERATOR(pg_catalog.>=) 0::float8
            AND text_weight OPERATOR(pg_catalog.<) 'infinity'::float8
            AND vector_weight OPERATOR(pg_catalog.<) 'infinity'::float8) THEN
        RAISE EXCEPTION 'strata_hybrid: weights must be finite and 0 or more, not % and %', text_weight, vector_weight
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    SELECT a.attnum INTO text_attnum FROM pg_catalog.pg_attribute a
    WHERE a.attrelid OPERATOR(pg_catalog.=) relation::oid AND a.attname OPERATOR(pg_catalog.=) text_column
      AND a.attnum OPERATOR(pg_catalog.>) 0::smallint AND NOT a.attisdropped;
    IF text_attnum IS NULL THEN
        RAISE EXCEPTION 'strata_hybrid: column "%" of relation % does not exist', text_column, relation
            USING ERRCODE = 'undefined_column';
    END IF;
    SELECT a.attnum, a.atttypid INTO vector_attnum, vector_type FROM pg_catalog.pg_attribute a
    WHERE a.attrelid OPERATOR(pg_catalog.=) relation::oid AND a.attname OPERATOR(pg_catalog.=) vector_column
      AND a.attnum OPERATOR(pg_catalog.>) 0::smallint AND NOT a.attisdropped;
    IF vector_attnum IS NULL THEN
        RAISE EXCEPTION 'strata_hybrid: column "%" of relation % does not exist', vector_column, relation
            USING ERRCODE = 'undefined_column';
    END IF;

    -- The bm25 index on the text column (a plain one: no predicate, one column).
    SELECT c.oid::regclass INTO text_index
    FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.indexrelid
    JOIN pg_catalog.pg_am am ON am.oid OPERATOR(pg_catalog.=) c.relam
    WHERE i.indrelid OPERATOR(pg_catalog.=) relation::oid AND am.amname OPERATOR(pg_catalog.=) 'bm25'::name
      AND i.indnatts OPERATOR(pg_catalog.=) 1::smallint AND i.indkey[0] OPERATOR(pg_catalog.=) text_attnum
      AND i.indisvalid AND i.indpred IS NULL
    ORDER BY c.oid LIMIT 1;
    IF text_index IS NULL AND query IS NOT NULL THEN
        RAISE EXCEPTION 'strata_hybrid: no bm25 index on %.%', relation, pg_catalog.quote_ident(text_column)
            USING ERRCODE = 'undefined_object',
                  HINT = pg_catalog.format('CREATE INDEX ON %s USING bm25 (%I);', relation, text_column);
    END IF;

    -- The ORDER BY operator of an index on the vector column, for its type.
    SELECT pg_catalog.format('OPERATOR(%I.%s)', n.nspname, o.oprname) INTO distance_operator
    FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.indexrelid
    JOIN pg_catalog.pg_am am ON am.oid OPERATOR(pg_catalog.=) c.relam
    JOIN pg_catalog.pg_opclass opc ON opc.oid OPERATOR(pg_catalog.=) i.indclass[0]
    JOIN pg_catalog.pg_amop ao ON ao.amopfamily OPERATOR(pg_catalog.=) opc.opcfamily
                               AND ao.amoppurpose OPERATOR(pg_catalog.=) 'o'::"char"
    JOIN pg_catalog.pg_operator o ON o.oid OPERATOR(pg_catalog.=) ao.amopopr
    JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) o.oprnamespace
    WHERE i.indrelid OPERATOR(pg_catalog.=) relation::oid AND i.indkey[0] OPERATOR(pg_catalog.=) vector_attnum
      AND i.indisvalid AND i.indpred IS NULL AND o.oprleft OPERATOR(pg_catalog.=) vector_type
    ORDER BY am.amname OPERATOR(pg_catalog.=) 'strata'::name DESC, c.oid, ao.amopstrategy LIMIT 1;
    IF distance_operator IS NULL AND query_vector IS NOT NULL THEN
        RAISE EXCEPTION 'strata_hybrid: no index with a distance ordering on %.%', relation,
            pg_catalog.quote_ident(vector_column)
            USING ERRCODE = 'undefined_object',
                  HINT = pg_catalog.format('CREATE INDEX ON %s USING strata (%I);', relation, vector_column);
    END IF;

    text_branch := CASE WHEN query IS NULL THEN 'SELECT NULL::tid AS ctid, NULL::float8 AS score WHERE false'
        ELSE pg_catalog.format('SELECT t.ctid, t.%I OPERATOR(%s.<@>) %s.to_bm25query($1, %L) AS score '
                               'FROM %s t ORDER BY score LIMIT $3',
                               text_column, strata_schema, strata_schema, text_index::text, relation) END;
    vector_branch := CASE WHEN query_vector IS NULL THEN 'SELECT NULL::tid AS ctid, NULL::float8 AS distance WHERE false'
        ELSE pg_catalog.format('SELECT t.ctid, (t.%I %s $2)::float8 AS distance FROM %s t ORDER BY distance LIMIT $3',
                               vector_column, distance_operator, relation) END;
    RETURN QUERY EXECUTE pg_catalog.format($query$
        WITH text_hits AS MATERIALIZED (
            SELECT hit.ctid, hit.score, pg_catalog.row_number() OVER (ORDER BY hit.score, hit.ctid) AS rank
            FROM (%s) hit
        ), vector_hits AS MATERIALIZED (
            SELECT hit.ctid, hit.distance, pg_catalog.row_number() OVER (ORDER BY hit.distance, hit.ctid) AS rank
            FROM (%s) hit
        )
        SELECT coalesce(th.ctid, vh.ctid),
               coalesce($5 OPERATOR(pg_catalog./) ($4 OPERATOR(pg_catalog.+) th.rank::float8), 0::float8)
               OPERATOR(pg_catalog.+)
               coalesce($6 OPERATOR(pg_catalog./) ($4 OPERATOR(pg_catalog.+) vh.rank::float8), 0::float8),
               th.rank, OPERATOR(pg_catalog.-) th.score, vh.rank, vh.distance
        FROM text_hits th FULL JOIN vector_hits vh ON th.ctid OPERATOR(pg_catalog.=) vh.ctid
        ORDER BY 2 DESC, least(th.rank, vh.rank), 1
        LIMIT $7
        $query$, text_branch, vector_branch)
    USING query, query_vector, rows_per_branch, rrf_k::float8, text_weight, vector_weight, k;
END
$function$;
COMMENT ON FUNCTION strata_hybrid(regclass, name, name, text, anyelement, integer, integer, integer, float8, float8) IS
    'pg_strata: the k best rows of a BM25 and a vector index scan fused by reciprocal rank fusion';

-- The same with the query vector given as text ('[0.1, 0.2, …]', a string parameter, or NULL),
-- read as the vector column's type: an untyped literal resolves to this form.
CREATE FUNCTION strata_hybrid(
    relation regclass,
    text_column name,
    vector_column name,
    query text,
    query_vector text,
    k integer DEFAULT 10,
    depth integer DEFAULT NULL,
    rrf_k integer DEFAULT 60,
    text_weight float8 DEFAULT 1.0,
    vector_weight float8 DEFAULT 1.0)
RETURNS TABLE (ctid tid, score float8, text_rank bigint, text_score float8, vector_rank bigint, vector_distance float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path FROM CURRENT
AS $function$
DECLARE
    vector_type regtype;
    strata_schema text := '@extschema@';
BEGIN
    IF relation IS NULL OR vector_column IS NULL THEN
        RAISE EXCEPTION 'strata_hybrid: relation, columns, k, rrf_k and weights must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT a.atttypid::regtype INTO vector_type FROM pg_catalog.pg_attribute a
    WHERE a.attrelid OPERATOR(pg_catalog.=) relation::oid AND a.attname OPERATOR(pg_catalog.=) vector_column
      AND a.attnum OPERATOR(pg_catalog.>) 0::smallint AND NOT a.attisdropped;
    IF vector_type IS NULL THEN
        RAISE EXCEPTION 'strata_hybrid: column "%" of relation % does not exist', vector_column, relation
            USING ERRCODE = 'undefined_column';
    END IF;
    -- A text column would resolve to this form again, forever.
    IF (SELECT t.typcategory OPERATOR(pg_catalog.=) 'S'::"char" FROM pg_catalog.pg_type t
        WHERE t.oid OPERATOR(pg_catalog.=) vector_type::oid) THEN
        RAISE EXCEPTION 'strata_hybrid: column "%" of relation % is not a vector column (its type is %)',
            vector_column, relation, vector_type
            USING ERRCODE = 'datatype_mismatch';
    END IF;
    RETURN QUERY EXECUTE pg_catalog.format(
        'SELECT * FROM %s.strata_hybrid($1, $2, $3, $4, $5::%s, $6, $7, $8, $9, $10)', strata_schema, vector_type)
    USING relation, text_column, vector_column, query, query_vector, k, depth, rrf_k, text_weight, vector_weight;
END
$function$;
COMMENT ON FUNCTION strata_hybrid(regclass, name, name, text, text, integer, integer, integer, float8, float8) IS
    'pg_strata: strata_hybrid with the query vector as text, read as the vector column''s type';
