-- pg_strata on Citus: the admin functions, BM25 statistics and hybrid search for indexes of
-- distributed (and reference) tables.
--
-- On a Citus coordinator an index of a distributed table is a shell: the rows and their indexes
-- live in the shards, on the workers. The functions below look for Citus at call time
-- (pg_extension) and, when the index's table is distributed, run their local form on every
-- shard's index through pg_catalog.master_run_on_worker (in parallel, one connection per shard
-- placement) and combine the results; without Citus, or for a local table, they are the local
-- form. pg_strata does not depend on Citus.
--
--   SELECT * FROM strata_index_stats('items_embedding_idx');  -- the rows of every shard's index
--   SELECT * FROM strata_index_groups('items_embedding_idx'); -- summed over the shards
--   SELECT * FROM strata_index_recovery('items_embedding_idx'); -- a row per shard placement
--   SELECT strata_flush('items_embedding_idx');               -- every shard's; segments summed
--   SELECT strata_wait_for_merges('items_embedding_idx');     -- likewise
--   SELECT strata_bm25_query('items_bm25', 'replication lag');-- BM25 statistics of every shard
--   SELECT * FROM strata_hybrid_keys('items', 'id', 'body', 'embedding', 'replication lag', $1);

-- Whether `relation` is a Citus distributed or reference table, or an index of one (false
-- without Citus).
CREATE FUNCTION strata_is_distributed(relation regclass) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $function$
DECLARE
    found boolean;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'citus'::name) THEN
        RETURN false;
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p
                            WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1
                               OR p.logicalrelid OPERATOR(pg_catalog.=) (
                                  SELECT i.indrelid FROM pg_catalog.pg_index i
                                  WHERE i.indexrelid OPERATOR(pg_catalog.=) $1))'
        INTO found USING relation::oid;
    RETURN found;
END
$function$;
COMMENT ON FUNCTION strata_is_distributed(regclass) IS
    'pg_strata: whether a table (or an index''s table) is a Citus distributed or reference table';

-- The shards' copies of `index`: one row per shard placement (all_placements; a reference
-- table's shard has one on every node) or one per shard, with the shard's index name. No rows
-- without Citus or for a local table.
CREATE FUNCTION strata_shard_indexes(index regclass, all_placements boolean DEFAULT true)
RETURNS TABLE (shardid bigint, nodename text, nodeport integer, shard_index text)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $function$
BEGIN
    IF NOT @extschema@.strata_is_distributed(index) THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE
        'SELECT DISTINCT ON (CASE WHEN $2 THEN p.placementid ELSE s.shardid END)
                s.shardid, p.nodename::text, p.nodeport::integer,
                pg_catalog.shard_name($1, s.shardid)::text
         FROM pg_catalog.pg_index i
         JOIN pg_catalog.pg_dist_shard s ON s.logicalrelid OPERATOR(pg_catalog.=) i.indrelid
         JOIN pg_catalog.pg_dist_shard_placement p ON p.shardid OPERATOR(pg_catalog.=) s.shardid
         WHERE i.indexrelid OPERATOR(pg_catalog.=) $1::oid
         ORDER BY CASE WHEN $2 THEN p.placementid ELSE s.shardid END, p.placementid'
        USING index, all_placements;
END
$function$;
COMMENT ON FUNCTION strata_shard_indexes(regclass, boolean) IS
    'pg_strata: the shard indexes (shard, node, name) of an index of a Citus distributed table';

