-- pg_strata: the strata index access method and its operator classes.

CREATE FUNCTION strata_amhandler(internal) RETURNS index_am_handler
    AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE ACCESS METHOD strata TYPE INDEX HANDLER strata_amhandler;
COMMENT ON ACCESS METHOD strata IS 'pg_strata: decoupled LSM vector index (memtables + immutable segments)';

CREATE FUNCTION strata_vector_l2_support(internal) RETURNS internal AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE FUNCTION strata_vector_ip_support(internal) RETURNS internal AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE FUNCTION strata_vector_cosine_support(internal) RETURNS internal AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE FUNCTION strata_halfvec_l2_support(internal) RETURNS internal AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE FUNCTION strata_halfvec_ip_support(internal) RETURNS internal AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE FUNCTION strata_halfvec_cosine_support(internal) RETURNS internal AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE FUNCTION strata_vector_l1_support(internal) RETURNS internal AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE FUNCTION strata_halfvec_l1_support(internal) RETURNS internal AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE FUNCTION strata_bit_hamming_support(internal) RETURNS internal AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE FUNCTION strata_bit_jaccard_support(internal) RETURNS internal AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE FUNCTION strata_sparsevec_l2_support(internal) RETURNS internal AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE FUNCTION strata_sparsevec_ip_support(internal) RETURNS internal AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE FUNCTION strata_sparsevec_cosine_support(internal) RETURNS internal AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE FUNCTION strata_sparsevec_l1_support(internal) RETURNS internal AS 'MODULE_PATHNAME' LANGUAGE C;

CREATE OPERATOR CLASS vector_l2_ops DEFAULT FOR TYPE vector USING strata AS
    OPERATOR 1 <-> (vector, vector) FOR ORDER BY float_ops,
    FUNCTION 1 strata_vector_l2_support(internal);
CREATE OPERATOR CLASS vector_ip_ops FOR TYPE vector USING strata AS
    OPERATOR 1 <#> (vector, vector) FOR ORDER BY float_ops,
    FUNCTION 1 strata_vector_ip_support(internal);
CREATE OPERATOR CLASS vector_cosine_ops FOR TYPE vector USING strata AS
    OPERATOR 1 <=> (vector, vector) FOR ORDER BY float_ops,
    FUNCTION 1 strata_vector_cosine_support(internal);
-- L1 (taxicab): kind = 'hnsw' or 'flat' only; quantized codes (ivf, flat with bits) cannot
-- estimate it and CREATE INDEX refuses them.
CREATE OPERATOR CLASS vector_l1_ops FOR TYPE vector USING strata AS
    OPERATOR 1 <+> (vector, vector) FOR ORDER BY float_ops,
    FUNCTION 1 strata_vector_l1_support(internal);

CREATE OPERATOR CLASS halfvec_l2_ops DEFAULT FOR TYPE halfvec USING strata AS
    OPERATOR 1 <-> (halfvec, halfvec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_halfvec_l2_support(internal);
CREATE OPERATOR CLASS halfvec_ip_ops FOR TYPE halfvec USING strata AS
    OPERATOR 1 <#> (halfvec, halfvec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_halfvec_ip_support(internal);
CREATE OPERATOR CLASS halfvec_cosine_ops FOR TYPE halfvec USING strata AS
    OPERATOR 1 <=> (halfvec, halfvec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_halfvec_cosine_support(internal);
CREATE OPERATOR CLASS halfvec_l1_ops FOR TYPE halfvec USING strata AS
    OPERATOR 1 <+> (halfvec, halfvec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_halfvec_l1_support(internal);

-- bit(n): each bit is stored as an element 0 or 1 (f16), so Hamming and Jaccard distances are
-- exact over the stored rows; kind = 'hnsw' or 'flat' (quantized codes cannot estimate them).
CREATE OPERATOR CLASS bit_hamming_ops FOR TYPE bit USING strata AS
    OPERATOR 1 <~> (bit, bit) FOR ORDER BY float_ops,
    FUNCTION 1 strata_bit_hamming_support(internal);
CREATE OPERATOR CLASS bit_jaccard_ops FOR TYPE bit USING strata AS
    OPERATOR 1 <%> (bit, bit) FOR ORDER BY float_ops,
    FUNCTION 1 strata_bit_jaccard_support(internal);

-- sparsevec(n), n <= 16000: rows are stored densified (f32, zeros where nothing is stored), so
-- every kind works as for vector (L1: hnsw and flat only).
CREATE OPERATOR CLASS sparsevec_l2_ops FOR TYPE sparsevec USING strata AS
    OPERATOR 1 <-> (sparsevec, sparsevec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_sparsevec_l2_support(internal);
CREATE OPERATOR CLASS sparsevec_ip_ops FOR TYPE sparsevec USING strata AS
    OPERATOR 1 <#> (sparsevec, sparsevec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_sparsevec_ip_support(internal);
CREATE OPERATOR CLASS sparsevec_cosine_ops FOR TYPE sparsevec USING strata AS
    OPERATOR 1 <=> (sparsevec, sparsevec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_sparsevec_cosine_support(internal);
CREATE OPERATOR CLASS sparsevec_l1_ops FOR TYPE sparsevec USING strata AS
    OPERATOR 1 <+> (sparsevec, sparsevec) FOR ORDER BY float_ops,
    FUNCTION 1 strata_sparsevec_l1_support(internal);
