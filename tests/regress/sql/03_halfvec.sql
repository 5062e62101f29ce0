-- halfvec: same format and rules, half-precision storage.
SELECT '[1,2.5,-3]'::halfvec;
SELECT '[0.1,65504,-65504]'::halfvec;
SELECT '[1,2]'::halfvec(2), vector_dims('[1,2,3]'::halfvec);
SELECT pg_column_size('[1,2,3,4]'::halfvec) AS halfvec_bytes, pg_column_size('[1,2,3,4]'::vector) AS vector_bytes;

CREATE TABLE hitems (id int PRIMARY KEY, v halfvec(3));
INSERT INTO hitems VALUES (1, '[1,2,3]');
INSERT INTO hitems VALUES (2, '[65520,1,2]');
INSERT INTO hitems VALUES (2, '[1,2');
INSERT INTO hitems VALUES (2, '[]');
INSERT INTO hitems VALUES (2, '[1,,2]');
INSERT INTO hitems VALUES (2, '[NaN,1,2]');
INSERT INTO hitems VALUES (2, '[Infinity,1,2]');
INSERT INTO hitems VALUES (2, '[1,2]');
INSERT INTO hitems VALUES (2, '[1,2,3]'::vector * '[1e5,1,1]'::vector);
SELECT '[1,2,3]'::halfvec(0);
SELECT * FROM hitems;

SELECT '[1,2,3]'::halfvec <-> '[4,5,6]'::halfvec AS l2,
       '[1,2,3]'::halfvec <#> '[4,5,6]'::halfvec AS neg_ip,
       '[1,0]'::halfvec <=> '[0,1]'::halfvec AS cosine,
       '[1,2,3]'::halfvec <+> '[4,0,3]'::halfvec AS l1;
SELECT inner_product('[1,2]'::halfvec, '[3,4]'::halfvec), l2_norm('[3,4]'::halfvec);
-- As in pgvector: vector_norm is vector's alone (an untyped literal resolves to it), halfvec's
-- norm is l2_norm, and halfvec does not cast to vector implicitly.
SELECT vector_norm('[3,4]');
SELECT vector_norm('[3,4]'::halfvec);
SELECT l2_normalize('[3,4]'::halfvec), subvector('[1,2,3,4]'::halfvec, 2, 2);
SELECT '[1,2]'::halfvec + '[3,4]'::halfvec, '[1,2]'::halfvec - '[3,4]'::halfvec,
       '[1,2]'::halfvec * '[3,4]'::halfvec, '[1]'::halfvec || '[2]'::halfvec;
SELECT '[60000]'::halfvec + '[60000]'::halfvec;
SELECT '[1,2,3]'::halfvec <-> '[1,2]'::halfvec;

-- Binary COPY round trip.
CREATE TABLE hitems_copy (LIKE hitems);
COPY hitems TO '/tmp/pg_strata_regress_hitems.bin' WITH (FORMAT binary);
COPY hitems_copy FROM '/tmp/pg_strata_regress_hitems.bin' WITH (FORMAT binary);
SELECT * FROM hitems_copy;
DROP TABLE hitems, hitems_copy;
