-- pg_strata: the vector, halfvec and sparsevec types, and pgvector's functions over bit.
--
-- Names, signatures, casts and operators follow pgvector (PostgreSQL License), so that client code
-- written for pgvector (psycopg + pgvector-python, SQLAlchemy, LangChain) works unchanged. Every C
-- entry point named here is implemented in pg_strata/src/types/.


-- BEGIN GENERATED vector_type(vector): sql/vector_type.sql.in, by `cargo xtask generate`
-- ===================================================================================== vector

CREATE TYPE vector;

CREATE FUNCTION vector_in(cstring, oid, integer) RETURNS vector
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION vector_out(vector) RETURNS cstring
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION vector_typmod_in(cstring[]) RETURNS integer
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION vector_recv(internal, oid, integer) RETURNS vector
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION vector_send(vector) RETURNS bytea
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE vector (
    INPUT     = vector_in,
    OUTPUT    = vector_out,
    TYPMOD_IN = vector_typmod_in,
    RECEIVE   = vector_recv,
    SEND      = vector_send,
    STORAGE   = external
);
COMMENT ON TYPE vector IS 'single-precision vector';

CREATE FUNCTION l2_distance(vector, vector) RETURNS float8
    AS 'MODULE_PATHNAME', 'l2_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION l2_distance(vector, vector) IS 'Euclidean distance';
CREATE FUNCTION inner_product(vector, vector) RETURNS float8
    AS 'MODULE_PATHNAME', 'inner_product' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION inner_product(vector, vector) IS 'inner product';
CREATE FUNCTION cosine_distance(vector, vector) RETURNS float8
    AS 'MODULE_PATHNAME', 'cosine_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cosine_distance(vector, vector) IS 'cosine distance';
CREATE FUNCTION l1_distance(vector, vector) RETURNS float8
    AS 'MODULE_PATHNAME', 'l1_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION l1_distance(vector, vector) IS 'taxicab distance';
CREATE FUNCTION vector_dims(vector) RETURNS integer
    AS 'MODULE_PATHNAME', 'vector_dims' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_dims(vector) IS 'number of dimensions';
CREATE FUNCTION vector_norm(vector) RETURNS float8
    AS 'MODULE_PATHNAME', 'vector_norm' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_norm(vector) IS 'Euclidean norm';
CREATE FUNCTION l2_normalize(vector) RETURNS vector
    AS 'MODULE_PATHNAME', 'l2_normalize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION l2_normalize(vector) IS 'normalize with Euclidean norm';
CREATE FUNCTION subvector(vector, int, int) RETURNS vector
    AS 'MODULE_PATHNAME', 'subvector' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION subvector(vector, int, int) IS 'subvector';
CREATE FUNCTION vector_add(vector, vector) RETURNS vector
    AS 'MODULE_PATHNAME', 'vector_add' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_add(vector, vector) IS 'implementation of + operator';
CREATE FUNCTION vector_sub(vector, vector) RETURNS vector
    AS 'MODULE_PATHNAME', 'vector_sub' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_sub(vector, vector) IS 'implementation of - operator';
CREATE FUNCTION vector_mul(vector, vector) RETURNS vector
    AS 'MODULE_PATHNAME', 'vector_mul' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_mul(vector, vector) IS 'implementation of * operator';
CREATE FUNCTION vector_concat(vector, vector) RETURNS vector
    AS 'MODULE_PATHNAME', 'vector_concat' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_concat(vector, vector) IS 'implementation of || operator';
CREATE FUNCTION vector_lt(vector, vector) RETURNS bool
    AS 'MODULE_PATHNAME', 'vector_lt' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_lt(vector, vector) IS 'implementation of < operator';
CREATE FUNCTION vector_le(vector, vector) RETURNS bool
    AS 'MODULE_PATHNAME', 'vector_le' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_le(vector, vector) IS 'implementation of <= operator';
CREATE FUNCTION vector_eq(vector, vector) RETURNS bool
    AS 'MODULE_PATHNAME', 'vector_eq' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_eq(vector, vector) IS 'implementation of = operator';
CREATE FUNCTION vector_ne(vector, vector) RETURNS bool
    AS 'MODULE_PATHNAME', 'vector_ne' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_ne(vector, vector) IS 'implementation of <> operator';
CREATE FUNCTION vector_ge(vector, vector) RETURNS bool
    AS 'MODULE_PATHNAME', 'vector_ge' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_ge(vector, vector) IS 'implementation of >= operator';
