-- Filter columns (issue 16): the key columns after the vector. A WHERE clause on them reaches the
-- index as scan keys and filters rows before distances are computed. With kind = 'flat' an
-- index scan must return exactly the rows of the exact plan (sequential scan + sort): the same
-- top 10 for every query, and every matching row when there is no LIMIT — through memtables,
-- flushed segments, merges, VACUUM and updates of the filter columns.

CREATE TABLE f_items (
    id int PRIMARY KEY,
    tenant int,
    small int2,
    tags text[],
    nums int8[],
    label varchar(8),
    at timestamptz,
    embedding vector(4)
);
SELECT setseed(0.25);
CREATE FUNCTION f_random_tags() RETURNS text[] LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN random() < 0.1 THEN NULL
                ELSE ARRAY(SELECT (ARRAY['red', 'green', 'blue', 'gold', 'grey'])[1 + floor(random() * 5)::int]
                           FROM generate_series(1, floor(random() * 4)::int)) END
$$;
CREATE FUNCTION f_random_row(i int) RETURNS f_items LANGUAGE sql VOLATILE AS $$
    SELECT i,
           CASE WHEN random() < 0.05 THEN NULL ELSE floor(random() * 20)::int END,
           floor(random() * 4)::int2,
           f_random_tags(),
           ARRAY[floor(random() * 6)::int8, floor(random() * 6)::int8],
           CASE WHEN random() < 0.1 THEN NULL ELSE (ARRAY['a', 'b', 'c'])[1 + floor(random() * 3)::int] END,
           '2026-01-01'::timestamptz + floor(random() * 1000) * interval '1 hour',
           ARRAY[random() - 0.5, random() - 0.5, random() - 0.5, random() - 0.5]::vector
$$;
INSERT INTO f_items SELECT (f_random_row(i)).* FROM generate_series(1, 2500) AS i;

CREATE INDEX f_idx ON f_items USING strata (embedding vector_l2_ops, tenant, small, tags, nums, label, at)
    WITH (kind = 'flat', memtable_rows = 256);

-- The filters checked, each a WHERE clause (an OR reaches the index through the marker operator
-- <?>, with the OR itself kept as a filter; IS NULL and an OR with an arm on another column are
-- not index conditions: the executor applies them).
CREATE TABLE f_filters (name text, clause text);
INSERT INTO f_filters VALUES
    ('int =', 'tenant = 3'),
    ('int = bigint', 'tenant = 3::bigint'),
    ('int IN', 'tenant IN (1, 5, 7)'),
    ('int = ANY with NULL', 'tenant = ANY (ARRAY[2, NULL])'),
    ('int range', 'tenant >= 2 AND tenant < 4'),
    ('int2 = int4', 'small = 2'),
    ('varchar =', 'label = ''b'''),
    ('text[] &&', 'tags && ARRAY[''gold'', ''grey'']'),
    ('text[] @>', 'tags @> ARRAY[''red'', ''blue'']'),
    ('int8[] &&', 'nums && ARRAY[1, 2]::int8[]'),
    ('int8[] @>', 'nums @> ARRAY[3]::int8[]'),
    ('timestamptz range', 'at >= ''2026-01-10'' AND at < ''2026-01-20'''),
    ('and', 'tenant = 4 AND tags && ARRAY[''red''] AND label = ''a'''),
    ('or', 'tenant = 1 OR label = ''c'''),
    ('or of ands', '(tags && ARRAY[''gold''] AND tenant < 5) OR at >= ''2026-02-10'' OR nums @> ARRAY[5]::int8[]'),
    ('or, one arm elsewhere (executor)', 'tenant = 1 OR id % 50 = 0'),
    ('is null (executor)', 'label IS NULL'),
    ('= NULL', 'tenant = NULL::int'),
    ('nothing', 'tenant = 999');

CREATE TABLE f_queries AS
SELECT g AS q, ARRAY[random() - 0.5, random() - 0.5, random() - 0.5, random() - 0.5]::vector::text AS v
FROM generate_series(1, 8) AS g;

-- Ids of the rows `ORDER BY embedding <-> v` returns under `clause` (LIMIT `k`, or all), through
-- the index or by the exact plan.
CREATE FUNCTION f_ids(clause text, v text, k int, via_index bool) RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE
    result int[];
BEGIN
    PERFORM set_config('enable_indexscan', via_index::text, true);
    PERFORM set_config('enable_seqscan', (NOT via_index)::text, true);
    PERFORM set_config('enable_bitmapscan', 'false', true);
    EXECUTE format('SELECT coalesce(array_agg(id ORDER BY n), ''{}'') FROM (SELECT id, row_number() OVER () AS n FROM '
                   '(SELECT id FROM f_items WHERE %s ORDER BY embedding <-> %L %s) s) t',
                   clause, v, CASE WHEN k IS NULL THEN '' ELSE 'LIMIT ' || k END)
        INTO result;
    RETURN result;
END $$;