-- Runs `command` (a format() string whose %1$L is the shard index's name) on every shard's index of
-- `index`, in parallel; one result per placement (per shard unless all_placements). Raises the
-- first failure with its node.
CREATE FUNCTION strata_on_shards(index regclass, command text, all_placements boolean DEFAULT true)
RETURNS SETOF text
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $function$
DECLARE
    names text[];
    ports integer[];
    commands text[];
    r record;
BEGIN
    SELECT pg_catalog.array_agg(s.nodename ORDER BY s.shardid, s.nodeport),
           pg_catalog.array_agg(s.nodeport ORDER BY s.shardid, s.nodeport),
           pg_catalog.array_agg(pg_catalog.format(command, s.shard_index) ORDER BY s.shardid, s.nodeport)
      INTO names, ports, commands
      FROM @extschema@.strata_shard_indexes(index, all_placements) s;
    IF names IS NULL THEN
        RETURN;
    END IF;
    FOR r IN EXECUTE 'SELECT * FROM pg_catalog.master_run_on_worker($1, $2, $3, true)' USING names, ports, commands LOOP
        IF NOT r.success THEN
            RAISE EXCEPTION 'pg_strata: on the shard index of % at %:%: %', index, r.node_name, r.node_port, r.result;
        END IF;
        RETURN NEXT r.result;
    END LOOP;
END
$function$;
COMMENT ON FUNCTION strata_on_shards(regclass, text, boolean) IS
    'pg_strata: runs a command on every shard index of an index of a Citus distributed table';

CREATE FUNCTION strata_index_stats(index regclass)
RETURNS TABLE (part text, id bigint, state text, kind text, rows bigint, deleted bigint, bytes bigint,
               retries bigint, last_error text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $function$
BEGIN
    IF @extschema@.strata_is_distributed(index) THEN
        RETURN QUERY
        SELECT x.* FROM @extschema@.strata_on_shards(index,
                'SELECT coalesce(pg_catalog.json_agg(s), ''[]'')::text FROM @extschema@.strata_index_stats(%1$L) s') o,
             pg_catalog.json_to_recordset(o::json) AS x(part text, id bigint, state text, kind text, rows bigint,
                                                        deleted bigint, bytes bigint, retries bigint, last_error text);
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM @extschema@.strata_index_stats_by_oid(index::oid);
END
$function$;
COMMENT ON FUNCTION strata_index_stats(regclass) IS
    'memtables and segments of a strata index (of every shard of a Citus distributed table): rows, deleted rows, bytes, kind, state, failing background work';

-- Groups of the membership log: summed over every shard's index on Citus.
CREATE FUNCTION strata_index_groups(index regclass) RETURNS TABLE (open bigint, settled bigint)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $function$
BEGIN
    IF @extschema@.strata_is_distributed(index) THEN
        RETURN QUERY
        SELECT coalesce(pg_catalog.sum(x.open), 0)::bigint, coalesce(pg_catalog.sum(x.settled), 0)::bigint
        FROM @extschema@.strata_on_shards(index,
                'SELECT coalesce(pg_catalog.json_agg(g), ''[]'')::text FROM @extschema@.strata_index_groups(%1$L) g') o,
             pg_catalog.json_to_recordset(o::json) AS x(open bigint, settled bigint);
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM @extschema@.strata_index_groups_by_oid(index::oid);
END
$function$;
COMMENT ON FUNCTION strata_index_groups(regclass) IS
    'groups of a strata index''s membership log (status pages): open (a standby holds a memtable for each) and settled; summed over every shard on Citus';

-- What crash recovery did: one row per shard placement's index on Citus, in shard order.
CREATE FUNCTION strata_index_recovery(index regclass)
RETURNS TABLE (recovered_at timestamptz, duration_ms float8, listed_memtables bigint, status_pages bigint,
               dropped_segments bigint, invalidated_rows bigint, rebuilt_memtables bigint, reinserted_rows bigint)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $function$
BEGIN
    IF @extschema@.strata_is_distributed(index) THEN
        RETURN QUERY
        SELECT x.* FROM @extschema@.strata_on_shards(index,
                'SELECT coalesce(pg_catalog.json_agg(r), ''[]'')::text FROM @extschema@.strata_index_recovery(%1$L) r') o,
             pg_catalog.json_to_recordset(o::json) AS x(recovered_at timestamptz, duration_ms float8,
                                                        listed_memtables bigint, status_pages bigint,
                                                        dropped_segments bigint, invalidated_rows bigint,
                                                        rebuilt_memtables bigint, reinserted_rows bigint);
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM @extschema@.strata_index_recovery_by_oid(index::oid);
END
$function$;
COMMENT ON FUNCTION strata_index_recovery(regclass) IS
    'what crash recovery of a strata index did on its first use since the server started (one row per shard on Citus)';

CREATE FUNCTION strata_flush(index regclass) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $function$
BEGIN
    IF @extschema@.strata_is_distributed(index) THEN
        RETURN (SELECT coalesce(pg_catalog.sum(o::bigint), 0)::bigint
                FROM @extschema@.strata_on_shards(index, 'SELECT @extschema@.strata_flush(%1$L)') o);
    END IF;
    RETURN @extschema@.strata_flush_by_oid(index::oid);
END
$function$;
COMMENT ON FUNCTION strata_flush(regclass) IS
    'seal the memtables of a strata index (of every shard of a Citus distributed table) and wait until they are written as segments';

CREATE FUNCTION strata_wait_for_merges(index regclass, timeout_seconds float8 DEFAULT 600) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $function$
BEGIN
    IF @extschema@.strata_is_distributed(index) THEN
        RETURN (SELECT coalesce(pg_catalog.sum(o::bigint), 0)::bigint
                FROM @extschema@.strata_on_shards(index,
                    pg_catalog.format('SELECT @extschema@.strata_wait_for_merges(%%1$L, %s)', timeout_seconds)) o);
    END IF;
    RETURN @extschema@.strata_wait_for_merges_by_oid(index::oid, timeout_seconds);
END
$function$;
COMMENT ON FUNCTION strata_wait_for_merges(regclass, float8) IS
    'wait until the index service has no merge or rebuild left to do in a strata index (every shard''s, on Citus); returns its segment count';

-- BM25 statistics (live rows, total length, each query lexeme's df) of a bm25 index for a query:
-- summed over every shard for an index of a distributed table, the index's own otherwise.
CREATE FUNCTION strata_bm25_stats(index regclass, query text) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $function$
BEGIN
    IF @extschema@.strata_is_distributed(index) THEN
        RETURN @extschema@.strata_bm25_stats_merge(ARRAY(
            SELECT o FROM @extschema@.strata_on_shards(index,
                pg_catalog.format('SELECT @extschema@.strata_bm25_stats(%%1$L, %s)',
                                  pg_catalog.replace(pg_catalog.quote_literal(query), '%', '%%')), false) o));
    END IF;
    RETURN @extschema@.strata_bm25_stats_by_oid(index::oid, query);
END
$function$;
COMMENT ON FUNCTION strata_bm25_stats(regclass, text) IS
    'pg_strata: the BM25 statistics of a bm25 index (of all shards of a Citus distributed table) for a query';

-- A bm25query carrying the statistics of `index` (every shard's, on Citus): ordering by it, or
-- scoring with it, on any shard gives the scores one index over all the rows would give.
--   SELECT id, body <@> q AS score FROM items, strata_bm25_query('items_bm25', 'replication lag') q
--   ORDER BY score LIMIT 10;   -- pass q as a constant or parameter on Citus
CREATE FUNCTION strata_bm25_query(index regclass, query text) RETURNS bm25query
LANGUAGE sql STABLE
SET search_path FROM CURRENT
AS $function$
    SELECT @extschema@.to_bm25query(@extschema@.strata_bm25_stats($1, $2) OPERATOR(pg_catalog.||) $2)
$function$;
COMMENT ON FUNCTION strata_bm25_query(regclass, text) IS
    'pg_strata: a bm25query carrying the BM25 statistics of an index (all shards of a Citus distributed table)';

-- Hybrid search (BM25 + vector, reciprocal rank fusion) returning each row's `key_column` (as
-- text) instead of its ctid: what a distributed table needs, whose ctids are not unique across
-- shards. Each branch is one query on the table, which Citus pushes down to every shard (ORDER BY
-- … LIMIT depth on each, merged on the coordinator); the BM25 branch scores with the statistics
-- of every shard (strata_bm25_query), so its ranks and scores are those of one node holding all
-- the rows. The fusion is strata_hybrid's: text_weight / (rrf_k + text_rank) + vector_weight /
-- (rrf_k + vector_rank), ties broken by the better rank, then the key. `key_column` should be
-- unique (a primary key; on Citus it includes the distribution column). Works on local tables
-- too. Join the keys back in a second step (or a MATERIALIZED CTE):
--   WITH h AS MATERIALIZED (SELECT * FROM strata_hybrid_keys('items', 'id', 'body', 'embedding', 'lag', $1))
--   SELECT d.id, h.score FROM h JOIN items d ON d.id = h.key::bigint ORDER BY h.score DESC;
CREATE FUNCTION strata_hybrid_keys(
    relation regclass,
    key_column name,
    text_column name,
    vector_column name,
    query text,
    query_vector anyelement,
    k integer DEFAULT 10,
    depth integer DEFAULT NULL,
    rrf_k integer DEFAULT 60,
    text_weight float8 DEFAULT 1.0,
    vector_weight float8 DEFAULT 1.0)
RETURNS TABLE (key text, score float8, text_rank bigint, text_score float8, vector_rank bigint, vector_distance float8)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $function$
DECLARE
    text_attnum smallint;
    vector_attnum smallint;
    vector_type oid;
    text_index regclass;
    distance_operator text;
    rows_per_branch integer;
    bm25 @extschema@.bm25query;
    text_branch text;
    vector_branch text;
    r record;
    text_keys text[] := '{}';
    text_scores float8[] := '{}';
    vector_keys text[] := '{}';
    vector_distances float8[] := '{}';
BEGIN
    IF relation IS NULL OR key_column IS NULL OR text_column IS NULL OR vector_column IS NULL OR k IS NULL
       OR rrf_k IS NULL OR text_weight IS NULL OR vector_weight IS NULL THEN
        RAISE EXCEPTION 'strata_hybrid_keys: relation, columns, k, rrf_k and weights must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF k OPERATOR(pg_catalog.<) 1 OR k OPERATOR(pg_catalog.>) 100000 THEN
        RAISE EXCEPTION 'strata_hybrid_keys: k must be between 1 and 100000, not %', k
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    rows_per_branch := coalesce(depth, greatest(4 OPERATOR(pg_catalog.*) k, 40));
    IF rows_per_branch OPERATOR(pg_catalog.<) k OR rows_per_branch OPERATOR(pg_catalog.>) 1000000
       OR rrf_k OPERATOR(pg_catalog.<) 0
       OR NOT (text_weight OPERATOR(pg_catalog.>=) 0::float8 AND vector_weight OPERATOR(pg_catalog.>=) 0::float8
               AND text_weight OPERATOR(pg_catalog.<) 'infinity'::float8
               AND vector_weight OPERATOR(pg_catalog.<) 'infinity'::float8) THEN
        RAISE EXCEPTION 'strata_hybrid_keys: depth must be between k and 1000000, rrf_k 0 or more, weights finite and 0 or more'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM 1 FROM pg_catalog.pg_attribute a
    WHERE a.attrelid OPERATOR(pg_catalog.=) relation::oid AND a.attname OPERATOR(pg_catalog.=) key_column
      AND a.attnum OPERATOR(pg_catalog.>) 0::smallint AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'strata_hybrid_keys: column "%" of relation % does not exist', key_column, relation
            USING ERRCODE = 'undefined_column';
    END IF;
    SELECT a.attnum INTO text_attnum FROM pg_catalog.pg_attribute a
    WHERE a.attrelid OPERATOR(pg_catalog.=) relation::oid AND a.attname OPERATOR(pg_catalog.=) text_column
      AND a.attnum OPERATOR(pg_catalog.>) 0::smallint AND NOT a.attisdropped;
    SELECT a.attnum, a.atttypid INTO vector_attnum, vector_type FROM pg_catalog.pg_attribute a
    WHERE a.attrelid OPERATOR(pg_catalog.=) relation::oid AND a.attname OPERATOR(pg_catalog.=) vector_column
      AND a.attnum OPERATOR(pg_catalog.>) 0::smallint AND NOT a.attisdropped;
    IF text_attnum IS NULL OR vector_attnum IS NULL THEN
        RAISE EXCEPTION 'strata_hybrid_keys: column "%" of relation % does not exist',
            CASE WHEN text_attnum IS NULL THEN text_column ELSE vector_column END, relation
            USING ERRCODE = 'undefined_column';
    END IF;
    SELECT c.oid::regclass INTO text_index
    FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.indexrelid
    JOIN pg_catalog.pg_am am ON am.oid OPERATOR(pg_catalog.=) c.relam
    WHERE i.indrelid OPERATOR(pg_catalog.=) relation::oid AND am.amname OPERATOR(pg_catalog.=) 'bm25'::name
      AND i.indnatts OPERATOR(pg_catalog.=) 1::smallint AND i.indkey[0] OPERATOR(pg_catalog.=) text_attnum
      AND i.indisvalid AND i.indpred IS NULL
    ORDER BY c.oid LIMIT 1;
    IF text_index IS NULL AND query IS NOT NULL THEN
        RAISE EXCEPTION 'strata_hybrid_keys: no bm25 index on %.%', relation, pg_catalog.quote_ident(text_column)
            USING ERRCODE = 'undefined_object';
    END IF;
    SELECT pg_catalog.format('OPERATOR(%I.%s)', n.nspname, o.oprname) INTO distance_operator
    FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.indexrelid
    JOIN pg_catalog.pg_am am ON am.oid OPERATOR(pg_catalog.=) c.relam
    JOIN pg_catalog.pg_opclass opc ON opc.oid OPERATOR(pg_catalog.=) i.indclass[0]
    JOIN pg_catalog.pg_amop ao ON ao.amopfamily OPERATOR(pg_catalog.=) opc.opcfamily
                               AND ao.amoppurpose OPERATOR(pg_catalog.=) 'o'::"char"
    JOIN pg_catalog.pg_operator o ON o.oid OPERATOR(pg_catalog.=) ao.amopopr
    JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) o.oprnamespace
    WHERE i.indrelid OPERATOR(pg_catalog.=) relation::oid AND i.indkey[0] OPERATOR(pg_catalog.=) vector_attnum
      AND i.indisvalid AND i.indpred IS NULL AND o.oprleft OPERATOR(pg_catalog.=) vector_type
    ORDER BY am.amname OPERATOR(pg_catalog.=) 'strata'::name DESC, c.oid, ao.amopstrategy LIMIT 1;
    IF distance_operator IS NULL AND query_vector IS NOT NULL THEN
        RAISE EXCEPTION 'strata_hybrid_keys: no index with a distance ordering on %.%', relation,
            pg_catalog.quote_ident(vector_column)
            USING ERRCODE = 'undefined_object';
    END IF;
    IF query IS NOT NULL THEN
        bm25 := @extschema@.strata_bm25_query(text_index, query);
    END IF;
    text_branch := CASE WHEN query IS NULL THEN 'SELECT NULL::text AS key, NULL::float8 AS score WHERE false'
        ELSE pg_catalog.format('SELECT t.%I::text AS key, t.%I OPERATOR(@extschema@.<@>) $1 AS score '
                               'FROM %s t ORDER BY score LIMIT $3', key_column, text_column, relation) END;
    vector_branch := CASE WHEN query_vector IS NULL THEN 'SELECT NULL::text AS key, NULL::float8 AS distance WHERE false'
        ELSE pg_catalog.format('SELECT t.%I::text AS key, (t.%I %s $2)::float8 AS distance FROM %s t '
                               'ORDER BY distance LIMIT $3', key_column, vector_column, distance_operator, relation) END;
    -- Each branch alone, so that Citus plans each as one pushed-down query. Each fetches twice
    -- its depth and keeps the first `rows_per_branch` by (score, key) below: rows tied at the
    -- depth come back in each node's own order, so this way one node and a distributed table
    -- keep the same rows (unless a tie group reaches past twice the depth).
    FOR r IN EXECUTE text_branch USING bm25, query_vector, rows_per_branch OPERATOR(pg_catalog.*) 2 LOOP
        text_keys := text_keys OPERATOR(pg_catalog.||) r.key;
        text_scores := text_scores OPERATOR(pg_catalog.||) r.score;
    END LOOP;
    FOR r IN EXECUTE vector_branch USING bm25, query_vector, rows_per_branch OPERATOR(pg_catalog.*) 2 LOOP
        vector_keys := vector_keys OPERATOR(pg_catalog.||) r.key;
        vector_distances := vector_distances OPERATOR(pg_catalog.||) r.distance;
    END LOOP;
    RETURN QUERY
        WITH text_ranked AS MATERIALIZED (
            SELECT h.key, h.score, pg_catalog.row_number() OVER (ORDER BY h.score, h.key) AS rank
            FROM ROWS FROM (pg_catalog.unnest(text_keys), pg_catalog.unnest(text_scores)) AS h(key, score)
        ), vector_ranked AS MATERIALIZED (
            SELECT h.key, h.distance, pg_catalog.row_number() OVER (ORDER BY h.distance, h.key) AS rank
            FROM ROWS FROM (pg_catalog.unnest(vector_keys), pg_catalog.unnest(vector_distances)) AS h(key, distance)
        ), text_hits AS (
            SELECT * FROM text_ranked WHERE text_ranked.rank OPERATOR(pg_catalog.<=) rows_per_branch::bigint
        ), vector_hits AS (
            SELECT * FROM vector_ranked WHERE vector_ranked.rank OPERATOR(pg_catalog.<=) rows_per_branch::bigint
        )
        SELECT coalesce(th.key, vh.key),
               coalesce(text_weight OPERATOR(pg_catalog./) (rrf_k::float8 OPERATOR(pg_catalog.+) th.rank::float8), 0::float8)
               OPERATOR(pg_catalog.+)
               coalesce(vector_weight OPERATOR(pg_catalog./) (rrf_k::float8 OPERATOR(pg_catalog.+) vh.rank::float8), 0::float8),
               th.rank, OPERATOR(pg_catalog.-) th.score, vh.rank, vh.distance
        FROM text_hits th FULL JOIN vector_hits vh ON th.key OPERATOR(pg_catalog.=) vh.key
        ORDER BY 2 DESC, least(th.rank, vh.rank), 1
        LIMIT k;
END
$function$;
COMMENT ON FUNCTION strata_hybrid_keys(regclass, name, name, name, text, anyelement, integer, integer, integer, float8, float8) IS
    'pg_strata: hybrid search returning a key column instead of ctids (Citus distributed tables), BM25 with every shard''s statistics';
