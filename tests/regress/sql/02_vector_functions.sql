-- Distances and functions against hand-checked values.
SELECT '[1,2,3]'::vector <-> '[4,5,6]'::vector AS l2, sqrt(27) AS expected;
SELECT '[1,2,3]'::vector <#> '[4,5,6]'::vector AS neg_ip;
SELECT inner_product('[1,2,3]'::vector, '[4,5,6]'::vector);
SELECT '[1,0]'::vector <=> '[0,1]'::vector AS orthogonal,
       '[1,2]'::vector <=> '[2,4]'::vector AS parallel,
       '[1,2]'::vector <=> '[-1,-2]'::vector AS opposite;
SELECT '[0,0]'::vector <=> '[1,1]'::vector AS zero_vector_is_nan;
SELECT l1_distance('[1,2,3]'::vector, '[4,0,3]'::vector), '[1,2,3]'::vector <+> '[4,0,3]'::vector;
SELECT l2_distance('[3,4]'::vector, '[0,0]'::vector), cosine_distance('[1,1]'::vector, '[1,1]'::vector);
SELECT vector_norm('[3,4]'::vector), l2_normalize('[3,4]'::vector), l2_normalize('[0,0]'::vector);
SELECT subvector('[1,2,3,4,5]'::vector, 2, 3), subvector('[1,2,3,4,5]'::vector, 4, 10);
SELECT subvector('[1,2,3,4,5]'::vector, 6, 1);
SELECT subvector('[1,2,3,4,5]'::vector, 1, 0);
SELECT '[1,2,3]'::vector + '[4,5,6]'::vector, '[1,2,3]'::vector - '[4,5,6]'::vector,
       '[1,2,3]'::vector * '[4,5,6]'::vector, '[1,2]'::vector || '[3]'::vector;
SELECT '[3e38]'::vector + '[3e38]'::vector;
SELECT '[1e-30]'::vector * '[1e-30]'::vector;

-- Every distance against an exact float8 oracle computed from the arrays, on 300 random pairs
-- of 1 to 1100 dimensions (odd lengths included). Tolerance: 1e-5 relative to the sum of |terms|.
SELECT setseed(0.25);
CREATE TEMP TABLE pairs AS
SELECT i, d,
       ARRAY(SELECT (random() * 2 - 1)::real FROM generate_series(1, d)) AS a,
       ARRAY(SELECT (random() * 2 - 1)::real FROM generate_series(1, d)) AS b
FROM generate_series(1, 300) AS i, LATERAL (SELECT 1 + (i * 37) % 1100 AS d) AS dims;
SELECT count(*) AS pairs, min(d) AS min_dims, max(d) AS max_dims,
       count(*) FILTER (WHERE d % 2 = 1) AS odd_lengths FROM pairs;
SELECT count(*) FILTER (WHERE abs((a::vector <-> b::vector) - o.l2) > 1e-5 * (1 + o.l2)) AS l2_mismatches,
       count(*) FILTER (WHERE abs((a::vector <#> b::vector) + o.ip) > 1e-5 * (1 + o.abs_ip)) AS ip_mismatches,
       count(*) FILTER (WHERE abs((a::vector <=> b::vector) - (1 - o.ip / (o.na * o.nb))) > 1e-5) AS cosine_mismatches,
       count(*) FILTER (WHERE abs((a::vector <+> b::vector) - o.l1) > 1e-5 * (1 + o.l1)) AS l1_mismatches,
       count(*) FILTER (WHERE abs(vector_norm(a::vector) - o.na) > 1e-6 * (1 + o.na)) AS norm_mismatches
FROM pairs, LATERAL (
    SELECT sqrt(sum((x - y) ^ 2)) AS l2, sum(x * y) AS ip, sum(abs(x * y)) AS abs_ip,
           sum(abs(x - y)) AS l1, sqrt(sum(x * x)) AS na, sqrt(sum(y * y)) AS nb
    FROM unnest(a::float8[], b::float8[]) AS u(x, y)) AS o;
-- The same through halfvec (elements rounded to half precision first, oracle on the rounded values).
SELECT count(*) FILTER (WHERE abs((ha <-> hb) - o.l2) > 1e-5 * (1 + o.l2)) AS l2_mismatches,
       count(*) FILTER (WHERE abs((ha <#> hb) + o.ip) > 1e-5 * (1 + o.abs_ip)) AS ip_mismatches,
       count(*) FILTER (WHERE abs((ha <=> hb) - (1 - o.ip / (o.na * o.nb))) > 1e-5) AS cosine_mismatches,
       count(*) FILTER (WHERE abs((ha <+> hb) - o.l1) > 1e-5 * (1 + o.l1)) AS l1_mismatches
FROM (SELECT a::halfvec AS ha, b::halfvec AS hb FROM pairs) AS h, LATERAL (
    SELECT sqrt(sum((x - y) ^ 2)) AS l2, sum(x * y) AS ip, sum(abs(x * y)) AS abs_ip,
           sum(abs(x - y)) AS l1, sqrt(sum(x * x)) AS na, sqrt(sum(y * y)) AS nb
    FROM unnest(ha::real[]::float8[], hb::real[]::float8[]) AS u(x, y)) AS o;

-- Exact nearest neighbours by ORDER BY agree with the oracle ranking.
CREATE TEMP TABLE points AS
-- (`16 + 0 * i` correlates the subquery with the row, so each row gets its own random vector.)
SELECT i AS id, ARRAY(SELECT (random() * 2 - 1)::real FROM generate_series(1, 16 + 0 * i)) AS a
FROM generate_series(1, 500) AS i;
CREATE TEMP TABLE probe AS SELECT ARRAY(SELECT (random() * 2 - 1)::real FROM generate_series(1, 16)) AS q;
SELECT (SELECT array_agg(id) FROM (SELECT id FROM points, probe ORDER BY a::vector <-> q::vector, id LIMIT 10) s)
     = (SELECT array_agg(id) FROM (
          SELECT id FROM points, probe,
                 LATERAL (SELECT sum((x - y) ^ 2) AS d FROM unnest(a::float8[], q::float8[]) u(x, y)) o
          ORDER BY o.d, id LIMIT 10) s) AS l2_top10_matches_oracle;
SELECT (SELECT array_agg(id) FROM (SELECT id FROM points, probe ORDER BY a::vector <=> q::vector, id LIMIT 10) s)
     = (SELECT array_agg(id) FROM (
          SELECT id FROM points, probe,
                 LATERAL (SELECT 1 - sum(x * y) / sqrt(sum(x * x) * sum(y * y)) AS d
                          FROM unnest(a::float8[], q::float8[]) u(x, y)) o
          ORDER BY o.d, id LIMIT 10) s) AS cosine_top10_matches_oracle;
