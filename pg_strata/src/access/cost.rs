//! `amcostestimate`: what the planner pays for an ordered strata scan.
//!
//! The index is only useful for `ORDER BY column <op> constant`: without such an ordering the
//! cost is prohibitive, so the planner never picks it; nor a bm25 index for a `bm25query` that
//! names another index (two bm25 indexes on one column). With one, the startup cost is the first
//! round's: [`ScanCost`] (candidates examined, as CPU operator costs) plus the pages PostgreSQL's
//! generic estimate charges for them; each row returned adds [`ScanCost::per_row`] to the total
//! (the deeper rounds), which the planner scales by the rows its LIMIT and the other WHERE
//! clauses make it read. The selectivity is that of the scan keys on filter columns
//! (PostgreSQL's own estimate from the table's statistics; 1 without any): the scan can return
//! every row they admit, and the executor's LIMIT and other WHERE clauses decide how many it
//! reads. A WHERE clause on columns the index does not hold leaves the selectivity at 1, so with
//! a very selective such filter the planner expects many rows to be read and prefers a btree plan.

use pgrx::pg_sys;
use strata_lsm::scan::ScanCost;

use crate::gucs;

/// `amcostestimate`.
// The signature is PostgreSQL's amcostestimate_function.
#[allow(clippy::too_many_arguments)]
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn amcostestimate(
    root: *mut pg_sys::PlannerInfo,
    path: *mut pg_sys::IndexPath,
    loop_count: f64,
    index_startup_cost: *mut pg_sys::Cost,
    index_total_cost: *mut pg_sys::Cost,
    index_selectivity: *mut pg_sys::Selectivity,
    index_correlation: *mut f64,
    index_pages: *mut f64,
) {
    // SAFETY: PostgreSQL passes valid planner structures and output pointers.
    unsafe {
        let named_elsewhere =
            crate::text::binding::names_another_index((*path).indexorderbys, (*(*path).indexinfo).indexoid);
        if (*path).indexorderbys.is_null() || named_elsewhere {
            *index_startup_cost = ScanCost::PROHIBITIVE;
            *index_total_cost = ScanCost::PROHIBITIVE;
            *index_selectivity = 0.0;
            *index_correlation = 0.0;
            *index_pages = 0.0;
            crate::pg_compat::never_choose(path);
            return;
        }
        let tuples = (*(*path).indexinfo).tuples;
        // The selectivity of the scan keys on filter columns (1 without any).
        let selectivity = if (*path).indexclauses.is_null() {
            1.0
        } else {
            pg_sys::clauselist_selectivity(
                root,
                index_quals((*path).indexclauses),
                (*(*(*path).indexinfo).rel).relid as i32,
                pg_sys::JoinType::JOIN_INNER,
                std::ptr::null_mut(),
            )
        };
        let mut costs = pg_sys::GenericCosts::default();
        let scan = ScanCost::filtered(tuples, gucs::ef_search(), pg_sys::cpu_operator_cost, selectivity);
        costs.numIndexTuples = scan.examined;
        pg_sys::genericcostestimate(root, path, loop_count, &raw mut costs);
        *index_startup_cost = costs.indexTotalCost + scan.startup;
        *index_total_cost = *index_startup_cost + scan.per_row * selectivity * tuples;
        *index_selectivity = selectivity;
        *index_correlation = 0.0;
        *index_pages = costs.numIndexPages;
    }
}

/// The restriction clauses the index clauses `indexclauses` (a list of `IndexClause`) stand for,
/// as a list of `RestrictInfo`s: for a lossy one (an `OR` behind the marker operator, see
/// `paths`) the original clause, whose selectivity PostgreSQL can estimate.
///
/// # Safety
/// `indexclauses` must be a valid list of `IndexClause` nodes.
unsafe fn index_quals(indexclauses: *mut pg_sys::List) -> *mut pg_sys::List {
    let mut quals = std::ptr::null_mut();
    // SAFETY: `indexclauses` is the non-null `indexclauses` list of the IndexPath the planner passed
    // to amcostestimate: IndexClause nodes, each with a valid `rinfo`; lappend allocates in its context.
    unsafe {
        for clause in pgrx::PgList::<pg_sys::IndexClause>::from_pg(indexclauses).iter_ptr() {
            quals = pg_sys::lappend(quals, (*clause).rinfo.cast());
        }
    }
    quals
}
