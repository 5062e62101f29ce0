-- Bad inputs for the whole SQL surface of the vector, halfvec and sparsevec types and of the bit
-- functions, table-driven.
--
-- The functions under test come from the catalog, not from a hand-written list: every function
-- the extension installs (sql/types.sql) that takes or returns vector, halfvec, sparsevec or bit
-- (aggregates included), the vector types' I/O functions, and the support functions of aggregates over them.
-- Each of them needs at least one case in bad_input_cases below: the first two queries list the
-- functions without a case and the cases naming no such function, so adding a function to
-- sql/types.sql without a case here changes this test's output and fails it.
--
-- Every case then runs in its own subtransaction and prints either "ok: <result>" or the
-- SQLSTATE and message it fails with, which must be pgvector's for the same input: no way of
-- making a vector may produce NaN, an infinity or (for halfvec) a value beyond the f16 range.

CREATE TABLE bad_input_cases (id serial PRIMARY KEY, fn text NOT NULL, query text NOT NULL);

-- Runs one case: "ok: <result as text>" or "<SQLSTATE>: <message>".
CREATE FUNCTION run_bad_input_case(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    result text;
    state text;
    message text;
BEGIN
    EXECUTE query INTO result;
    RETURN 'ok: ' || coalesce(result, 'NULL');
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
    RETURN state || ': ' || message;
END
$$;

-- Feeds `payload` to the binary input function of `type` (vector_recv, halfvec_recv,
-- sparsevec_recv) through
-- binary COPY: a bytea field's binary form is its raw bytes, so any message can be built.
CREATE FUNCTION binary_input(type text, payload bytea) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    file text := format('/tmp/pg_strata_regress_bad_input_%s.bin', pg_backend_pid());
    result text;
BEGIN
    EXECUTE format('COPY (SELECT %L::bytea) TO %L WITH (FORMAT binary)', payload, file);
    EXECUTE format('CREATE TEMP TABLE binary_input_target (v %s)', type);
    EXECUTE format('COPY binary_input_target FROM %L WITH (FORMAT binary)', file);
    SELECT v::text INTO result FROM binary_input_target;
    DROP TABLE binary_input_target;
    RETURN result;
END
$$;

-- The functions under test, as regprocedure text.
CREATE VIEW bad_input_surface AS
WITH extension_functions AS (
    SELECT p.oid, p.prorettype, p.proargtypes::oid[] AS argtypes
    FROM pg_depend d
    JOIN pg_proc p ON p.oid = d.objid
    WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
      AND d.refclassid = 'pg_extension'::regclass
      AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_strata')
), vector_types AS (
    SELECT ARRAY['vector'::regtype::oid, 'halfvec'::regtype::oid, 'sparsevec'::regtype::oid, 'bit'::regtype::oid] AS oids
), typed AS (
    SELECT f.oid FROM extension_functions f, vector_types t
    WHERE f.prorettype = ANY (t.oids) OR f.argtypes && t.oids
), io AS (
    SELECT unnest(ARRAY[typinput, typoutput, typreceive, typsend, typmodin]::oid[]) AS oid
    FROM pg_type, vector_types t WHERE pg_type.oid = ANY (t.oids) AND pg_type.oid <> 'bit'::regtype
), aggregate_support AS (
    SELECT unnest(ARRAY[aggtransfn, aggcombinefn, aggfinalfn]::oid[]) AS oid
    FROM pg_aggregate WHERE aggfnoid IN (SELECT oid FROM typed)
)
SELECT oid::regprocedure::text AS fn
FROM (SELECT oid FROM typed UNION SELECT oid FROM io UNION SELECT oid FROM aggregate_support) s
-- strata_unchecked_vector exists only in test builds (feature fault-injection): it makes a vector
-- without validation on purpose, to test the index's own check (tests/python/test_hardening.py).
WHERE oid <> 0 AND oid::regproc::text <> 'strata_unchecked_vector';

INSERT INTO bad_input_cases (fn, query) VALUES
-- ------------------------------------------------------------------------------- vector: input
('vector_in(cstring,oid,integer)', $$SELECT '[NaN,1]'::vector$$),
('vector_in(cstring,oid,integer)', $$SELECT '[1,Infinity]'::vector$$),
('vector_in(cstring,oid,integer)', $$SELECT '[1,-inf]'::vector$$),
('vector_in(cstring,oid,integer)', $$SELECT '[1e39]'::vector$$),
('vector_in(cstring,oid,integer)', $$SELECT '[-1e39,NaN]'::vector$$),
('vector_in(cstring,oid,integer)', $$SELECT '[]'::vector$$),
('vector_in(cstring,oid,integer)', $$SELECT '[1,2'::vector$$),
('vector_in(cstring,oid,integer)', $$SELECT '[1,2]'::vector(3)$$),
('vector_in(cstring,oid,integer)', $$SELECT vector_in('[1,NaN]', 0, -1)$$),
('vector_out(vector)', $$SELECT vector_out('[NaN]')$$),
('vector_out(vector)', $$SELECT vector_out('[3.4028235e38,-1e-45]')$$),
('vector_typmod_in(cstring[])', $$SELECT '[1]'::vector(0)$$),
('vector_typmod_in(cstring[])', $$SELECT '[1]'::vector(16001)$$),
('vector_typmod_in(cstring[])', $$SELECT '[1]'::vector(1, 2)$$),
('vector_recv(internal,oid,integer)', $$SELECT binary_input('vector', '\x000200003f8000007fc00000')$$),
('vector_recv(internal,oid,integer)', $$SELECT binary_input('vector', '\x000200003f8000007f800000')$$),
('vector_recv(internal,oid,integer)', $$SELECT binary_input('vector', '\x00010000ff800000')$$),
('vector_recv(internal,oid,integer)', $$SELECT binary_input('vector', '\x000200007fc00000')$$),
('vector_recv(internal,oid,integer)', $$SELECT binary_input('vector', '\x000200003f800000')$$),
('vector_recv(internal,oid,integer)', $$SELECT binary_input('vector', '\x00000000')$$),
('vector_recv(internal,oid,integer)', $$SELECT binary_input('vector', '\x3e810000')$$),
('vector_recv(internal,oid,integer)', $$SELECT binary_input('vector', '\x000100013f800000')$$),
('vector_recv(internal,oid,integer)', $$SELECT binary_input('vector(2)', '\x000100003f800000')$$),
('vector_recv(internal,oid,integer)', $$SELECT binary_input('vector', '\x000100003f800000')$$),
('vector_send(vector)', $$SELECT vector_send('[Infinity]')$$),
('vector_send(vector)', $$SELECT vector_send('[1,-2]')$$),
-- ---------------------------------------------------------------------- vector: typmod and casts
('vector(vector,integer,boolean)', $$SELECT '[1,2,3]'::vector::vector(2)$$),
('array_to_vector(integer[],integer,boolean)', $$SELECT '{}'::integer[]::vector$$),
('array_to_vector(integer[],integer,boolean)', $$SELECT '{{1,2}}'::integer[]::vector$$),
('array_to_vector(integer[],integer,boolean)', $$SELECT '{1,NULL}'::integer[]::vector$$),
('array_to_vector(integer[],integer,boolean)', $$SELECT '{1,2}'::integer[]::vector(3)$$),
('array_to_vector(integer[],integer,boolean)', $$SELECT array_fill(1, ARRAY[16001])::vector$$),
('array_to_vector(integer[],integer,boolean)', $$SELECT '{2147483647,-2147483648}'::integer[]::vector$$),
('array_to_vector(real[],integer,boolean)', $$SELECT '{1,NaN}'::real[]::vector$$),
('array_to_vector(real[],integer,boolean)', $$SELECT '{Infinity}'::real[]::vector$$),
('array_to_vector(real[],integer,boolean)', $$SELECT '{-Infinity,NaN}'::real[]::vector$$),
('array_to_vector(real[],integer,boolean)', $$SELECT array_to_vector('{NaN}'::real[], 2, false)$$),
('array_to_vector(double precision[],integer,boolean)', $$SELECT '{1,NaN}'::float8[]::vector$$),
('array_to_vector(double precision[],integer,boolean)', $$SELECT '{4e38,-4e38}'::float8[]::vector$$),
('array_to_vector(double precision[],integer,boolean)', $$SELECT '{-Infinity}'::float8[]::vector$$),
('array_to_vector(double precision[],integer,boolean)', $$SELECT '{1e-50,3.4028234e38}'::float8[]::vector$$),
('array_to_vector(numeric[],integer,boolean)', $$SELECT '{1,NaN}'::numeric[]::vector$$),
('array_to_vector(numeric[],integer,boolean)', $$SELECT '{Infinity}'::numeric[]::vector$$),
('array_to_vector(numeric[],integer,boolean)', $$SELECT '{1e39}'::numeric[]::vector$$),
('array_to_vector(numeric[],integer,boolean)', $$SELECT '{1e39}'::numeric[]::vector(2)$$),
('vector_to_float4(vector,integer,boolean)', $$SELECT '[NaN]'::vector::real[]$$),
('vector_to_float4(vector,integer,boolean)', $$SELECT '[3.4028235e38]'::vector::real[]$$),
('vector_to_float8(vector,integer,boolean)', $$SELECT '[-3.4028235e38]'::vector::float8[]$$),
('vector_to_numeric(vector,integer,boolean)', $$SELECT '[1e-45,-0]'::vector::numeric[]$$),
('vector_to_int4(vector,integer,boolean)', $$SELECT '[3e9]'::vector::integer[]$$),
('vector_to_int4(vector,integer,boolean)', $$SELECT '[-2147483904]'::vector::integer[]$$),
('vector_to_int4(vector,integer,boolean)', $$SELECT '[2147483520,-2147483648]'::vector::integer[]$$),
('halfvec_to_vector(halfvec,integer,boolean)', $$SELECT '[1,2,3]'::halfvec::vector(2)$$),
('halfvec_to_vector(halfvec,integer,boolean)', $$SELECT '[65504,-65504]'::halfvec::vector$$),
('vector_to_halfvec(vector,integer,boolean)', $$SELECT '[65520]'::vector::halfvec$$),
('vector_to_halfvec(vector,integer,boolean)', $$SELECT '[1,-1e6]'::vector::halfvec$$),
('vector_to_halfvec(vector,integer,boolean)', $$SELECT '[3.4028235e38]'::vector::halfvec$$),
('vector_to_halfvec(vector,integer,boolean)', $$SELECT '[1,2,3]'::vector::halfvec(2)$$),
('vector_to_halfvec(vector,integer,boolean)', $$SELECT '[65504,1e-8]'::vector::halfvec$$),
-- ------------------------------------------------------------------ vector: functions, operators
('l2_distance(vector,vector)', $$SELECT '[1,2]'::vector <-> '[1]'$$),
('l2_distance(vector,vector)', $$SELECT l2_distance('[3e38]'::vector, '[-3e38]')$$),
('vector_l2_squared_distance(vector,vector)', $$SELECT vector_l2_squared_distance('[1,2]', '[1]')$$),
('inner_product(vector,vector)', $$SELECT inner_product('[1,2]'::vector, '[1]')$$),
('vector_negative_inner_product(vector,vector)', $$SELECT '[1,2]'::vector <#> '[1]'$$),
('cosine_distance(vector,vector)', $$SELECT '[1,2]'::vector <=> '[1]'$$),
('cosine_distance(vector,vector)', $$SELECT cosine_distance('[0,0]'::vector, '[1,1]')$$),
('l1_distance(vector,vector)', $$SELECT '[1,2]'::vector <+> '[1]'$$),
('vector_dims(vector)', $$SELECT vector_dims('[1,NaN]'::vector)$$),
('vector_norm(vector)', $$SELECT vector_norm('[-Infinity]'::vector)$$),
('vector_norm(vector)', $$SELECT vector_norm('[3e38,3e38]'::vector)$$),
('l2_normalize(vector)', $$SELECT l2_normalize('[NaN,1]'::vector)$$),
('l2_normalize(vector)', $$SELECT l2_normalize('[0,0]'::vector)$$),
('l2_normalize(vector)', $$SELECT l2_normalize('[3e38,-3e38]'::vector)$$),
('l2_normalize(vector)', $$SELECT l2_normalize('[1e-45,0]'::vector)$$),
('subvector(vector,integer,integer)', $$SELECT subvector('[1,2,3]'::vector, 1, 0)$$),
('subvector(vector,integer,integer)', $$SELECT subvector('[1,2,3]'::vector, 4, 1)$$),
('subvector(vector,integer,integer)', $$SELECT subvector('[1,2,3]'::vector, -2147483648, 2147483647)$$),
('subvector(vector,integer,integer)', $$SELECT subvector('[1,2,3]'::vector, 2147483647, 2147483647)$$),
('subvector(vector,integer,integer)', $$SELECT subvector('[1,NaN,3]'::vector, 1, 1)$$),
('vector_add(vector,vector)', $$SELECT '[3e38]'::vector + '[3e38]'$$),
('vector_add(vector,vector)', $$SELECT '[1,2]'::vector + '[1]'$$),
('vector_sub(vector,vector)', $$SELECT '[-3e38]'::vector - '[3e38]'$$),
('vector_mul(vector,vector)', $$SELECT '[1e30]'::vector * '[1e30]'$$),
('vector_mul(vector,vector)', $$SELECT '[1e-30]'::vector * '[1e-30]'$$),
('vector_mul(vector,vector)', $$SELECT '[1e-30,1e30]'::vector * '[1e-30,1e30]'$$),
('vector_mul(vector,vector)', $$SELECT '[1e30,1e-30]'::vector * '[1e30,1e-30]'$$),
('vector_mul(vector,vector)', $$SELECT '[0,-1e-30]'::vector * '[1e-30,0]'$$),
('vector_concat(vector,vector)', $$SELECT array_fill(1, ARRAY[16000])::vector || '[1]'$$),
('vector_concat(vector,vector)', $$SELECT '[1]'::vector || '[NaN]'$$),
('vector_lt(vector,vector)', $$SELECT '[1]'::vector < '[NaN]'$$),
('vector_le(vector,vector)', $$SELECT '[1]'::vector <= '[Infinity]'$$),
('vector_eq(vector,vector)', $$SELECT '[NaN]'::vector = '[NaN]'$$),
('vector_ne(vector,vector)', $$SELECT '[1]'::vector <> '[-Infinity]'$$),
('vector_ge(vector,vector)', $$SELECT '[1e39]'::vector >= '[1]'$$),
('vector_gt(vector,vector)', $$SELECT '[1]'::vector > '[-1e39]'$$),
('vector_cmp(vector,vector)', $$SELECT vector_cmp('[1]', '[NaN]')$$),
-- --------------------------------------------------------------------------- vector: aggregates
('vector_accum(double precision[],vector)', $$SELECT vector_accum('{0}', '[1,2,3]')$$),
('vector_accum(double precision[],vector)', $$SELECT vector_accum('{1,NaN}', '[1]')$$),
('vector_accum(double precision[],vector)', $$SELECT vector_accum('{1,Infinity}', '[1]')$$),
('vector_accum(double precision[],vector)', $$SELECT vector_accum('{1,1.7976931348623157e308}', '[3e38]')$$),
('vector_accum(double precision[],vector)', $$SELECT vector_accum('{1,-1.7976931348623157e308}', '[-3.4028235e38]')$$),
('vector_accum(double precision[],vector)', $$SELECT vector_accum('{0,0}', '[1,2,3]')$$),
('vector_accum(double precision[],vector)', $$SELECT vector_accum('{}', '[1]')$$),
('vector_accum(double precision[],vector)', $$SELECT vector_accum('{{0}}', '[1]')$$),
('vector_accum(double precision[],vector)', $$SELECT vector_accum('{NULL}', '[1]')$$),
('vector_combine(double precision[],double precision[])', $$SELECT vector_combine('{1,2}', '{3,4}')$$),
('vector_combine(double precision[],double precision[])', $$SELECT vector_combine('{1,2}', '{3,4,5}')$$),
('vector_combine(double precision[],double precision[])', $$SELECT vector_combine('{0,1,2}', '{1,3}')$$),
('vector_combine(double precision[],double precision[])', $$SELECT vector_combine('{1,Infinity}', '{1,1}')$$),
('vector_combine(double precision[],double precision[])', $$SELECT vector_combine('{1,1.7e308}', '{1,1.7e308}')$$),
('vector_combine(double precision[],double precision[])', $$SELECT vector_combine('{1,NaN}', '{1,1}')$$),
('vector_combine(double precision[],double precision[])', $$SELECT vector_combine('{}', '{0}')$$),
('vector_combine(double precision[],double precision[])', $$SELECT vector_combine('{0}', '{NULL}')$$),
('vector_combine(double precision[],double precision[])', $$SELECT vector_combine('{0}', array_fill(1::float8, ARRAY[16002]))$$),
('vector_avg(double precision[])', $$SELECT vector_avg('{2,2,4,6}')$$),
('vector_avg(double precision[])', $$SELECT vector_avg('{1,NaN,0,0}')$$),
('vector_avg(double precision[])', $$SELECT vector_avg('{1,0,Infinity}')$$),
('vector_avg(double precision[])', $$SELECT vector_avg('{1,-Infinity,NaN}')$$),
('vector_avg(double precision[])', $$SELECT vector_avg('{1,1e39}')$$),
('vector_avg(double precision[])', $$SELECT vector_avg('{1e-300,1}')$$),
('vector_avg(double precision[])', $$SELECT vector_avg('{NaN,1}')$$),
('vector_avg(double precision[])', $$SELECT vector_avg('{Infinity,1}')$$),
('vector_avg(double precision[])', $$SELECT vector_avg('{0,1,2}')$$),
('vector_avg(double precision[])', $$SELECT vector_avg('{-2,2,4}')$$),
('vector_avg(double precision[])', $$SELECT vector_avg('{1}')$$),
('vector_avg(double precision[])', $$SELECT vector_avg('{}')$$),
('vector_avg(double precision[])', $$SELECT vector_avg('{NULL,1}')$$),
('vector_avg(double precision[])', $$SELECT vector_avg('{{1,2}}')$$),
('vector_avg(double precision[])', $$SELECT vector_avg(array_fill(1::float8, ARRAY[16002]))$$),
('vector_avg(double precision[])', $$SELECT vector_avg(vector_accum('{1,NaN}', '[1]'))$$),
('vector_avg(double precision[])', $$SELECT vector_avg(vector_combine('{1,1}', '{1,NaN}'))$$),
('avg(vector)', $$SELECT avg(v) FROM (VALUES ('[1,2]'::vector), ('[1,2,3]')) t(v)$$),
('avg(vector)', $$SELECT avg(v) FROM (VALUES ('[3e38]'::vector), ('[3e38]')) t(v)$$),
('avg(vector)', $$SELECT avg(v) FROM (VALUES ('[1,NaN]'::vector)) t(v)$$),
('sum(vector)', $$SELECT sum(v) FROM (VALUES ('[3e38]'::vector), ('[3e38]')) t(v)$$),
('sum(vector)', $$SELECT sum(v) FROM (VALUES ('[1,2]'::vector), ('[1,2,3]')) t(v)$$),
-- ------------------------------------------------------------------------------ halfvec: input
('halfvec_in(cstring,oid,integer)', $$SELECT '[NaN,1]'::halfvec$$),
('halfvec_in(cstring,oid,integer)', $$SELECT '[1,Infinity]'::halfvec$$),
('halfvec_in(cstring,oid,integer)', $$SELECT '[-inf]'::halfvec$$),
('halfvec_in(cstring,oid,integer)', $$SELECT '[65520,-65520]'::halfvec$$),
('halfvec_in(cstring,oid,integer)', $$SELECT '[4e38,1]'::halfvec$$),
('halfvec_in(cstring,oid,integer)', $$SELECT '[65519,-65504]'::halfvec$$),
('halfvec_in(cstring,oid,integer)', $$SELECT '[]'::halfvec$$),
('halfvec_in(cstring,oid,integer)', $$SELECT '[1,2]'::halfvec(3)$$),
('halfvec_out(halfvec)', $$SELECT halfvec_out('[NaN]')$$),
('halfvec_typmod_in(cstring[])', $$SELECT '[1]'::halfvec(0)$$),
('halfvec_typmod_in(cstring[])', $$SELECT '[1]'::halfvec(16001)$$),
('halfvec_recv(internal,oid,integer)', $$SELECT binary_input('halfvec', '\x000200003c007e00')$$),
('halfvec_recv(internal,oid,integer)', $$SELECT binary_input('halfvec', '\x00010000fc00')$$),
('halfvec_recv(internal,oid,integer)', $$SELECT binary_input('halfvec', '\x00000000')$$),
('halfvec_recv(internal,oid,integer)', $$SELECT binary_input('halfvec', '\x000100023c00')$$),
('halfvec_recv(internal,oid,integer)', $$SELECT binary_input('halfvec(2)', '\x000100003c00')$$),
('halfvec_recv(internal,oid,integer)', $$SELECT binary_input('halfvec', '\x000200007bff8001')$$),
('halfvec_send(halfvec)', $$SELECT halfvec_send('[65520]')$$),
-- --------------------------------------------------------------------- halfvec: typmod and casts
('halfvec(halfvec,integer,boolean)', $$SELECT '[1,2,3]'::halfvec::halfvec(2)$$),
('array_to_halfvec(integer[],integer,boolean)', $$SELECT '{65520}'::integer[]::halfvec$$),
('array_to_halfvec(integer[],integer,boolean)', $$SELECT '{}'::integer[]::halfvec$$),
('array_to_halfvec(integer[],integer,boolean)', $$SELECT '{1,NULL}'::integer[]::halfvec$$),
('array_to_halfvec(integer[],integer,boolean)', $$SELECT array_fill(1, ARRAY[16001])::halfvec$$),
('array_to_halfvec(real[],integer,boolean)', $$SELECT '{65520,-65520}'::real[]::halfvec$$),
('array_to_halfvec(real[],integer,boolean)', $$SELECT '{NaN}'::real[]::halfvec$$),
('array_to_halfvec(real[],integer,boolean)', $$SELECT '{-Infinity}'::real[]::halfvec$$),
('array_to_halfvec(real[],integer,boolean)', $$SELECT '{NaN,70000}'::real[]::halfvec$$),
('array_to_halfvec(real[],integer,boolean)', $$SELECT '{{1}}'::real[]::halfvec$$),
('array_to_halfvec(double precision[],integer,boolean)', $$SELECT '{4e38,-4e38}'::float8[]::halfvec$$),
('array_to_halfvec(double precision[],integer,boolean)', $$SELECT '{4e38,70000}'::float8[]::halfvec$$),
('array_to_halfvec(double precision[],integer,boolean)', $$SELECT '{65519.99,1e-10}'::float8[]::halfvec$$),
('array_to_halfvec(double precision[],integer,boolean)', $$SELECT '{1,2}'::float8[]::halfvec(3)$$),
('array_to_halfvec(numeric[],integer,boolean)', $$SELECT '{NaN}'::numeric[]::halfvec$$),
('array_to_halfvec(numeric[],integer,boolean)', $$SELECT '{-Infinity}'::numeric[]::halfvec$$),
('array_to_halfvec(numeric[],integer,boolean)', $$SELECT '{1,65520}'::numeric[]::halfvec$$),
('halfvec_to_float4(halfvec,integer,boolean)', $$SELECT '[65504,NaN]'::halfvec::real[]$$),
('halfvec_to_float8(halfvec,integer,boolean)', $$SELECT '[-65504,6e-8]'::halfvec::float8[]$$),
('halfvec_to_numeric(halfvec,integer,boolean)', $$SELECT '[Infinity]'::halfvec::numeric[]$$),
('halfvec_to_int4(halfvec,integer,boolean)', $$SELECT '[65504,-0.5,1.5]'::halfvec::integer[]$$),
-- ----------------------------------------------------------------- halfvec: functions, operators
('l2_distance(halfvec,halfvec)', $$SELECT '[1,2]'::halfvec <-> '[1]'$$),
('halfvec_l2_squared_distance(halfvec,halfvec)', $$SELECT halfvec_l2_squared_distance('[1,2]', '[1]')$$),
('inner_product(halfvec,halfvec)', $$SELECT inner_product('[1,2]'::halfvec, '[1]')$$),
('halfvec_negative_inner_product(halfvec,halfvec)', $$SELECT '[1,2]'::halfvec <#> '[1]'$$),
('cosine_distance(halfvec,halfvec)', $$SELECT '[1,2]'::halfvec <=> '[1]'$$),
('l1_distance(halfvec,halfvec)', $$SELECT '[1,2]'::halfvec <+> '[1]'$$),
('vector_dims(halfvec)', $$SELECT vector_dims('[1,NaN]'::halfvec)$$),
('l2_norm(halfvec)', $$SELECT l2_norm('[Infinity]')$$),
('l2_norm(halfvec)', $$SELECT l2_norm('[65504,65504]')$$),
('l2_normalize(halfvec)', $$SELECT l2_normalize('[NaN]'::halfvec)$$),
('l2_normalize(halfvec)', $$SELECT l2_normalize('[0,0]'::halfvec)$$),
('l2_normalize(halfvec)', $$SELECT l2_normalize('[65504,-65504]'::halfvec)$$),
('l2_normalize(halfvec)', $$SELECT l2_normalize('[6e-8,0]'::halfvec)$$),
('subvector(halfvec,integer,integer)', $$SELECT subvector('[1,2,3]'::halfvec, 1, 0)$$),
('subvector(halfvec,integer,integer)', $$SELECT subvector('[1,2,3]'::halfvec, 4, 1)$$),
('subvector(halfvec,integer,integer)', $$SELECT subvector('[1,2,3]'::halfvec, -2147483648, 2147483647)$$),
('halfvec_add(halfvec,halfvec)', $$SELECT '[65519]'::halfvec + '[65519]'$$),
('halfvec_add(halfvec,halfvec)', $$SELECT '[1,2]'::halfvec + '[1]'$$),
('halfvec_add(halfvec,halfvec)', $$SELECT '[65504]'::halfvec + '[15]'$$),
('halfvec_sub(halfvec,halfvec)', $$SELECT '[-65519]'::halfvec - '[65519]'$$),
('halfvec_mul(halfvec,halfvec)', $$SELECT '[65519]'::halfvec * '[65519]'$$),
('halfvec_mul(halfvec,halfvec)', $$SELECT '[300]'::halfvec * '[300]'$$),
('halfvec_mul(halfvec,halfvec)', $$SELECT '[1e-7]'::halfvec * '[1e-7]'$$),
('halfvec_mul(halfvec,halfvec)', $$SELECT '[1e-7,300]'::halfvec * '[1e-7,300]'$$),
('halfvec_mul(halfvec,halfvec)', $$SELECT '[0,1e-7]'::halfvec * '[1e-7,0]'$$),
('halfvec_concat(halfvec,halfvec)', $$SELECT array_fill(1, ARRAY[16000])::halfvec || '[1]'$$),
('halfvec_lt(halfvec,halfvec)', $$SELECT '[1]'::halfvec < '[NaN]'$$),
('halfvec_le(halfvec,halfvec)', $$SELECT '[1]'::halfvec <= '[65520]'$$),
('halfvec_eq(halfvec,halfvec)', $$SELECT '[NaN]'::halfvec = '[NaN]'$$),
('halfvec_ne(halfvec,halfvec)', $$SELECT '[1]'::halfvec <> '[-Infinity]'$$),
('halfvec_ge(halfvec,halfvec)', $$SELECT '[1e39]'::halfvec >= '[1]'$$),
('halfvec_gt(halfvec,halfvec)', $$SELECT '[1]'::halfvec > '[-70000]'$$),
('halfvec_cmp(halfvec,halfvec)', $$SELECT halfvec_cmp('[1]', '[NaN]')$$),
-- -------------------------------------------------------------------------- halfvec: aggregates
('halfvec_accum(double precision[],halfvec)', $$SELECT halfvec_accum('{0,0,0,0}', '[1,2,3]')$$),
('halfvec_accum(double precision[],halfvec)', $$SELECT halfvec_accum('{1,NaN}', '[1]')$$),
('halfvec_accum(double precision[],halfvec)', $$SELECT halfvec_accum('{1,-Infinity}', '[1]')$$),
('halfvec_accum(double precision[],halfvec)', $$SELECT halfvec_accum('{0,0}', '[1,2,3]')$$),
('halfvec_accum(double precision[],halfvec)', $$SELECT halfvec_accum('{}', '[1]')$$),
('halfvec_accum(double precision[],halfvec)', $$SELECT halfvec_accum('{NULL}', '[1]')$$),
('halfvec_combine(double precision[],double precision[])', $$SELECT halfvec_combine('{1,2}', '{3,4,5}')$$),
('halfvec_combine(double precision[],double precision[])', $$SELECT halfvec_combine('{1,Infinity}', '{1,1}')$$),
('halfvec_combine(double precision[],double precision[])', $$SELECT halfvec_combine('{{1,2}}', '{3,4}')$$),
('halfvec_combine(double precision[],double precision[])', $$SELECT halfvec_combine(array_fill(1::float8, ARRAY[16002]), '{0}')$$),
('halfvec_avg(double precision[])', $$SELECT halfvec_avg('{2,2,4,6}')$$),
('halfvec_avg(double precision[])', $$SELECT halfvec_avg('{1,NaN}')$$),
('halfvec_avg(double precision[])', $$SELECT halfvec_avg('{1,Infinity}')$$),
('halfvec_avg(double precision[])', $$SELECT halfvec_avg('{1,70000}')$$),
('halfvec_avg(double precision[])', $$SELECT halfvec_avg('{2,131040}')$$),
('halfvec_avg(double precision[])', $$SELECT halfvec_avg('{1,1e39}')$$),
('halfvec_avg(double precision[])', $$SELECT halfvec_avg('{1,NaN,70000}')$$),
('halfvec_avg(double precision[])', $$SELECT halfvec_avg('{1,70000,NaN}')$$),
('halfvec_avg(double precision[])', $$SELECT halfvec_avg('{0,1}')$$),
('halfvec_avg(double precision[])', $$SELECT halfvec_avg('{1}')$$),
('halfvec_avg(double precision[])', $$SELECT halfvec_avg('{}')$$),
('halfvec_avg(double precision[])', $$SELECT halfvec_avg(array_fill(1::float8, ARRAY[16002]))$$),
('halfvec_avg(double precision[])', $$SELECT halfvec_avg(halfvec_accum('{1,NaN}', '[1]'))$$),
('avg(halfvec)', $$SELECT avg(v) FROM (VALUES ('[65504]'::halfvec), ('[65504]')) t(v)$$),
('avg(halfvec)', $$SELECT avg(v) FROM (VALUES ('[1,2]'::halfvec), ('[3]')) t(v)$$),
('sum(halfvec)', $$SELECT sum(v) FROM (VALUES ('[65504]'::halfvec), ('[65504]')) t(v)$$),
('sum(halfvec)', $$SELECT sum(v) FROM (VALUES ('[1,2]'::halfvec), ('[3]')) t(v)$$),
-- ---------------------------------------------------------------------------- sparsevec: input
('sparsevec_in(cstring,oid,integer)', $$SELECT '{1:NaN,2:1}/2'::sparsevec$$),
('sparsevec_in(cstring,oid,integer)', $$SELECT '{1:1,2:-Infinity}/2'::sparsevec$$),
('sparsevec_in(cstring,oid,integer)', $$SELECT '{1:4e38}/1'::sparsevec$$),
('sparsevec_in(cstring,oid,integer)', $$SELECT '{1:1e-46}/1'::sparsevec$$),
('sparsevec_in(cstring,oid,integer)', $$SELECT '{1:0,2:0}/2'::sparsevec$$),
('sparsevec_in(cstring,oid,integer)', $$SELECT '{}/0'::sparsevec$$),
('sparsevec_in(cstring,oid,integer)', $$SELECT '{}/1000000001'::sparsevec$$),
('sparsevec_in(cstring,oid,integer)', $$SELECT '{2:1}/1'::sparsevec$$),
('sparsevec_in(cstring,oid,integer)', $$SELECT '{1:1,1:2}/2'::sparsevec$$),
('sparsevec_in(cstring,oid,integer)', $$SELECT '{2:1,1:2}/2'::sparsevec$$),
('sparsevec_in(cstring,oid,integer)', $$SELECT '{1:1'::sparsevec$$),
('sparsevec_in(cstring,oid,integer)', $$SELECT '{1:1}/2'::sparsevec(3)$$),
('sparsevec_in(cstring,oid,integer)', $$SELECT sparsevec_in('{1:NaN}/1', 0, -1)$$),
('sparsevec_out(sparsevec)', $$SELECT sparsevec_out('{1:1.5,3:-2}/5')$$),
('sparsevec_out(sparsevec)', $$SELECT sparsevec_out('{1:3.4028235e38,2:-1e-45}/2')$$),
('sparsevec_typmod_in(cstring[])', $$SELECT '{}/1'::sparsevec(0)$$),
('sparsevec_typmod_in(cstring[])', $$SELECT '{}/1'::sparsevec(1000000001)$$),
('sparsevec_typmod_in(cstring[])', $$SELECT '{}/1'::sparsevec(1, 2)$$),
('sparsevec_recv(internal,oid,integer)', $$SELECT binary_input('sparsevec', '\x00000003000000010000000000000001bfc00000')$$),
('sparsevec_recv(internal,oid,integer)', $$SELECT binary_input('sparsevec', '\x0000000300000001000000000000000100000000')$$),
('sparsevec_recv(internal,oid,integer)', $$SELECT binary_input('sparsevec', '\x000000030000000100000000000000017fc00000')$$),
('sparsevec_recv(internal,oid,integer)', $$SELECT binary_input('sparsevec', '\x00000003000000010000000000000001ff800000')$$),
('sparsevec_recv(internal,oid,integer)', $$SELECT binary_input('sparsevec', '\x00000003000000010000000000000003bfc00000')$$),
('sparsevec_recv(internal,oid,integer)', $$SELECT binary_input('sparsevec', '\x0000000300000002000000000000000200000001bfc000003f800000')$$),
('sparsevec_recv(internal,oid,integer)', $$SELECT binary_input('sparsevec', '\x0000000300000002000000000000000100000001bfc000003f800000')$$),
('sparsevec_recv(internal,oid,integer)', $$SELECT binary_input('sparsevec', '\x000000010000000200000000')$$),
('sparsevec_recv(internal,oid,integer)', $$SELECT binary_input('sparsevec', '\x00000003ffffffff00000000')$$),
('sparsevec_recv(internal,oid,integer)', $$SELECT binary_input('sparsevec', '\x000000000000000000000000')$$),
('sparsevec_recv(internal,oid,integer)', $$SELECT binary_input('sparsevec', '\x000000030000000000000001')$$),
('sparsevec_recv(internal,oid,integer)', $$SELECT binary_input('sparsevec', '\x0000000300000001')$$),
('sparsevec_recv(internal,oid,integer)', $$SELECT binary_input('sparsevec', '\x000000030000000100000000')$$),
('sparsevec_recv(internal,oid,integer)', $$SELECT binary_input('sparsevec(2)', '\x00000003000000010000000000000001bfc00000')$$),
('sparsevec_send(sparsevec)', $$SELECT sparsevec_send('{2:1.5,4:-2}/5')$$),
-- ------------------------------------------------------------------- sparsevec: typmod and casts
('sparsevec(sparsevec,integer,boolean)', $$SELECT '{}/3'::sparsevec::sparsevec(2)$$),
('vector_to_sparsevec(vector,integer,boolean)', $$SELECT '[0,1.5,-0]'::vector::sparsevec$$),
('vector_to_sparsevec(vector,integer,boolean)', $$SELECT '[0,1]'::vector::sparsevec(3)$$),
('halfvec_to_sparsevec(halfvec,integer,boolean)', $$SELECT '[0,65504,-0]'::halfvec::sparsevec$$),
('halfvec_to_sparsevec(halfvec,integer,boolean)', $$SELECT '[1,2]'::halfvec::sparsevec(3)$$),
('sparsevec_to_vector(sparsevec,integer,boolean)', $$SELECT '{}/16001'::sparsevec::vector$$),
('sparsevec_to_vector(sparsevec,integer,boolean)', $$SELECT '{1:1}/2'::sparsevec::vector(3)$$),
('sparsevec_to_vector(sparsevec,integer,boolean)', $$SELECT '{1:3.4028235e38,2:-1e-45}/2'::sparsevec::vector$$),
('sparsevec_to_halfvec(sparsevec,integer,boolean)', $$SELECT '{1:65520}/1'::sparsevec::halfvec$$),
('sparsevec_to_halfvec(sparsevec,integer,boolean)', $$SELECT '{1:1e-8}/1'::sparsevec::halfvec$$),
('sparsevec_to_halfvec(sparsevec,integer,boolean)', $$SELECT '{}/16001'::sparsevec::halfvec$$),
('sparsevec_to_halfvec(sparsevec,integer,boolean)', $$SELECT '{1:1}/2'::sparsevec::halfvec(3)$$),
('array_to_sparsevec(integer[],integer,boolean)', $$SELECT '{}'::integer[]::sparsevec$$),
('array_to_sparsevec(integer[],integer,boolean)', $$SELECT '{{1,2}}'::integer[]::sparsevec$$),
('array_to_sparsevec(integer[],integer,boolean)', $$SELECT '{1,NULL}'::integer[]::sparsevec$$),
('array_to_sparsevec(integer[],integer,boolean)', $$SELECT '{1,2}'::integer[]::sparsevec(3)$$),
('array_to_sparsevec(integer[],integer,boolean)', $$SELECT array_fill(1, ARRAY[16001])::sparsevec$$),
('array_to_sparsevec(integer[],integer,boolean)', $$SELECT length(array_fill(0, ARRAY[100000])::sparsevec::text)$$),
('array_to_sparsevec(real[],integer,boolean)', $$SELECT '{0,NaN}'::real[]::sparsevec$$),
('array_to_sparsevec(real[],integer,boolean)', $$SELECT '{Infinity}'::real[]::sparsevec$$),
('array_to_sparsevec(real[],integer,boolean)', $$SELECT '{0,-0}'::real[]::sparsevec$$),
('array_to_sparsevec(double precision[],integer,boolean)', $$SELECT '{4e38,1}'::float8[]::sparsevec$$),
('array_to_sparsevec(double precision[],integer,boolean)', $$SELECT '{1e-50,1}'::float8[]::sparsevec$$),
('array_to_sparsevec(double precision[],integer,boolean)', $$SELECT array_to_sparsevec('{NaN}'::float8[], 2, false)$$),
('array_to_sparsevec(numeric[],integer,boolean)', $$SELECT '{NaN}'::numeric[]::sparsevec$$),
('array_to_sparsevec(numeric[],integer,boolean)', $$SELECT '{1e39}'::numeric[]::sparsevec$$),
('array_to_sparsevec(numeric[],integer,boolean)', $$SELECT '{0,1.5}'::numeric[]::sparsevec$$),
-- -------------------------------------------------------------- sparsevec: functions, operators
('l2_distance(sparsevec,sparsevec)', $$SELECT '{1:1}/2'::sparsevec <-> '{1:1}/1'$$),
('l2_distance(sparsevec,sparsevec)', $$SELECT l2_distance('{1:3e38}/1'::sparsevec, '{1:-3e38}/1')$$),
('sparsevec_l2_squared_distance(sparsevec,sparsevec)', $$SELECT sparsevec_l2_squared_distance('{}/2', '{}/1')$$),
('sparsevec_l2_squared_distance(sparsevec,sparsevec)', $$SELECT sparsevec_l2_squared_distance('{1:3,2:4}/2', '{}/2')$$),
('inner_product(sparsevec,sparsevec)', $$SELECT inner_product('{1:1}/2'::sparsevec, '{}/3')$$),
('sparsevec_negative_inner_product(sparsevec,sparsevec)', $$SELECT '{1:1}/2'::sparsevec <#> '{}/3'$$),
('sparsevec_negative_inner_product(sparsevec,sparsevec)', $$SELECT '{1:2,2:3}/2'::sparsevec <#> '{1:4}/2'$$),
('cosine_distance(sparsevec,sparsevec)', $$SELECT '{1:1}/2'::sparsevec <=> '{}/3'$$),
('cosine_distance(sparsevec,sparsevec)', $$SELECT cosine_distance('{}/2'::sparsevec, '{1:1}/2')$$),
('l1_distance(sparsevec,sparsevec)', $$SELECT '{1:1}/2'::sparsevec <+> '{}/3'$$),
('l2_norm(sparsevec)', $$SELECT l2_norm('{1:3e38,2:3e38}/2'::sparsevec)$$),
('l2_normalize(sparsevec)', $$SELECT l2_normalize('{}/2'::sparsevec)$$),
('l2_normalize(sparsevec)', $$SELECT l2_normalize('{1:3e38,2:1e-37}/2'::sparsevec)$$),
('sparsevec_lt(sparsevec,sparsevec)', $$SELECT '{1:1}/2'::sparsevec < '{1:1}/1'$$),
('sparsevec_le(sparsevec,sparsevec)', $$SELECT '{1:-1}/2'::sparsevec <= '{}/2'$$),
('sparsevec_eq(sparsevec,sparsevec)', $$SELECT '{}/2'::sparsevec = '{}/3'$$),
('sparsevec_ne(sparsevec,sparsevec)', $$SELECT '{2:1}/2'::sparsevec <> '{2:1}/2'$$),
('sparsevec_ge(sparsevec,sparsevec)', $$SELECT '{}/2'::sparsevec >= '{2:1e-45}/2'$$),
('sparsevec_gt(sparsevec,sparsevec)', $$SELECT '{1:1}/2'::sparsevec > '{1:1,2:-1}/2'$$),
('sparsevec_cmp(sparsevec,sparsevec)', $$SELECT sparsevec_cmp('{2:-1}/3', '{}/2')$$),
-- -------------------------------------------------------------------------------------- bit
('binary_quantize(vector)', $$SELECT binary_quantize('[0,-0,1e-45,-1e-45,3e38]'::vector)$$),
('binary_quantize(halfvec)', $$SELECT binary_quantize('[0,-0,6e-8,-65504,65504]'::halfvec)$$),
('hamming_distance(bit,bit)', $$SELECT hamming_distance('101', '10')$$),
('hamming_distance(bit,bit)', $$SELECT B'101'::bit(3) <~> B'010'::bit(3)$$),
('jaccard_distance(bit,bit)', $$SELECT jaccard_distance('', '')$$),
('jaccard_distance(bit,bit)', $$SELECT B'1' <%> B'10'$$),
-- --------------------------------------------- the planner's OR marker (always true; see am.sql)
('strata_filter_marker(vector,text)', $$SELECT '[1,NaN]'::vector <?> '{"Or":[]}'$$),
('strata_filter_marker(vector,text)', $$SELECT '[1,2]'::vector <?> 'not a predicate'$$),
('strata_filter_marker(halfvec,text)', $$SELECT '[70000]'::halfvec <?> ''$$),
('strata_filter_marker(sparsevec,text)', $$SELECT '{1:1}/0'::sparsevec <?> ''$$),
('strata_filter_marker(bit,text)', $$SELECT B'101' <?> NULL$$);

-- Functions under test without a case (none may be listed).
SELECT fn AS function_without_case FROM bad_input_surface
WHERE fn NOT IN (SELECT fn FROM bad_input_cases) ORDER BY fn;

-- Cases naming a function that is not under test (none may be listed).
SELECT DISTINCT fn AS case_without_function FROM bad_input_cases
WHERE fn NOT IN (SELECT fn FROM bad_input_surface) ORDER BY fn;

SELECT count(*) AS functions_under_test FROM bad_input_surface;

-- Every case, in table order: the function, the query, and what it returned or raised.
\pset format unaligned
SELECT fn, query, run_bad_input_case(query) AS outcome FROM bad_input_cases ORDER BY id;
\pset format aligned

DROP VIEW bad_input_surface;
DROP FUNCTION run_bad_input_case(text), binary_input(text, bytea);
DROP TABLE bad_input_cases;
