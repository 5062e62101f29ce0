-- Casts between vectors and arrays, and between vector and halfvec.
SELECT ARRAY[1,2,3]::vector, ARRAY[1.5,2.5]::real[]::vector, ARRAY[1.5,2.5]::float8[]::vector,
       ARRAY[1.25,2.5]::numeric[]::vector;
SELECT '[1,2.5,3]'::vector::real[], '[1,2.5,3]'::vector::float8[], '[1,2.5,3]'::vector::numeric[],
       '[1,2.5,3.5]'::vector::integer[];
SELECT ARRAY[1,2,3]::halfvec, ARRAY[1.5,2.5]::float8[]::halfvec, '[1,2.5]'::halfvec::real[];
SELECT '[1,2.5]'::vector::halfvec, '[1,2.5]'::halfvec::vector, '[0.1]'::vector::halfvec::vector;
SELECT ARRAY[1,2,3]::vector(2);
SELECT ARRAY[1,2]::halfvec(3);
SELECT ARRAY[[1,2],[3,4]]::vector;
SELECT ARRAY[1,NULL,3]::vector;
SELECT '{}'::real[]::vector;
SELECT ARRAY['NaN'::float8]::vector;
SELECT ARRAY['Infinity'::real]::vector;
SELECT ARRAY[1e39::float8]::vector;
SELECT ARRAY[1e6::float8]::halfvec;
SELECT '[1e6]'::vector::halfvec;
SELECT '[3e9]'::vector::integer[];
SELECT '[1,2,3]'::vector::vector(2);
SELECT '[1,2,3]'::vector::halfvec(2);

-- Assignment casts let arrays go straight into vector columns.
CREATE TABLE cast_target (v vector(3), h halfvec(3));
INSERT INTO cast_target VALUES (ARRAY[1,2,3], ARRAY[4,5,6]::real[]);
INSERT INTO cast_target VALUES ('[1,2,3]'::vector, '[1,2,3]'::vector);
SELECT * FROM cast_target;
DROP TABLE cast_target;

-- Cast contexts, as pgvector 0.8.6 declares them (i: implicit, a: assignment, e: explicit); the
-- casts from vector and halfvec to double precision[], numeric[] and integer[] are pg_strata's.
SELECT castsource::regtype AS source, casttarget::regtype AS target, castcontext AS context
FROM pg_cast
WHERE castsource IN ('vector'::regtype, 'halfvec'::regtype, 'sparsevec'::regtype)
   OR casttarget IN ('vector'::regtype, 'halfvec'::regtype, 'sparsevec'::regtype)
ORDER BY castsource::regtype::text, casttarget::regtype::text;
-- halfvec → vector and halfvec → real[] are assignment casts: allowed into columns, not in
-- expressions.
CREATE TABLE cast_assign (v vector(2), r real[]);
INSERT INTO cast_assign VALUES ('[1,2]'::halfvec, '[3,4]'::halfvec);
SELECT * FROM cast_assign;
DROP TABLE cast_assign;
SELECT '[1,2]'::halfvec <-> '[1,3]'::vector AS mixed_resolves_to_halfvec;
SELECT array_length('[1,2]'::halfvec, 1);
