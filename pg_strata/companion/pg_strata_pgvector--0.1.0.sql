-- pg_strata_pgvector: the access methods hnsw and ivfflat, under pgvector's names and with its
-- operator class names, served by pg_strata's library. An index USING hnsw is a strata index of
-- kind hnsw, USING ivfflat one of kind ivf (docs/pgvector-compatibility.md); every strata option
-- (kind, m, ef_construction, lists, bits, memtable_rows, rerank) is accepted by both.

\echo Use "CREATE EXTENSION pg_strata_pgvector" to load this file. \quit

-- pgvector's own hnsw / ivfflat (extension "vector"), or any other access method of these names,
-- cannot coexist with these: refuse before creating anything. (Operators and functions are
-- qualified: an object of the same name on the search path must not take their place.)
DO $$
DECLARE
    taken text;
    owners text;
    n bigint;
BEGIN
    SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.amname::text), ' and ' ORDER BY a.amname),
           pg_catalog.string_agg(DISTINCT e.extname::text, ', '), pg_catalog.count(*)
      INTO taken, owners, n
      FROM pg_catalog.pg_am a
      LEFT JOIN pg_catalog.pg_depend d
             ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_am'::pg_catalog.regclass::pg_catalog.oid
            AND d.objid OPERATOR(pg_catalog.=) a.oid AND d.deptype OPERATOR(pg_catalog.=) 'e'::pg_catalog."char"
      LEFT JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
     WHERE a.amname OPERATOR(pg_catalog.=) ANY ('{hnsw,ivfflat}'::pg_catalog.name[]);
    IF taken IS NOT NULL THEN
        RAISE EXCEPTION 'pg_strata_pgvector cannot be installed: %',
                  CASE WHEN n OPERATOR(pg_catalog.=) 1 THEN pg_catalog.format('access method %s already exists', taken)
                       ELSE pg_catalog.format('access methods %s already exist', taken) END
            USING ERRCODE = 'duplicate_object',
                  DETAIL = pg_catalog.format('%s to %s.',
                                             CASE WHEN n OPERATOR(pg_catalog.=) 1 THEN 'It belongs' ELSE 'They belong' END,
                                             CASE WHEN owners IS NULL THEN 'no extension'
                                                  ELSE pg_catalog.format('extension %s', owners) END),
                  HINT = 'pgvector''s hnsw and ivfflat and pg_strata''s cannot share a database: '
                         'use USING strata next to pgvector, or drop the other access methods first.';
    END IF;
END
$$;

CREATE FUNCTION strata_hnsw_amhandler(internal) RETURNS index_am_handler
    AS 'MODULE_PATHNAME', 'strata_hnsw_amhandler' LANGUAGE C;
CREATE FUNCTION strata_ivfflat_amhandler(internal) RETURNS index_am_handler
    AS 'MODULE_PATHNAME', 'strata_ivfflat_amhandler' LANGUAGE C;
CREATE ACCESS METHOD hnsw TYPE INDEX HANDLER strata_hnsw_amhandler;
COMMENT ON ACCESS METHOD hnsw IS 'pg_strata index of kind hnsw under pgvector''s name';
CREATE ACCESS METHOD ivfflat TYPE INDEX HANDLER strata_ivfflat_amhandler;
COMMENT ON ACCESS METHOD ivfflat IS 'pg_strata index of kind ivf under pgvector''s name';

-- hnsw: pgvector's operator class names (L1: exact kinds only, as in strata).
CREATE OPERATOR CLASS vector_l2_ops DEFAULT FOR TYPE vector USING hnsw AS
    OPERATOR 1 <-> (vector, vector) FOR ORDER BY float_ops,
    FUNCTION 1 strata_vector_l2_support(internal);
CREATE OPERATOR CLASS vector_ip_ops FOR TYPE vector USING hnsw AS
    OPERATOR 1 <#> (vector, vector) FOR ORDER BY float_ops,
    FUNCTION 1 strata_vector_ip_support(internal);
CREATE OPERATOR CLASS vector_cosine_ops FOR TYPE vector USING hnsw AS
    OPERATOR 1 <=> (vector, vector) FOR ORDER BY float_ops,
    FUNCTION 1 strata_vector_cosine_support(internal);
CREATE OPERATOR CLASS vector_l1_ops FOR TYPE vector USING hnsw AS
    OPERATOR 1 <+> (vector, vector) FOR ORDER BY float_ops,
    FUNCTION 1 strata_vector_l1_support(internal);
