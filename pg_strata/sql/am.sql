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

-- bit(n): rows are stored as packed bits (32 a word), so Hamming and Jaccard distances are exact
-- popcounts over the stored rows; kind = 'hnsw', 'flat' without bits, or 'ivf' (lists of the
-- packed rows around bit-string centroids; quantized codes cannot estimate these distances).
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

-- Filter columns: the key columns after the vector, e.g.
--   CREATE INDEX ON items USING strata (embedding vector_cosine_ops, tenant_id, tags, created_at);
-- Their default operator classes list the operators whose WHERE clauses reach the index as scan
-- keys; the index applies them before it computes distances (and the executor rechecks each row).
-- Strategy numbers (strata_lsm::scan::keys::FilterOp): 1 <, 2 <=, 3 =, 4 >=, 5 >, 6 &&, 7 @>.
CREATE FUNCTION strata_filter_support(internal) RETURNS internal AS 'MODULE_PATHNAME' LANGUAGE C;

CREATE OPERATOR FAMILY strata_integer_ops USING strata;
CREATE OPERATOR CLASS strata_int2_ops DEFAULT FOR TYPE int2 USING strata FAMILY strata_integer_ops AS
    OPERATOR 1 < (int2, int2),
    OPERATOR 2 <= (int2, int2),
    OPERATOR 3 = (int2, int2),
    OPERATOR 4 >= (int2, int2),
    OPERATOR 5 > (int2, int2),
    FUNCTION 1 strata_filter_support(internal);
CREATE OPERATOR CLASS strata_int4_ops DEFAULT FOR TYPE int4 USING strata FAMILY strata_integer_ops AS
    OPERATOR 1 < (int4, int4),
    OPERATOR 2 <= (int4, int4),
    OPERATOR 3 = (int4, int4),
    OPERATOR 4 >= (int4, int4),
    OPERATOR 5 > (int4, int4),
    FUNCTION 1 strata_filter_support(internal);
CREATE OPERATOR CLASS strata_int8_ops DEFAULT FOR TYPE int8 USING strata FAMILY strata_integer_ops AS
    OPERATOR 1 < (int8, int8),
    OPERATOR 2 <= (int8, int8),
    OPERATOR 3 = (int8, int8),
    OPERATOR 4 >= (int8, int8),
    OPERATOR 5 > (int8, int8),
    FUNCTION 1 strata_filter_support(internal);
ALTER OPERATOR FAMILY strata_integer_ops USING strata ADD
    OPERATOR 1 < (int2, int4),
    OPERATOR 2 <= (int2, int4),
    OPERATOR 3 = (int2, int4),
    OPERATOR 4 >= (int2, int4),
    OPERATOR 5 > (int2, int4),
    OPERATOR 1 < (int2, int8),
    OPERATOR 2 <= (int2, int8),
    OPERATOR 3 = (int2, int8),
    OPERATOR 4 >= (int2, int8),
    OPERATOR 5 > (int2, int8),
    OPERATOR 1 < (int4, int2),
    OPERATOR 2 <= (int4, int2),
    OPERATOR 3 = (int4, int2),
    OPERATOR 4 >= (int4, int2),
    OPERATOR 5 > (int4, int2),
    OPERATOR 1 < (int4, int8),
    OPERATOR 2 <= (int4, int8),
    OPERATOR 3 = (int4, int8),
    OPERATOR 4 >= (int4, int8),
    OPERATOR 5 > (int4, int8),
    OPERATOR 1 < (int8, int2),
    OPERATOR 2 <= (int8, int2),
    OPERATOR 3 = (int8, int2),
    OPERATOR 4 >= (int8, int2),
    OPERATOR 5 > (int8, int2),
    OPERATOR 1 < (int8, int4),
    OPERATOR 2 <= (int8, int4),
    OPERATOR 3 = (int8, int4),
    OPERATOR 4 >= (int8, int4),
    OPERATOR 5 > (int8, int4);

CREATE OPERATOR FAMILY strata_timestamp_ops USING strata;
CREATE OPERATOR CLASS strata_timestamp_ops DEFAULT FOR TYPE timestamp USING strata FAMILY strata_timestamp_ops AS
    OPERATOR 1 < (timestamp, timestamp),
    OPERATOR 2 <= (timestamp, timestamp),
    OPERATOR 3 = (timestamp, timestamp),
    OPERATOR 4 >= (timestamp, timestamp),
    OPERATOR 5 > (timestamp, timestamp),
    FUNCTION 1 strata_filter_support(internal);
