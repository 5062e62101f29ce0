//! Ordered strata scans with `IN` lists and `OR`s on filter columns.
//!
//! PostgreSQL 15's planner never keeps `column = ANY(array)` (what `IN (…)` becomes) on an index
//! column after the first in a path it orders: for btree such a clause breaks the index's
//! order. A strata scan orders by distance whatever its keys, and applies an array of values
//! itself (`amsearcharray`), so this `set_rel_pathlist_hook` adds, next to each ordered strata
//! path PostgreSQL built, the same path with those clauses as index conditions. The planner
//! keeps whichever costs less (the filter's selectivity makes the new one cheaper); the
//! executor rechecks every row the scan returns, as for every filtered strata scan.
//!
//! PostgreSQL has no scan key for an `OR`. An `OR` of filter-column conditions (with constants)
//! reaches the index as a *lossy* index clause on the vector column, `embedding <?> '<predicate as
//! JSON>'` (the marker operator, strategy 8 of every vector operator family): the scan applies the
//! predicate, the marker's own function is always TRUE, and the original `OR` stays a filter that
//! the executor applies to every row.

use pgrx::{pg_sys, PgList};

static mut PREVIOUS: pg_sys::set_rel_pathlist_hook_type = None;

/// Installs the hook; called from `_PG_init`.
pub fn install_hook() {
    // SAFETY: _PG_init runs once per process before any planning.
    unsafe {
        PREVIOUS = pg_sys::set_rel_pathlist_hook;
        pg_sys::set_rel_pathlist_hook = Some(set_rel_pathlist);
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn set_rel_pathlist(
    root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    rti: pg_sys::Index,
    rte: *mut pg_sys::RangeTblEntry,
) {
    // SAFETY: the planner passes valid structures; every path and clause read belongs to them,
    // and new nodes are allocated in the planner's memory context.
    unsafe {
        if let Some(previous) = PREVIOUS {
            previous(root, rel, rti, rte);
        }
        if (*rel).reloptkind != pg_sys::RelOptKind::RELOPT_BASEREL || (*rel).baserestrictinfo.is_null() {
            return;
        }
        let mut added = Vec::new();
        for path in PgList::<pg_sys::Path>::from_pg((*rel).pathlist).iter_ptr() {
            if (*path).type_ != pg_sys::NodeTag::T_IndexPath || !(*path).param_info.is_null() {
                continue;
            }
            let path = path.cast::<pg_sys::IndexPath>();
            let info = (*path).indexinfo;
            let ours = crate::access::cost::amcostestimate as *const () as usize;
            let is_strata = (*info).amcostestimate.map(|f| f as *const () as usize) == Some(ours);
            if !is_strata || (*path).indexorderbys.is_null() {
                continue;
            }
            let mut clauses = array_clauses(rel, info, (*path).indexclauses);
            clauses.extend(or_clauses(root, rel, info, (*rte).relid));
            if clauses.is_empty() {
                continue;
            }
            let mut all: Vec<*mut pg_sys::IndexClause> =
                PgList::<pg_sys::IndexClause>::from_pg((*path).indexclauses).iter_ptr().collect();
            all.extend(clauses);
            // The planner expects index clauses in index column order.
            all.sort_by_key(|&clause| (*clause).indexcol);
            let mut list = PgList::<pg_sys::IndexClause>::new();
            for clause in all {
                list.push(clause);
            }
            added.push(pg_sys::create_index_path(
                root,
                info,
                list.into_pg(),
                (*path).indexorderbys,
                (*path).indexorderbycols,
                (*path).path.pathkeys,
                pg_sys::ScanDirection::ForwardScanDirection,
                false,
                std::ptr::null_mut(),
                1.0,
                false,
            ));
        }
        for path in added {
            pg_sys::add_path(rel, path.cast());
        }
    }
}

/// `column = ANY(array)` restriction clauses of `rel` on filter columns of `info` whose
/// operator class applies `=` (and whose array holds no reference to the table), as index
/// clauses, leaving out those already in `existing`.
///
/// # Safety
/// The arguments must be the planner's valid structures for one base relation and its index.
unsafe fn array_clauses(
    rel: *mut pg_sys::RelOptInfo,
    info: *mut pg_sys::IndexOptInfo,
    existing: *mut pg_sys::List,
) -> Vec<*mut pg_sys::IndexClause> {
    let mut out = Vec::new();
    // SAFETY: `rel`, `info` and `existing` come from the planner's `set_rel_pathlist` call (its
    // RelOptInfo, an IndexOptInfo of one of its paths and that path's clause list), so every node
    // read is live; `column` < nkeycolumns keeps the opfamily/indexkeys reads in bounds.
    unsafe {
        let present: Vec<*mut pg_sys::RestrictInfo> =
            PgList::<pg_sys::IndexClause>::from_pg(existing).iter_ptr().map(|c| (*c).rinfo).collect();
        for rinfo in PgList::<pg_sys::RestrictInfo>::from_pg((*rel).baserestrictinfo).iter_ptr() {
            let clause = (*rinfo).clause.cast::<pg_sys::Node>();
            if (*clause).type_ != pg_sys::NodeTag::T_ScalarArrayOpExpr || present.contains(&rinfo) {
                continue;
            }
            let saop = clause.cast::<pg_sys::ScalarArrayOpExpr>();
            let args = PgList::<pg_sys::Node>::from_pg((*saop).args);
            let (Some(left), Some(right)) = (args.get_ptr(0), args.get_ptr(1)) else { continue };
            if !(*saop).useOr || pg_sys::contain_var_clause(right) || pg_sys::contain_volatile_functions(right) {
                continue;
            }
            let Some(attno) = super::filters::column_of(left, (*rel).relid) else { continue };
            // Filter columns are the key columns after the first (the vector).
            for column in 1..(*info).nkeycolumns as usize {
                let family = *(*info).opfamily.add(column);
                if *(*info).indexkeys.add(column) == i32::from(attno)
                    && pg_sys::op_in_opfamily((*saop).opno, family)
                    && pg_sys::get_op_opfamily_strategy((*saop).opno, family)
                        == strata_lsm::scan::keys::FilterOp::Equal as i32
                {
                    let index_clause =
                        pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexClause>()).cast::<pg_sys::IndexClause>();
                    (*index_clause).type_ = pg_sys::NodeTag::T_IndexClause;
                    (*index_clause).rinfo = rinfo;
                    (*index_clause).indexquals = pg_sys::lappend(std::ptr::null_mut(), rinfo.cast());
                    (*index_clause).lossy = false;
                    (*index_clause).indexcol = column as pg_sys::AttrNumber;
                    out.push(index_clause);
                    break;
                }
            }
        }
    }
    out
}

/// `OR` restriction clauses of `rel` over filter columns of `info` (its table's OID `table`), each
/// as a lossy index clause on the vector column: the marker operator `<?>` with the clause's
/// predicate as JSON ([`strata_lsm::scan::keys::PREDICATE_STRATEGY`]). Lossy: the executor keeps
/// the original clause as a filter, so the marker only has to admit a superset of its rows.
///
/// # Safety
/// The arguments must be the planner's valid structures for one base relation, its table's OID
/// and one of its strata indexes.
unsafe fn or_clauses(
    root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    info: *mut pg_sys::IndexOptInfo,
    table: pg_sys::Oid,
) -> Vec<*mut pg_sys::IndexClause> {
    let mut out = Vec::new();
    // SAFETY: `root`, `rel` and `info` come from the planner's `set_rel_pathlist` call and `table` is
    // its RTE's relid; `info` has at least one key column, so `indexkeys[0]` is in bounds; the new
    // nodes are allocated in the planner's context.
    unsafe {
        let vector_attno = *(*info).indexkeys;
        if vector_attno <= 0 {
            return out;
        }
        let Some(schema) = super::filters::planner_schema(info, table) else { return out };
        let (mut vector_type, mut typmod, mut collation) = (pg_sys::InvalidOid, -1, pg_sys::InvalidOid);
        pg_sys::get_atttypetypmodcoll(
            table,
            vector_attno as pg_sys::AttrNumber,
            &raw mut vector_type,
            &raw mut typmod,
            &raw mut collation,
        );
        let name = pg_sys::makeString(pg_sys::pstrdup(c"<?>".as_ptr()));
        let marker =
            pg_sys::OpernameGetOprid(pg_sys::lappend(std::ptr::null_mut(), name.cast()), vector_type, pg_sys::TEXTOID);
        if marker == pg_sys::InvalidOid {
            return out;
        }
        for rinfo in PgList::<pg_sys::RestrictInfo>::from_pg((*rel).baserestrictinfo).iter_ptr() {
            if !pg_sys::restriction_is_or_clause(rinfo) {
                continue;
            }
            let Some(predicate) = super::filters::clause_predicate(info, (*rel).relid, &schema, (*rinfo).clause.cast())
            else {
                continue;
            };
            let json =
                std::ffi::CString::new(strata_lsm::scan::keys::encode_predicate(&predicate)).expect("JSON has no NUL");
            let argument = pg_sys::makeConst(
                pg_sys::TEXTOID,
                -1,
                pg_sys::DEFAULT_COLLATION_OID,
                -1,
                pg_sys::Datum::from(pg_sys::cstring_to_text(json.as_ptr())),
                false,
                false,
            );
            let column = pg_sys::makeVar(
                (*rel).relid as i32,
                vector_attno as pg_sys::AttrNumber,
                vector_type,
                typmod,
                collation,
                0,
            );
            let expr = pg_sys::make_opclause(
                marker,
                pg_sys::BOOLOID,
                false,
                column.cast(),
                argument.cast(),
                pg_sys::InvalidOid,
                pg_sys::InvalidOid,
            );
            let derived = crate::pg_compat::pushed_down_restrictinfo(root, expr, (*rinfo).security_level);
            let index_clause =
                pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexClause>()).cast::<pg_sys::IndexClause>();
            (*index_clause).type_ = pg_sys::NodeTag::T_IndexClause;
            (*index_clause).rinfo = rinfo;
            (*index_clause).indexquals = pg_sys::lappend(std::ptr::null_mut(), derived.cast());
            (*index_clause).lossy = true;
            (*index_clause).indexcol = 0;
            out.push(index_clause);
        }
    }
    out
}