-- Per filter: the queries whose top 10 differ from the exact plan's, those whose full result
-- (no LIMIT, compared as sets) differs, and the rows matching.
CREATE FUNCTION f_check() RETURNS TABLE (filter text, top10_mismatches bigint, all_rows_mismatches bigint, matching bigint)
LANGUAGE sql AS $$
    SELECT f.name,
           count(*) FILTER (WHERE f_ids(f.clause, q.v, 10, true) <> f_ids(f.clause, q.v, 10, false)),
           count(*) FILTER (WHERE (SELECT array_agg(x ORDER BY x) FROM unnest(f_ids(f.clause, q.v, NULL, true)) x)
                                  IS DISTINCT FROM
                                  (SELECT array_agg(x ORDER BY x) FROM unnest(f_ids(f.clause, q.v, NULL, false)) x)),
           max(cardinality(f_ids(f.clause, q.v, NULL, false)))
    FROM f_filters f CROSS JOIN f_queries q
    GROUP BY f.name ORDER BY f.name
$$;

-- The plans: index conditions on filter columns; an OR as a marker condition (and a filter).
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM f_items WHERE tenant = 3 AND tags && ARRAY['red'] ORDER BY embedding <-> '[0,0,0,0]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM f_items WHERE tenant IN (1, 2) AND at < '2026-02-01' ORDER BY embedding <-> '[0,0,0,0]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM f_items WHERE (tenant = 1 OR label = 'c') ORDER BY embedding <-> '[0,0,0,0]' LIMIT 10;
RESET enable_seqscan;

-- One segment (CREATE INDEX).
SELECT * FROM f_check();

-- Rows in memtables and flushed segments.
INSERT INTO f_items SELECT (f_random_row(i)).* FROM generate_series(2501, 3300) AS i;
SELECT * FROM f_check();
SELECT strata_flush('f_idx');
SELECT strata_wait_for_merges('f_idx');
SELECT count(*) > 1 AS several_parts FROM strata_index_stats('f_idx');
SELECT * FROM f_check();

-- VACUUM, updates of filter columns (new row versions with new values), more rows.
DELETE FROM f_items WHERE id % 7 = 0;
UPDATE f_items SET tenant = 3, tags = ARRAY['gold'] WHERE id % 11 = 0;
UPDATE f_items SET label = 'b', at = '2026-01-15' WHERE id % 13 = 0;
VACUUM f_items;
INSERT INTO f_items SELECT (f_random_row(i)).* FROM generate_series(3301, 3500) AS i;
SELECT * FROM f_check();
SELECT strata_flush('f_idx');
SELECT strata_wait_for_merges('f_idx');
SELECT * FROM f_check();

-- A keys-only scan (no ORDER BY) still returns every matching row.
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT (SELECT count(*) FROM f_items WHERE tenant = 5) = (SELECT count(*) FROM f_items WHERE tenant + 0 = 5) AS keys_only_scan_complete;
RESET enable_seqscan;
RESET enable_bitmapscan;

-- EXPLAIN ANALYZE shows what the filtered searches did.
SET enable_seqscan = off;
CREATE FUNCTION f_explain_lines(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    line text;
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || query LOOP
        IF line LIKE 'Strata Filter:%' THEN
            RETURN NEXT regexp_replace(line, '=[0-9]+', '=N', 'g');
        END IF;
    END LOOP;
END $$;
SELECT f_explain_lines('SELECT id FROM f_items WHERE tenant = 3 ORDER BY embedding <-> ''[0,0,0,0]'' LIMIT 10');
RESET enable_seqscan;

-- Refusals: a filter column first, a type the index cannot keep, a nondeterministic collation,
-- an array longer than max_array_elements (at CREATE INDEX and at INSERT).
CREATE INDEX ON f_items USING strata (tenant, embedding);
CREATE TABLE f_points (id int, p float8[], embedding vector(4));
CREATE INDEX ON f_points USING strata (embedding, p);
CREATE COLLATION f_case_insensitive (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE f_ci (label text COLLATE f_case_insensitive, embedding vector(4));
CREATE INDEX ON f_ci USING strata (embedding, label);
CREATE INDEX ON f_items USING strata (embedding, tags) WITH (max_array_elements = 2);
CREATE INDEX f_small ON f_items USING strata (embedding, nums) WITH (max_array_elements = 2, kind = 'flat');
INSERT INTO f_items VALUES (9999, 1, 1, NULL, ARRAY[1, 2, 3]::int8[], 'a', now(), '[0,0,0,1]');
INSERT INTO f_items VALUES (9999, 1, 1, NULL, ARRAY[1, 2, 2, NULL]::int8[], 'a', now(), '[0,0,0,1]');
DROP INDEX f_small;
DROP TABLE f_points, f_ci;
DROP COLLATION f_case_insensitive;
DROP FUNCTION f_check(), f_ids(text, text, int, bool), f_explain_lines(text), f_random_row(int), f_random_tags();
DROP TABLE f_items, f_filters, f_queries;
