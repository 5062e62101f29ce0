//! `amcostestimate`: what the planner pays for an ordered strata scan.
//!
//! The index is only useful for `ORDER BY column <op> constant`: without such an ordering the
//! cost is prohibitive, so the planner never picks it. With one, the startup cost is the total
//! cost: [`ScanCost`] (candidates examined, as CPU operator costs) plus the pages PostgreSQL's
//! generic estimate charges for them. Selectivity stays 1: the scan can eventually return every row,
//! and the executor's LIMIT and WHERE clauses decide how many it reads — with a very selective
//! filter the planner therefore expects many rows to be read and prefers a btree plan.

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
        if (*path).indexorderbys.is_null() {
            *index_startup_cost = ScanCost::PROHIBITIVE;
            *index_total_cost = ScanCost::PROHIBITIVE;
            *index_selectivity = 0.0;
            *index_correlation = 0.0;
            *index_pages = 0.0;
            return;
        }
        let mut costs = pg_sys::GenericCosts::default();
        let scan = ScanCost::estimate((*(*path).indexinfo).tuples, gucs::ef_search(), pg_sys::cpu_operator_cost);
        costs.numIndexTuples = scan.examined;
        pg_sys::genericcostestimate(root, path, loop_count, &raw mut costs);
        *index_startup_cost = costs.indexTotalCost + scan.cpu;
        *index_total_cost = costs.indexTotalCost + scan.cpu;
        *index_selectivity = 1.0;
        *index_correlation = 0.0;
        *index_pages = costs.numIndexPages;
    }
}