CREATE OPERATOR FAMILY strata_timestamptz_ops USING strata;
CREATE OPERATOR CLASS strata_timestamptz_ops DEFAULT FOR TYPE timestamptz USING strata FAMILY strata_timestamptz_ops AS
    OPERATOR 1 < (timestamptz, timestamptz),
    OPERATOR 2 <= (timestamptz, timestamptz),
    OPERATOR 3 = (timestamptz, timestamptz),
    OPERATOR 4 >= (timestamptz, timestamptz),
    OPERATOR 5 > (timestamptz, timestamptz),
    FUNCTION 1 strata_filter_support(internal);

-- Texts: equality only (kept as 64-bit hashes of their bytes; deterministic collations only).
CREATE OPERATOR CLASS strata_text_ops DEFAULT FOR TYPE text USING strata AS
    OPERATOR 3 = (text, text),
    FUNCTION 1 strata_filter_support(internal);

-- Arrays of integers or texts: overlap and containment.
CREATE OPERATOR CLASS strata_array_ops DEFAULT FOR TYPE anyarray USING strata AS
    OPERATOR 6 && (anyarray, anyarray),
    OPERATOR 7 @> (anyarray, anyarray),
    FUNCTION 1 strata_filter_support(internal);

-- The marker of an OR of filter-column conditions (index/paths.rs): the planner hands such an OR to
-- the index as a lossy index condition `embedding <?> '<predicate as JSON>'` on the vector column
-- (strategy 8 of every vector operator family). Its function is always true: the OR itself stays a
-- filter the executor applies to each row.
CREATE FUNCTION strata_filter_marker(vector, text) RETURNS bool
    AS 'MODULE_PATHNAME', 'strata_filter_marker' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OPERATOR <?> (LEFTARG = vector, RIGHTARG = text, FUNCTION = strata_filter_marker);
CREATE FUNCTION strata_filter_marker(halfvec, text) RETURNS bool
    AS 'MODULE_PATHNAME', 'strata_filter_marker' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OPERATOR <?> (LEFTARG = halfvec, RIGHTARG = text, FUNCTION = strata_filter_marker);
CREATE FUNCTION strata_filter_marker(bit, text) RETURNS bool
    AS 'MODULE_PATHNAME', 'strata_filter_marker' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OPERATOR <?> (LEFTARG = bit, RIGHTARG = text, FUNCTION = strata_filter_marker);
CREATE FUNCTION strata_filter_marker(sparsevec, text) RETURNS bool
    AS 'MODULE_PATHNAME', 'strata_filter_marker' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OPERATOR <?> (LEFTARG = sparsevec, RIGHTARG = text, FUNCTION = strata_filter_marker);
ALTER OPERATOR FAMILY vector_l2_ops USING strata ADD OPERATOR 8 <?> (vector, text);
ALTER OPERATOR FAMILY vector_ip_ops USING strata ADD OPERATOR 8 <?> (vector, text);
ALTER OPERATOR FAMILY vector_cosine_ops USING strata ADD OPERATOR 8 <?> (vector, text);
ALTER OPERATOR FAMILY vector_l1_ops USING strata ADD OPERATOR 8 <?> (vector, text);
ALTER OPERATOR FAMILY halfvec_l2_ops USING strata ADD OPERATOR 8 <?> (halfvec, text);
ALTER OPERATOR FAMILY halfvec_ip_ops USING strata ADD OPERATOR 8 <?> (halfvec, text);
ALTER OPERATOR FAMILY halfvec_cosine_ops USING strata ADD OPERATOR 8 <?> (halfvec, text);
ALTER OPERATOR FAMILY halfvec_l1_ops USING strata ADD OPERATOR 8 <?> (halfvec, text);
ALTER OPERATOR FAMILY bit_hamming_ops USING strata ADD OPERATOR 8 <?> (bit, text);
ALTER OPERATOR FAMILY bit_jaccard_ops USING strata ADD OPERATOR 8 <?> (bit, text);
ALTER OPERATOR FAMILY sparsevec_l2_ops USING strata ADD OPERATOR 8 <?> (sparsevec, text);
ALTER OPERATOR FAMILY sparsevec_ip_ops USING strata ADD OPERATOR 8 <?> (sparsevec, text);
ALTER OPERATOR FAMILY sparsevec_cosine_ops USING strata ADD OPERATOR 8 <?> (sparsevec, text);
ALTER OPERATOR FAMILY sparsevec_l1_ops USING strata ADD OPERATOR 8 <?> (sparsevec, text);