CREATE OPERATOR CLASS halfvec_l2_ops DEFAULT FOR TYPE halfvec USING hnsw AS
    OPERATOR 1 <-> (halfvec, halfvec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_halfvec_l2_support(internal);
CREATE OPERATOR CLASS halfvec_ip_ops FOR TYPE halfvec USING hnsw AS
    OPERATOR 1 <#> (halfvec, halfvec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_halfvec_ip_support(internal);
CREATE OPERATOR CLASS halfvec_cosine_ops FOR TYPE halfvec USING hnsw AS
    OPERATOR 1 <=> (halfvec, halfvec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_halfvec_cosine_support(internal);
CREATE OPERATOR CLASS halfvec_l1_ops FOR TYPE halfvec USING hnsw AS
    OPERATOR 1 <+> (halfvec, halfvec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_halfvec_l1_support(internal);
CREATE OPERATOR CLASS bit_hamming_ops FOR TYPE bit USING hnsw AS
    OPERATOR 1 <~> (bit, bit) FOR ORDER BY float_ops,
    FUNCTION 1 strata_bit_hamming_support(internal);
CREATE OPERATOR CLASS bit_jaccard_ops FOR TYPE bit USING hnsw AS
    OPERATOR 1 <%> (bit, bit) FOR ORDER BY float_ops,
    FUNCTION 1 strata_bit_jaccard_support(internal);
CREATE OPERATOR CLASS sparsevec_l2_ops FOR TYPE sparsevec USING hnsw AS
    OPERATOR 1 <-> (sparsevec, sparsevec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_sparsevec_l2_support(internal);
CREATE OPERATOR CLASS sparsevec_ip_ops FOR TYPE sparsevec USING hnsw AS
    OPERATOR 1 <#> (sparsevec, sparsevec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_sparsevec_ip_support(internal);
CREATE OPERATOR CLASS sparsevec_cosine_ops FOR TYPE sparsevec USING hnsw AS
    OPERATOR 1 <=> (sparsevec, sparsevec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_sparsevec_cosine_support(internal);
CREATE OPERATOR CLASS sparsevec_l1_ops FOR TYPE sparsevec USING hnsw AS
    OPERATOR 1 <+> (sparsevec, sparsevec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_sparsevec_l1_support(internal);

-- ivfflat: pgvector's operator class names (no L1: ivf codes cannot estimate it, as in pgvector).
CREATE OPERATOR CLASS vector_l2_ops DEFAULT FOR TYPE vector USING ivfflat AS
    OPERATOR 1 <-> (vector, vector) FOR ORDER BY float_ops,
    FUNCTION 1 strata_vector_l2_support(internal);
CREATE OPERATOR CLASS vector_ip_ops FOR TYPE vector USING ivfflat AS
    OPERATOR 1 <#> (vector, vector) FOR ORDER BY float_ops,
    FUNCTION 1 strata_vector_ip_support(internal);
CREATE OPERATOR CLASS vector_cosine_ops FOR TYPE vector USING ivfflat AS
    OPERATOR 1 <=> (vector, vector) FOR ORDER BY float_ops,
    FUNCTION 1 strata_vector_cosine_support(internal);
CREATE OPERATOR CLASS halfvec_l2_ops DEFAULT FOR TYPE halfvec USING ivfflat AS
    OPERATOR 1 <-> (halfvec, halfvec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_halfvec_l2_support(internal);
CREATE OPERATOR CLASS halfvec_ip_ops FOR TYPE halfvec USING ivfflat AS
    OPERATOR 1 <#> (halfvec, halfvec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_halfvec_ip_support(internal);
CREATE OPERATOR CLASS halfvec_cosine_ops FOR TYPE halfvec USING ivfflat AS
    OPERATOR 1 <=> (halfvec, halfvec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_halfvec_cosine_support(internal);
-- pgvector's ivfflat has bit_hamming_ops (and no bit_jaccard_ops). A strata ivf index of a bit
-- column keeps the packed bits in lists around bit-string centroids and computes exact Hamming
-- distances, so ivfflat.probes = lists gives the exact answer.
CREATE OPERATOR CLASS bit_hamming_ops FOR TYPE bit USING ivfflat AS
    OPERATOR 1 <~> (bit, bit) FOR ORDER BY float_ops,
    FUNCTION 1 strata_bit_hamming_support(internal);
