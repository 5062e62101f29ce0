
/*
 * Inserted by pg_strata's `cargo xtask citus build` (xtask/src/citus/inplace_update.c): this
 * PostgreSQL release predates systable_inplace_update_begin() and _finish() (PostgreSQL 16.5,
 * 17.1). The same in-place update through what it has: the tuple a system-table scan finds is
 * copied for the caller, and _finish() overwrites it with heap_inplace_update(), which locates it
 * by the copy's t_self (heap_modify_tuple() keeps t_self).
 */
#include "access/genam.h"

typedef struct StrataInplaceUpdate
{
	Relation relation;
	SysScanDesc scan;
} StrataInplaceUpdate;

static void
systable_inplace_update_begin(Relation relation, Oid indexId, bool indexOK,
							  Snapshot snapshot, int nkeys, const ScanKeyData *key,
							  HeapTuple *oldtupcopy, void **state)
{
	StrataInplaceUpdate *update = palloc(sizeof(StrataInplaceUpdate));
	HeapTuple tuple;

	update->relation = relation;
	update->scan = systable_beginscan(relation, indexId, indexOK, snapshot, nkeys,
									  (ScanKey) key);
	tuple = systable_getnext(update->scan);
	if (!HeapTupleIsValid(tuple))
	{
		/* as PostgreSQL's: no tuple, no state to finish */
		systable_endscan(update->scan);
		pfree(update);
		*oldtupcopy = NULL;
		return;
	}
	*oldtupcopy = heap_copytuple(tuple);
	*state = update;
}

static void
systable_inplace_update_finish(void *state, HeapTuple tuple)
{
	StrataInplaceUpdate *update = (StrataInplaceUpdate *) state;

	heap_inplace_update(update->relation, tuple);
	systable_endscan(update->scan);
	pfree(update);
}