CREATE FUNCTION vector_gt(vector, vector) RETURNS bool
    AS 'MODULE_PATHNAME', 'vector_gt' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_gt(vector, vector) IS 'implementation of > operator';
CREATE FUNCTION vector_cmp(vector, vector) RETURNS int4
    AS 'MODULE_PATHNAME', 'vector_cmp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_cmp(vector, vector) IS 'less-equal-greater';
CREATE FUNCTION vector_l2_squared_distance(vector, vector) RETURNS float8
    AS 'MODULE_PATHNAME', 'vector_l2_squared_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_l2_squared_distance(vector, vector) IS 'squared Euclidean distance';
CREATE FUNCTION vector_negative_inner_product(vector, vector) RETURNS float8
    AS 'MODULE_PATHNAME', 'vector_negative_inner_product' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_negative_inner_product(vector, vector) IS 'negative inner product';
CREATE FUNCTION vector_accum(double precision[], vector) RETURNS double precision[]
    AS 'MODULE_PATHNAME', 'vector_accum' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_accum(double precision[], vector) IS 'aggregate transition function';
CREATE FUNCTION vector_avg(double precision[]) RETURNS vector
    AS 'MODULE_PATHNAME', 'vector_avg' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_avg(double precision[]) IS 'aggregate final function';
CREATE FUNCTION vector_combine(double precision[], double precision[]) RETURNS double precision[]
    AS 'MODULE_PATHNAME', 'vector_combine' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_combine(double precision[], double precision[]) IS 'aggregate combine function';

