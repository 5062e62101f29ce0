-- The planner uses the strata index for ORDER BY … LIMIT, and prefers a btree when a very
-- selective filter makes that cheaper.
CREATE TABLE planned (id int PRIMARY KEY, tenant int NOT NULL, v vector(3));
SELECT setseed(0.1);
INSERT INTO planned
SELECT i, i % 1000, ARRAY[random(), random(), random()]::real[]
FROM generate_series(1, 20000) AS i;
CREATE INDEX planned_tenant ON planned (tenant);
CREATE INDEX planned_v ON planned USING strata (v) WITH (kind = 'hnsw');
ANALYZE planned;
-- No filter: the strata index answers the ORDER BY.
EXPLAIN (COSTS OFF) SELECT id FROM planned ORDER BY v <-> '[0.5,0.5,0.5]' LIMIT 10;
-- A filter keeping 0.1 % of the rows: fetch them through the btree and sort the 20 rows.
EXPLAIN (COSTS OFF) SELECT id FROM planned WHERE tenant = 7 ORDER BY v <-> '[0.5,0.5,0.5]' LIMIT 10;
-- A filter keeping 10 %: still the strata index, which widens until LIMIT rows pass the filter.
EXPLAIN (COSTS OFF) SELECT id FROM planned WHERE tenant < 100 ORDER BY v <-> '[0.5,0.5,0.5]' LIMIT 10;
SELECT count(*) FROM (SELECT id FROM planned WHERE tenant < 100 ORDER BY v <-> '[0.5,0.5,0.5]' LIMIT 10) s;
-- Without ORDER BY the index is never used.
EXPLAIN (COSTS OFF) SELECT count(*) FROM planned WHERE v IS NOT NULL;
DROP TABLE planned;
