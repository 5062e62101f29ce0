-- Text input and output in pgvector's format.
SELECT '[1,2.5,-3]'::vector;
SELECT '  [ 1 , 2 , 3 ]  '::vector;
SELECT '[1e-7,1e20,-0,0.0001,123456]'::vector;
SELECT '[1.5,2]'::vector(2);
SELECT vector_dims('[1,2,3,4]'::vector);

-- Output round-trips exactly (shortest decimal that reads back to the same float4).
SELECT v::text::vector = v AS round_trips
FROM (SELECT ('[' || 1.0/3 || ',' || pi() || ',' || 1e-38 || ']')::vector AS v) s;

-- Typmods.
CREATE TABLE items (id int PRIMARY KEY, v vector(3));
INSERT INTO items VALUES (1, '[1,2,3]'), (2, '[4,5,6]');
\d items
SELECT '[1,2]'::vector(3);
SELECT '[1,2,3]'::vector(0);
SELECT '[1,2,3]'::vector(16001);
SELECT '[1,2,3]'::vector(3, 2);

-- Bad input: each fails with a clear error and changes nothing.
INSERT INTO items VALUES (3, '[1,2');
INSERT INTO items VALUES (3, '[]');
INSERT INTO items VALUES (3, '[1,,2]');
INSERT INTO items VALUES (3, '[NaN,1,2]');
INSERT INTO items VALUES (3, '[Infinity,1,2]');
INSERT INTO items VALUES (3, '[-inf,1,2]');
INSERT INTO items VALUES (3, '[1e39,1,2]');
INSERT INTO items VALUES (3, '1,2,3');
INSERT INTO items VALUES (3, '[1,2,3]x');
INSERT INTO items VALUES (3, '[1,2,a]');
INSERT INTO items VALUES (3, '[1,2,3,4]');
INSERT INTO items VALUES (3, '[1,2]');
INSERT INTO items SELECT 3, ('[' || array_to_string(array_fill(1, ARRAY[16001]), ',') || ']')::vector;
UPDATE items SET v = '[1,2,3,4]' WHERE id = 1;
COPY items FROM STDIN;
3	[1,2,3]
4	[1,2
\.
SELECT id, v FROM items ORDER BY id;

-- Dimension mismatch between operands.
SELECT '[1,2,3]'::vector <-> '[1,2,3,4]'::vector;
SELECT '[1,2,3]'::vector <=> '[1,2,3,4]'::vector;
SELECT '[1,2,3]'::vector <#> '[1,2,3,4]'::vector;
SELECT '[1,2,3]'::vector + '[1,2,3,4]'::vector;
SELECT v <-> '[1,2]' FROM items;

-- 16,000 dimensions are stored and read back intact.
CREATE TABLE wide (v vector(16000));
INSERT INTO wide SELECT array_fill(0.5::real, ARRAY[16000])::vector;
SELECT vector_dims(v), vector_norm(v) = sqrt(16000 * 0.25) AS norm_ok FROM wide;
SELECT pg_column_size(v) FROM wide;

-- Binary COPY round trip (server-side file).
CREATE TABLE items_copy (LIKE items);
COPY items TO '/tmp/pg_strata_regress_items.bin' WITH (FORMAT binary);
COPY items_copy FROM '/tmp/pg_strata_regress_items.bin' WITH (FORMAT binary);
SELECT (SELECT array_agg(v ORDER BY id) FROM items) = (SELECT array_agg(v ORDER BY id) FROM items_copy) AS binary_round_trip;
COPY (SELECT '[1,2]'::vector AS v) TO '/tmp/pg_strata_regress_short.bin' WITH (FORMAT binary);
COPY items_copy (v) FROM '/tmp/pg_strata_regress_short.bin' WITH (FORMAT binary);
SELECT count(*) FROM items_copy;
DROP TABLE items, items_copy, wide;