CREATE AGGREGATE avg(vector) (
    SFUNC = vector_accum,
    STYPE = double precision[],
    FINALFUNC = vector_avg,
    COMBINEFUNC = vector_combine,
    INITCOND = '{0}',
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE avg(vector) IS 'the average (arithmetic mean) as vector of all vector values';

CREATE AGGREGATE sum(vector) (
    SFUNC = vector_add,
    STYPE = vector,
    COMBINEFUNC = vector_add,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE sum(vector) IS 'sum as vector across all vector input values';

CREATE FUNCTION vector(vector, integer, boolean) RETURNS vector
    AS 'MODULE_PATHNAME', 'vector' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector(vector, integer, boolean) IS 'adjust vector to typmod';
CREATE FUNCTION array_to_vector(integer[], integer, boolean) RETURNS vector
    AS 'MODULE_PATHNAME', 'array_to_vector' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION array_to_vector(integer[], integer, boolean) IS 'convert int4 array to vector';
CREATE FUNCTION array_to_vector(real[], integer, boolean) RETURNS vector
    AS 'MODULE_PATHNAME', 'array_to_vector' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION array_to_vector(real[], integer, boolean) IS 'convert float4 array to vector';
CREATE FUNCTION array_to_vector(double precision[], integer, boolean) RETURNS vector
    AS 'MODULE_PATHNAME', 'array_to_vector' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION array_to_vector(double precision[], integer, boolean) IS 'convert float8 array to vector';
CREATE FUNCTION array_to_vector(numeric[], integer, boolean) RETURNS vector
    AS 'MODULE_PATHNAME', 'array_to_vector' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION array_to_vector(numeric[], integer, boolean) IS 'convert numeric array to vector';
CREATE FUNCTION vector_to_float4(vector, integer, boolean) RETURNS real[]
    AS 'MODULE_PATHNAME', 'vector_to_float4' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_to_float4(vector, integer, boolean) IS 'convert vector to float4 array';
CREATE FUNCTION vector_to_float8(vector, integer, boolean) RETURNS double precision[]
    AS 'MODULE_PATHNAME', 'vector_to_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_to_float8(vector, integer, boolean) IS 'convert vector to float8 array';
CREATE FUNCTION vector_to_numeric(vector, integer, boolean) RETURNS numeric[]
    AS 'MODULE_PATHNAME', 'vector_to_numeric' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_to_numeric(vector, integer, boolean) IS 'convert vector to numeric array';
CREATE FUNCTION vector_to_int4(vector, integer, boolean) RETURNS integer[]
    AS 'MODULE_PATHNAME', 'vector_to_int4' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_to_int4(vector, integer, boolean) IS 'convert vector to int4 array';

CREATE CAST (vector AS vector) WITH FUNCTION vector(vector, integer, boolean) AS IMPLICIT;
CREATE CAST (vector AS real[]) WITH FUNCTION vector_to_float4(vector, integer, boolean) AS IMPLICIT;
CREATE CAST (vector AS double precision[]) WITH FUNCTION vector_to_float8(vector, integer, boolean);
CREATE CAST (vector AS numeric[]) WITH FUNCTION vector_to_numeric(vector, integer, boolean);
CREATE CAST (vector AS integer[]) WITH FUNCTION vector_to_int4(vector, integer, boolean);
CREATE CAST (integer[] AS vector) WITH FUNCTION array_to_vector(integer[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (real[] AS vector) WITH FUNCTION array_to_vector(real[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (double precision[] AS vector) WITH FUNCTION array_to_vector(double precision[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (numeric[] AS vector) WITH FUNCTION array_to_vector(numeric[], integer, boolean) AS ASSIGNMENT;

CREATE OPERATOR <-> (LEFTARG = vector, RIGHTARG = vector, PROCEDURE = l2_distance, COMMUTATOR = '<->');
COMMENT ON OPERATOR <-> (vector, vector) IS 'Euclidean distance';
CREATE OPERATOR <#> (LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_negative_inner_product, COMMUTATOR = '<#>');
COMMENT ON OPERATOR <#> (vector, vector) IS 'negative inner product';
CREATE OPERATOR <=> (LEFTARG = vector, RIGHTARG = vector, PROCEDURE = cosine_distance, COMMUTATOR = '<=>');
COMMENT ON OPERATOR <=> (vector, vector) IS 'cosine distance';
CREATE OPERATOR <+> (LEFTARG = vector, RIGHTARG = vector, PROCEDURE = l1_distance, COMMUTATOR = '<+>');
COMMENT ON OPERATOR <+> (vector, vector) IS 'taxicab distance';
CREATE OPERATOR + (LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_add, COMMUTATOR = +);
CREATE OPERATOR - (LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_sub);
CREATE OPERATOR * (LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_mul, COMMUTATOR = *);
CREATE OPERATOR || (LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_concat);
CREATE OPERATOR < (LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_lt,
    COMMUTATOR = > , NEGATOR = >= , RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_le,
    COMMUTATOR = >= , NEGATOR = > , RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR = (LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_eq,
    COMMUTATOR = = , NEGATOR = <> , RESTRICT = eqsel, JOIN = eqjoinsel);
CREATE OPERATOR <> (LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_ne,
    COMMUTATOR = <> , NEGATOR = = , RESTRICT = eqsel, JOIN = eqjoinsel);
CREATE OPERATOR >= (LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_ge,
    COMMUTATOR = <= , NEGATOR = < , RESTRICT = scalargesel, JOIN = scalargejoinsel);
CREATE OPERATOR > (LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_gt,
    COMMUTATOR = < , NEGATOR = <= , RESTRICT = scalargtsel, JOIN = scalargtjoinsel);

CREATE OPERATOR CLASS vector_ops
    DEFAULT FOR TYPE vector USING btree AS
    OPERATOR 1 < ,
    OPERATOR 2 <= ,
    OPERATOR 3 = ,
    OPERATOR 4 >= ,
    OPERATOR 5 > ,
    FUNCTION 1 vector_cmp(vector, vector);
-- END GENERATED vector_type(vector)


-- BEGIN GENERATED vector_type(halfvec): sql/vector_type.sql.in, by `cargo xtask generate`
-- ===================================================================================== halfvec

CREATE TYPE halfvec;

CREATE FUNCTION halfvec_in(cstring, oid, integer) RETURNS halfvec
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION halfvec_out(halfvec) RETURNS cstring
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION halfvec_typmod_in(cstring[]) RETURNS integer
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION halfvec_recv(internal, oid, integer) RETURNS halfvec
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION halfvec_send(halfvec) RETURNS bytea
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE halfvec (
    INPUT     = halfvec_in,
    OUTPUT    = halfvec_out,
    TYPMOD_IN = halfvec_typmod_in,
    RECEIVE   = halfvec_recv,
    SEND      = halfvec_send,
    STORAGE   = external
);
COMMENT ON TYPE halfvec IS 'half-precision vector';

CREATE FUNCTION l2_distance(halfvec, halfvec) RETURNS float8
    AS 'MODULE_PATHNAME', 'halfvec_l2_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION l2_distance(halfvec, halfvec) IS 'Euclidean distance';
CREATE FUNCTION inner_product(halfvec, halfvec) RETURNS float8
    AS 'MODULE_PATHNAME', 'halfvec_inner_product' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION inner_product(halfvec, halfvec) IS 'inner product';
CREATE FUNCTION cosine_distance(halfvec, halfvec) RETURNS float8
    AS 'MODULE_PATHNAME', 'halfvec_cosine_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cosine_distance(halfvec, halfvec) IS 'cosine distance';
CREATE FUNCTION l1_distance(halfvec, halfvec) RETURNS float8
    AS 'MODULE_PATHNAME', 'halfvec_l1_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION l1_distance(halfvec, halfvec) IS 'taxicab distance';
CREATE FUNCTION vector_dims(halfvec) RETURNS integer
    AS 'MODULE_PATHNAME', 'halfvec_vector_dims' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_dims(halfvec) IS 'number of dimensions';
CREATE FUNCTION l2_norm(halfvec) RETURNS float8
    AS 'MODULE_PATHNAME', 'halfvec_l2_norm' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION l2_norm(halfvec) IS 'Euclidean norm';
CREATE FUNCTION l2_normalize(halfvec) RETURNS halfvec
    AS 'MODULE_PATHNAME', 'halfvec_l2_normalize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION l2_normalize(halfvec) IS 'normalize with Euclidean norm';
CREATE FUNCTION subvector(halfvec, int, int) RETURNS halfvec
    AS 'MODULE_PATHNAME', 'halfvec_subvector' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION subvector(halfvec, int, int) IS 'subvector';
CREATE FUNCTION halfvec_add(halfvec, halfvec) RETURNS halfvec
    AS 'MODULE_PATHNAME', 'halfvec_add' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_add(halfvec, halfvec) IS 'implementation of + operator';
CREATE FUNCTION halfvec_sub(halfvec, halfvec) RETURNS halfvec
    AS 'MODULE_PATHNAME', 'halfvec_sub' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_sub(halfvec, halfvec) IS 'implementation of - operator';
CREATE FUNCTION halfvec_mul(halfvec, halfvec) RETURNS halfvec
    AS 'MODULE_PATHNAME', 'halfvec_mul' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_mul(halfvec, halfvec) IS 'implementation of * operator';
CREATE FUNCTION halfvec_concat(halfvec, halfvec) RETURNS halfvec
    AS 'MODULE_PATHNAME', 'halfvec_concat' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_concat(halfvec, halfvec) IS 'implementation of || operator';
CREATE FUNCTION halfvec_lt(halfvec, halfvec) RETURNS bool
    AS 'MODULE_PATHNAME', 'halfvec_lt' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_lt(halfvec, halfvec) IS 'implementation of < operator';
CREATE FUNCTION halfvec_le(halfvec, halfvec) RETURNS bool
    AS 'MODULE_PATHNAME', 'halfvec_le' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_le(halfvec, halfvec) IS 'implementation of <= operator';
CREATE FUNCTION halfvec_eq(halfvec, halfvec) RETURNS bool
    AS 'MODULE_PATHNAME', 'halfvec_eq' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_eq(halfvec, halfvec) IS 'implementation of = operator';
CREATE FUNCTION halfvec_ne(halfvec, halfvec) RETURNS bool
    AS 'MODULE_PATHNAME', 'halfvec_ne' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_ne(halfvec, halfvec) IS 'implementation of <> operator';
CREATE FUNCTION halfvec_ge(halfvec, halfvec) RETURNS bool
    AS 'MODULE_PATHNAME', 'halfvec_ge' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_ge(halfvec, halfvec) IS 'implementation of >= operator';
CREATE FUNCTION halfvec_gt(halfvec, halfvec) RETURNS bool
    AS 'MODULE_PATHNAME', 'halfvec_gt' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_gt(halfvec, halfvec) IS 'implementation of > operator';
CREATE FUNCTION halfvec_cmp(halfvec, halfvec) RETURNS int4
    AS 'MODULE_PATHNAME', 'halfvec_cmp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_cmp(halfvec, halfvec) IS 'less-equal-greater';
CREATE FUNCTION halfvec_l2_squared_distance(halfvec, halfvec) RETURNS float8
    AS 'MODULE_PATHNAME', 'halfvec_l2_squared_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_l2_squared_distance(halfvec, halfvec) IS 'squared Euclidean distance';
CREATE FUNCTION halfvec_negative_inner_product(halfvec, halfvec) RETURNS float8
    AS 'MODULE_PATHNAME', 'halfvec_negative_inner_product' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_negative_inner_product(halfvec, halfvec) IS 'negative inner product';
CREATE FUNCTION halfvec_accum(double precision[], halfvec) RETURNS double precision[]
    AS 'MODULE_PATHNAME', 'halfvec_accum' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_accum(double precision[], halfvec) IS 'aggregate transition function';
CREATE FUNCTION halfvec_avg(double precision[]) RETURNS halfvec
    AS 'MODULE_PATHNAME', 'halfvec_avg' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_avg(double precision[]) IS 'aggregate final function';
CREATE FUNCTION halfvec_combine(double precision[], double precision[]) RETURNS double precision[]
    AS 'MODULE_PATHNAME', 'halfvec_combine' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_combine(double precision[], double precision[]) IS 'aggregate combine function';

CREATE AGGREGATE avg(halfvec) (
    SFUNC = halfvec_accum,
    STYPE = double precision[],
    FINALFUNC = halfvec_avg,
    COMBINEFUNC = halfvec_combine,
    INITCOND = '{0}',
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE avg(halfvec) IS 'the average (arithmetic mean) as halfvec of all halfvec values';

CREATE AGGREGATE sum(halfvec) (
    SFUNC = halfvec_add,
    STYPE = halfvec,
    COMBINEFUNC = halfvec_add,
    PARALLEL = SAFE
);
COMMENT ON AGGREGATE sum(halfvec) IS 'sum as halfvec across all halfvec input values';

CREATE FUNCTION halfvec(halfvec, integer, boolean) RETURNS halfvec
    AS 'MODULE_PATHNAME', 'halfvec' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec(halfvec, integer, boolean) IS 'adjust halfvec to typmod';
CREATE FUNCTION array_to_halfvec(integer[], integer, boolean) RETURNS halfvec
    AS 'MODULE_PATHNAME', 'array_to_halfvec' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION array_to_halfvec(integer[], integer, boolean) IS 'convert int4 array to halfvec';
CREATE FUNCTION array_to_halfvec(real[], integer, boolean) RETURNS halfvec
    AS 'MODULE_PATHNAME', 'array_to_halfvec' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION array_to_halfvec(real[], integer, boolean) IS 'convert float4 array to halfvec';
CREATE FUNCTION array_to_halfvec(double precision[], integer, boolean) RETURNS halfvec
    AS 'MODULE_PATHNAME', 'array_to_halfvec' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION array_to_halfvec(double precision[], integer, boolean) IS 'convert float8 array to halfvec';
CREATE FUNCTION array_to_halfvec(numeric[], integer, boolean) RETURNS halfvec
    AS 'MODULE_PATHNAME', 'array_to_halfvec' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION array_to_halfvec(numeric[], integer, boolean) IS 'convert numeric array to halfvec';
CREATE FUNCTION halfvec_to_float4(halfvec, integer, boolean) RETURNS real[]
    AS 'MODULE_PATHNAME', 'halfvec_to_float4' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_to_float4(halfvec, integer, boolean) IS 'convert halfvec to float4 array';
CREATE FUNCTION halfvec_to_float8(halfvec, integer, boolean) RETURNS double precision[]
    AS 'MODULE_PATHNAME', 'halfvec_to_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_to_float8(halfvec, integer, boolean) IS 'convert halfvec to float8 array';
CREATE FUNCTION halfvec_to_numeric(halfvec, integer, boolean) RETURNS numeric[]
    AS 'MODULE_PATHNAME', 'halfvec_to_numeric' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_to_numeric(halfvec, integer, boolean) IS 'convert halfvec to numeric array';
CREATE FUNCTION halfvec_to_int4(halfvec, integer, boolean) RETURNS integer[]
    AS 'MODULE_PATHNAME', 'halfvec_to_int4' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_to_int4(halfvec, integer, boolean) IS 'convert halfvec to int4 array';

CREATE CAST (halfvec AS halfvec) WITH FUNCTION halfvec(halfvec, integer, boolean) AS IMPLICIT;
CREATE CAST (halfvec AS real[]) WITH FUNCTION halfvec_to_float4(halfvec, integer, boolean) AS ASSIGNMENT;
CREATE CAST (halfvec AS double precision[]) WITH FUNCTION halfvec_to_float8(halfvec, integer, boolean);
CREATE CAST (halfvec AS numeric[]) WITH FUNCTION halfvec_to_numeric(halfvec, integer, boolean);
CREATE CAST (halfvec AS integer[]) WITH FUNCTION halfvec_to_int4(halfvec, integer, boolean);
CREATE CAST (integer[] AS halfvec) WITH FUNCTION array_to_halfvec(integer[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (real[] AS halfvec) WITH FUNCTION array_to_halfvec(real[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (double precision[] AS halfvec) WITH FUNCTION array_to_halfvec(double precision[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (numeric[] AS halfvec) WITH FUNCTION array_to_halfvec(numeric[], integer, boolean) AS ASSIGNMENT;

CREATE OPERATOR <-> (LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = l2_distance, COMMUTATOR = '<->');
COMMENT ON OPERATOR <-> (halfvec, halfvec) IS 'Euclidean distance';
CREATE OPERATOR <#> (LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_negative_inner_product, COMMUTATOR = '<#>');
COMMENT ON OPERATOR <#> (halfvec, halfvec) IS 'negative inner product';
CREATE OPERATOR <=> (LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = cosine_distance, COMMUTATOR = '<=>');
COMMENT ON OPERATOR <=> (halfvec, halfvec) IS 'cosine distance';
CREATE OPERATOR <+> (LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = l1_distance, COMMUTATOR = '<+>');
COMMENT ON OPERATOR <+> (halfvec, halfvec) IS 'taxicab distance';
CREATE OPERATOR + (LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_add, COMMUTATOR = +);
CREATE OPERATOR - (LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_sub);
CREATE OPERATOR * (LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_mul, COMMUTATOR = *);
CREATE OPERATOR || (LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_concat);
CREATE OPERATOR < (LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_lt,
    COMMUTATOR = > , NEGATOR = >= , RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_le,
    COMMUTATOR = >= , NEGATOR = > , RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR = (LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_eq,
    COMMUTATOR = = , NEGATOR = <> , RESTRICT = eqsel, JOIN = eqjoinsel);
CREATE OPERATOR <> (LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_ne,
    COMMUTATOR = <> , NEGATOR = = , RESTRICT = eqsel, JOIN = eqjoinsel);
CREATE OPERATOR >= (LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_ge,
    COMMUTATOR = <= , NEGATOR = < , RESTRICT = scalargesel, JOIN = scalargejoinsel);
CREATE OPERATOR > (LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_gt,
    COMMUTATOR = < , NEGATOR = <= , RESTRICT = scalargtsel, JOIN = scalargtjoinsel);

CREATE OPERATOR CLASS halfvec_ops
    DEFAULT FOR TYPE halfvec USING btree AS
    OPERATOR 1 < ,
    OPERATOR 2 <= ,
    OPERATOR 3 = ,
    OPERATOR 4 >= ,
    OPERATOR 5 > ,
    FUNCTION 1 halfvec_cmp(halfvec, halfvec);
-- END GENERATED vector_type(halfvec)


-- ===================================================================================== vector <-> halfvec

CREATE FUNCTION halfvec_to_vector(halfvec, integer, boolean) RETURNS vector
    AS 'MODULE_PATHNAME', 'halfvec_to_vector' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION vector_to_halfvec(vector, integer, boolean) RETURNS halfvec
    AS 'MODULE_PATHNAME', 'vector_to_halfvec' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE CAST (halfvec AS vector) WITH FUNCTION halfvec_to_vector(halfvec, integer, boolean) AS ASSIGNMENT;
CREATE CAST (vector AS halfvec) WITH FUNCTION vector_to_halfvec(vector, integer, boolean) AS IMPLICIT;


-- ===================================================================================== bit

CREATE FUNCTION binary_quantize(vector) RETURNS bit
    AS 'MODULE_PATHNAME', 'binary_quantize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION binary_quantize(vector) IS 'binary quantize';
CREATE FUNCTION binary_quantize(halfvec) RETURNS bit
    AS 'MODULE_PATHNAME', 'halfvec_binary_quantize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION binary_quantize(halfvec) IS 'binary quantize';
CREATE FUNCTION hamming_distance(bit, bit) RETURNS float8
    AS 'MODULE_PATHNAME', 'hamming_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION hamming_distance(bit, bit) IS 'Hamming distance';
CREATE FUNCTION jaccard_distance(bit, bit) RETURNS float8
    AS 'MODULE_PATHNAME', 'jaccard_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION jaccard_distance(bit, bit) IS 'Jaccard distance';

CREATE OPERATOR <~> (LEFTARG = bit, RIGHTARG = bit, PROCEDURE = hamming_distance, COMMUTATOR = '<~>');
COMMENT ON OPERATOR <~> (bit, bit) IS 'Hamming distance';
CREATE OPERATOR <%> (LEFTARG = bit, RIGHTARG = bit, PROCEDURE = jaccard_distance, COMMUTATOR = '<%>');
COMMENT ON OPERATOR <%> (bit, bit) IS 'Jaccard distance';


-- ===================================================================================== sparsevec

CREATE TYPE sparsevec;

CREATE FUNCTION sparsevec_in(cstring, oid, integer) RETURNS sparsevec
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION sparsevec_out(sparsevec) RETURNS cstring
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION sparsevec_typmod_in(cstring[]) RETURNS integer
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION sparsevec_recv(internal, oid, integer) RETURNS sparsevec
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION sparsevec_send(sparsevec) RETURNS bytea
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE sparsevec (
    INPUT     = sparsevec_in,
    OUTPUT    = sparsevec_out,
    TYPMOD_IN = sparsevec_typmod_in,
    RECEIVE   = sparsevec_recv,
    SEND      = sparsevec_send,
    STORAGE   = external
);
COMMENT ON TYPE sparsevec IS 'sparse vector';

CREATE FUNCTION l2_distance(sparsevec, sparsevec) RETURNS float8
    AS 'MODULE_PATHNAME', 'sparsevec_l2_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION l2_distance(sparsevec, sparsevec) IS 'Euclidean distance';
CREATE FUNCTION inner_product(sparsevec, sparsevec) RETURNS float8
    AS 'MODULE_PATHNAME', 'sparsevec_inner_product' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION inner_product(sparsevec, sparsevec) IS 'inner product';
CREATE FUNCTION cosine_distance(sparsevec, sparsevec) RETURNS float8
    AS 'MODULE_PATHNAME', 'sparsevec_cosine_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cosine_distance(sparsevec, sparsevec) IS 'cosine distance';
CREATE FUNCTION l1_distance(sparsevec, sparsevec) RETURNS float8
    AS 'MODULE_PATHNAME', 'sparsevec_l1_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION l1_distance(sparsevec, sparsevec) IS 'taxicab distance';
CREATE FUNCTION l2_norm(sparsevec) RETURNS float8
    AS 'MODULE_PATHNAME', 'sparsevec_l2_norm' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION l2_norm(sparsevec) IS 'Euclidean norm';
CREATE FUNCTION l2_normalize(sparsevec) RETURNS sparsevec
    AS 'MODULE_PATHNAME', 'sparsevec_l2_normalize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION l2_normalize(sparsevec) IS 'normalize with Euclidean norm';
CREATE FUNCTION sparsevec_lt(sparsevec, sparsevec) RETURNS bool
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION sparsevec_lt(sparsevec, sparsevec) IS 'implementation of < operator';
CREATE FUNCTION sparsevec_le(sparsevec, sparsevec) RETURNS bool
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION sparsevec_le(sparsevec, sparsevec) IS 'implementation of <= operator';
CREATE FUNCTION sparsevec_eq(sparsevec, sparsevec) RETURNS bool
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION sparsevec_eq(sparsevec, sparsevec) IS 'implementation of = operator';
CREATE FUNCTION sparsevec_ne(sparsevec, sparsevec) RETURNS bool
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION sparsevec_ne(sparsevec, sparsevec) IS 'implementation of <> operator';
CREATE FUNCTION sparsevec_ge(sparsevec, sparsevec) RETURNS bool
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION sparsevec_ge(sparsevec, sparsevec) IS 'implementation of >= operator';
CREATE FUNCTION sparsevec_gt(sparsevec, sparsevec) RETURNS bool
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION sparsevec_gt(sparsevec, sparsevec) IS 'implementation of > operator';
CREATE FUNCTION sparsevec_cmp(sparsevec, sparsevec) RETURNS int4
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION sparsevec_cmp(sparsevec, sparsevec) IS 'less-equal-greater';
CREATE FUNCTION sparsevec_l2_squared_distance(sparsevec, sparsevec) RETURNS float8
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION sparsevec_l2_squared_distance(sparsevec, sparsevec) IS 'squared Euclidean distance';
CREATE FUNCTION sparsevec_negative_inner_product(sparsevec, sparsevec) RETURNS float8
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION sparsevec_negative_inner_product(sparsevec, sparsevec) IS 'negative inner product';

CREATE FUNCTION sparsevec(sparsevec, integer, boolean) RETURNS sparsevec
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION sparsevec(sparsevec, integer, boolean) IS 'adjust sparsevec to typmod';
CREATE FUNCTION vector_to_sparsevec(vector, integer, boolean) RETURNS sparsevec
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION vector_to_sparsevec(vector, integer, boolean) IS 'convert vector to sparsevec';
CREATE FUNCTION sparsevec_to_vector(sparsevec, integer, boolean) RETURNS vector
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION sparsevec_to_vector(sparsevec, integer, boolean) IS 'convert sparsevec to vector';
CREATE FUNCTION halfvec_to_sparsevec(halfvec, integer, boolean) RETURNS sparsevec
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION halfvec_to_sparsevec(halfvec, integer, boolean) IS 'convert halfvec to sparsevec';
CREATE FUNCTION sparsevec_to_halfvec(sparsevec, integer, boolean) RETURNS halfvec
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION sparsevec_to_halfvec(sparsevec, integer, boolean) IS 'convert sparsevec to halfvec';
CREATE FUNCTION array_to_sparsevec(integer[], integer, boolean) RETURNS sparsevec
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION array_to_sparsevec(integer[], integer, boolean) IS 'convert int4 array to sparsevec';
CREATE FUNCTION array_to_sparsevec(real[], integer, boolean) RETURNS sparsevec
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION array_to_sparsevec(real[], integer, boolean) IS 'convert float4 array to sparsevec';
CREATE FUNCTION array_to_sparsevec(double precision[], integer, boolean) RETURNS sparsevec
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION array_to_sparsevec(double precision[], integer, boolean) IS 'convert float8 array to sparsevec';
CREATE FUNCTION array_to_sparsevec(numeric[], integer, boolean) RETURNS sparsevec
    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION array_to_sparsevec(numeric[], integer, boolean) IS 'convert numeric array to sparsevec';

CREATE CAST (sparsevec AS sparsevec) WITH FUNCTION sparsevec(sparsevec, integer, boolean) AS IMPLICIT;
CREATE CAST (sparsevec AS vector) WITH FUNCTION sparsevec_to_vector(sparsevec, integer, boolean) AS ASSIGNMENT;
CREATE CAST (vector AS sparsevec) WITH FUNCTION vector_to_sparsevec(vector, integer, boolean) AS IMPLICIT;
CREATE CAST (sparsevec AS halfvec) WITH FUNCTION sparsevec_to_halfvec(sparsevec, integer, boolean) AS ASSIGNMENT;
CREATE CAST (halfvec AS sparsevec) WITH FUNCTION halfvec_to_sparsevec(halfvec, integer, boolean) AS IMPLICIT;
CREATE CAST (integer[] AS sparsevec) WITH FUNCTION array_to_sparsevec(integer[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (real[] AS sparsevec) WITH FUNCTION array_to_sparsevec(real[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (double precision[] AS sparsevec) WITH FUNCTION array_to_sparsevec(double precision[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (numeric[] AS sparsevec) WITH FUNCTION array_to_sparsevec(numeric[], integer, boolean) AS ASSIGNMENT;

CREATE OPERATOR <-> (LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = l2_distance, COMMUTATOR = '<->');
COMMENT ON OPERATOR <-> (sparsevec, sparsevec) IS 'Euclidean distance';
CREATE OPERATOR <#> (LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = sparsevec_negative_inner_product, COMMUTATOR = '<#>');
COMMENT ON OPERATOR <#> (sparsevec, sparsevec) IS 'negative inner product';
CREATE OPERATOR <=> (LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = cosine_distance, COMMUTATOR = '<=>');
COMMENT ON OPERATOR <=> (sparsevec, sparsevec) IS 'cosine distance';
CREATE OPERATOR <+> (LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = l1_distance, COMMUTATOR = '<+>');
COMMENT ON OPERATOR <+> (sparsevec, sparsevec) IS 'taxicab distance';
CREATE OPERATOR < (LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = sparsevec_lt,
    COMMUTATOR = > , NEGATOR = >= , RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = sparsevec_le,
    COMMUTATOR = >= , NEGATOR = > , RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR = (LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = sparsevec_eq,
    COMMUTATOR = = , NEGATOR = <> , RESTRICT = eqsel, JOIN = eqjoinsel);
CREATE OPERATOR <> (LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = sparsevec_ne,
    COMMUTATOR = <> , NEGATOR = = , RESTRICT = eqsel, JOIN = eqjoinsel);
CREATE OPERATOR >= (LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = sparsevec_ge,
    COMMUTATOR = <= , NEGATOR = < , RESTRICT = scalargesel, JOIN = scalargejoinsel);
CREATE OPERATOR > (LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = sparsevec_gt,
    COMMUTATOR = < , NEGATOR = <= , RESTRICT = scalargtsel, JOIN = scalargtjoinsel);

CREATE OPERATOR CLASS sparsevec_ops
    DEFAULT FOR TYPE sparsevec USING btree AS
    OPERATOR 1 < ,
    OPERATOR 2 <= ,
    OPERATOR 3 = ,
    OPERATOR 4 >= ,
    OPERATOR 5 > ,
    FUNCTION 1 sparsevec_cmp(sparsevec, sparsevec);
