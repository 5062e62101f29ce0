-- Aggregates, btree ordering, DISTINCT.
CREATE TABLE agg (g int, v vector(2), h halfvec(2));
INSERT INTO agg VALUES (1, '[1,2]', '[1,2]'), (1, '[3,4]', '[3,4]'), (2, '[5,6]', '[5,6]'), (2, NULL, NULL);
SELECT avg(v), sum(v), avg(h), sum(h) FROM agg;
SELECT g, avg(v), sum(v), count(v) FROM agg GROUP BY g ORDER BY g;
SELECT avg(v), sum(v) FROM agg WHERE false;
SELECT avg(v) FROM (VALUES ('[1,2]'::vector), ('[1,2,3]'::vector)) AS t(v);
SELECT sum(v) FROM (VALUES ('[3e38]'::vector), ('[3e38]'::vector)) AS t(v);

-- The mean matches the per-dimension mean computed from arrays (oracle), here over 1000 rows.
SELECT setseed(0.75);
CREATE TEMP TABLE many AS
SELECT ARRAY(SELECT (random() * 10 - 5)::real FROM generate_series(1, 7 + 0 * i)) AS a
FROM generate_series(1, 1000) AS i;
SELECT bool_and(abs(m.x - o.x) < 1e-5) AS avg_matches_oracle
FROM (SELECT ordinality AS k, x FROM unnest((SELECT avg(a::vector)::real[] FROM many)) WITH ORDINALITY AS u(x)) AS m
JOIN (SELECT k, avg(a[k]) AS x FROM many, generate_series(1, 7) AS k GROUP BY k) AS o USING (k);

-- Comparison operators, ORDER BY, DISTINCT and a btree index.
SELECT '[1,2]'::vector < '[1,3]'::vector, '[1,2]'::vector = '[1,2]'::vector, '[1,2]'::vector <> '[1,2,0]'::vector,
       '[2]'::vector > '[1,9]'::vector, '[1,2]'::vector <= '[1,2]'::vector, '[1,2]'::vector >= '[1,2,3]'::vector;
CREATE TABLE sorted (v vector);
INSERT INTO sorted VALUES ('[3,1]'), ('[1,2]'), ('[1,2]'), ('[1,2,0]'), ('[-1,5]'), ('[1,1]');
SELECT v FROM sorted ORDER BY v;
SELECT DISTINCT v FROM sorted ORDER BY v;
CREATE INDEX ON sorted USING btree (v);
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT v FROM sorted WHERE v = '[1,2]' ORDER BY v;
SELECT v FROM sorted WHERE v = '[1,2]' ORDER BY v;
RESET enable_seqscan;
SELECT DISTINCT h FROM (VALUES ('[1,2]'::halfvec), ('[1,2]'::halfvec), ('[0,3]'::halfvec)) AS t(h) ORDER BY h;
DROP TABLE agg, sorted;
