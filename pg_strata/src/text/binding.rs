//! Finding the index of `body <@> 'query'` implicitly: a planner hook binds every
//! `text <@> text` whose left side is a plain column of a table with a bm25 index on that column
//! to that index, rewriting it to `text <@> bm25query` (a constant bound to the index, or
//! `to_bm25query(query, 'schema.index')` for a parameter). The rewritten operator is in the same
//! operator class, so ordered index scans are chosen as before, and wherever the operator is
//! evaluated outside an index scan (a sort after a scan of another index, a target list) it
//! scores against the bound index. A column with several bm25 indexes is bound to the one with
//! the lowest OID.

use std::ffi::CStr;

use pgrx::pg_sys;

use super::query::QueryValue;

static mut PREVIOUS: pg_sys::planner_hook_type = None;

/// Installs the hook; called from `_PG_init`.
pub fn install_hook() {
    // SAFETY: _PG_init runs single-threaded before any query is planned.
    unsafe {
        PREVIOUS = pg_sys::planner_hook;
        pg_sys::planner_hook = Some(plan);
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn plan(
    parse: *mut pg_sys::Query,
    query_string: *const std::ffi::c_char,
    cursor_options: std::ffi::c_int,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    // SAFETY: the planner owns `parse` (plan caches hand it a copy) and may scribble on it; the
    // walk runs on the backend's main thread inside the planning transaction.
    unsafe {
        let mut binder = Binder { levels: Vec::new(), objects: None };
        binder.walk_query(parse);
        match PREVIOUS {
            Some(previous) => previous(parse, query_string, cursor_options, bound_params),
            None => pg_sys::standard_planner(parse, query_string, cursor_options, bound_params),
        }
    }
}

/// The catalog objects a rewrite uses, in the extension's schema.
#[derive(Clone, Copy)]
struct Objects {
    /// `<@>(text, bm25query)` and its function.
    operator: pg_sys::Oid,
    function: pg_sys::Oid,
    /// The `bm25query` type.
    query_type: pg_sys::Oid,
    /// `to_bm25query(text, text)`.
    bind: pg_sys::Oid,
}

struct Binder {
    /// The range tables of the queries being walked, innermost last.
    levels: Vec<*mut pg_sys::List>,
    objects: Option<Objects>,
}

/// `[schema, name]` as a qualified name list.
unsafe fn qualified(schema: *mut std::ffi::c_char, name: &CStr) -> *mut pg_sys::List {
    // SAFETY: makeString keeps the pointers; both strings live in the current memory context
    // (or are static) for the lookup.
    unsafe {
        let list = pg_sys::lappend(std::ptr::null_mut(), pg_sys::makeString(schema).cast());
        pg_sys::lappend(list, pg_sys::makeString(pg_sys::pstrdup(name.as_ptr())).cast())
    }
}

impl Binder {
    unsafe fn walk_query(&mut self, query: *mut pg_sys::Query) {
        // SAFETY: `query` is the planner's own `parse` (handed to `plan`) or a T_Query node of it met by
        // `walk`, so it is live and modifiable; `self` outlives the walk that gets it as `context`.
        unsafe {
            self.levels.push((*query).rtable);
            let context = std::ptr::from_mut(self).cast();
            pg_sys::query_tree_walker(query, Some(walk), context, 0);
            self.levels.pop();
        }
    }

    /// The objects, looked up (once per planning) in the schema of `function`, the
    /// `text <@> text` operator's function.
    unsafe fn objects(&mut self, function: pg_sys::Oid) -> Option<Objects> {
        if self.objects.is_none() {
            // SAFETY: catalog lookups on the backend's main thread; missing objects give InvalidOid.
            unsafe {
                let schema = pg_sys::get_namespace_name(pg_sys::get_func_namespace(function));
                let type_name = pg_sys::makeTypeNameFromNameList(qualified(schema, c"bm25query"));
                let query_type = pg_sys::LookupTypeNameOid(std::ptr::null_mut(), type_name, true);
                let operator = pg_sys::OpernameGetOprid(qualified(schema, c"<@>"), pg_sys::TEXTOID, query_type);
                let arguments = [pg_sys::TEXTOID, pg_sys::TEXTOID];
                let bind = pg_sys::LookupFuncName(qualified(schema, c"to_bm25query"), 2, arguments.as_ptr(), true);
                if operator != pg_sys::InvalidOid && bind != pg_sys::InvalidOid {
                    let function = pg_sys::get_opcode(operator);
                    self.objects = Some(Objects { operator, function, query_type, bind });
                }
            }
        }
        self.objects
    }

    /// Rewrites `op` when it is `text <@> text` over a column with a bm25 index.
    unsafe fn bind(&mut self, op: *mut pg_sys::OpExpr) {
        // SAFETY: `op` is a live node of the query being planned; its args list holds two nodes.
        unsafe {
            if pg_sys::list_length((*op).args) != 2 {
                return;
            }
            let function = pg_sys::get_opcode((*op).opno);
            let name = pg_sys::get_func_name(function);
            if name.is_null() || CStr::from_ptr(name) != c"strata_bm25_score_text" {
                return;
            }
            let left = pg_sys::list_nth((*op).args, 0).cast::<pg_sys::Node>();
            let Some(index) = self.index_of(left) else { return };
            let Some(objects) = self.objects(function) else { return };
            let right = pg_sys::list_nth((*op).args, 1).cast::<pg_sys::Node>();
            let bound = if (*right).type_ == pg_sys::NodeTag::T_Const {
                let constant = right.cast::<pg_sys::Const>();
                if (*constant).constisnull {
                    return;
                }
                let value = QueryValue { index, text: super::query::text_of((*constant).constvalue) };
                pg_sys::makeConst(objects.query_type, -1, pg_sys::InvalidOid, -1, value.to_datum(), false, false)
                    .cast::<pg_sys::Node>()
            } else {
                let qualified = pg_sys::quote_qualified_identifier(
                    pg_sys::get_namespace_name(pg_sys::get_rel_namespace(index)),
                    pg_sys::get_rel_name(index),
                );
                let text = pg_sys::cstring_to_text(qualified);
                let name = pg_sys::makeConst(
                    pg_sys::TEXTOID,
                    -1,
                    pg_sys::DEFAULT_COLLATION_OID,
                    -1,
                    pg_sys::Datum::from(text),
                    false,
                    false,
                );
                let arguments = pg_sys::lappend(pg_sys::lappend(std::ptr::null_mut(), right.cast()), name.cast());
                pg_sys::makeFuncExpr(
                    objects.bind,
                    objects.query_type,
                    arguments,
                    pg_sys::InvalidOid,
                    pg_sys::DEFAULT_COLLATION_OID,
                    pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
                )
                .cast::<pg_sys::Node>()
            };
            let cell = pg_sys::list_nth_cell((*op).args, 1);
            (*cell).ptr_value = bound.cast();
            (*op).opno = objects.operator;
            (*op).opfuncid = objects.function;
        }
    }

    /// The bm25 index on the table column `node` reads, when `node` is a plain column of a table
    /// of the query (or an enclosing one) with such an index.
    unsafe fn index_of(&self, node: *mut pg_sys::Node) -> Option<pg_sys::Oid> {
        // SAFETY: `node` is a live node; its range table entry exists at its level; the table is
        // already locked by the parser and rewriter; index_open takes the lock the planner takes.
        unsafe {
            if (*node).type_ != pg_sys::NodeTag::T_Var {
                return None;
            }
            let var = node.cast::<pg_sys::Var>();
            let level = self.levels.len().checked_sub(1 + (*var).varlevelsup as usize)?;
            let rtable = self.levels[level];
            if (*var).varno < 1 || (*var).varno > pg_sys::list_length(rtable) || (*var).varattno <= 0 {
                return None;
            }
            let entry = pg_sys::list_nth(rtable, (*var).varno - 1).cast::<pg_sys::RangeTblEntry>();
            if (*entry).rtekind != pg_sys::RTEKind::RTE_RELATION {
                return None;
            }
            let table = pg_sys::table_open((*entry).relid, pg_sys::NoLock as pg_sys::LOCKMODE);
            let indexes = pg_sys::RelationGetIndexList(table);
            pg_sys::table_close(table, pg_sys::NoLock as pg_sys::LOCKMODE);
            let mut found: Option<pg_sys::Oid> = None;
            for i in 0..pg_sys::list_length(indexes) {
                let oid = pg_sys::list_nth_oid(indexes, i);
                let index = pg_sys::index_open(oid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
                let info = (*index).rd_index;
                let matches = super::options::is_bm25(index)
                    && (*info).indnatts == 1
                    && (*info).indkey.values.as_slice(1)[0] == (*var).varattno;
                pg_sys::index_close(index, pg_sys::NoLock as pg_sys::LOCKMODE);
                if matches && found.is_none_or(|f| oid.to_u32() < f.to_u32()) {
                    found = Some(oid);
                }
            }
            found
        }
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn walk(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: `context` is the Binder `walk_query` passed; `node` is a live node of the query.
    unsafe {
        let binder = &mut *context.cast::<Binder>();
        match (*node).type_ {
            pg_sys::NodeTag::T_Query => {
                binder.walk_query(node.cast());
                return false;
            }
            pg_sys::NodeTag::T_OpExpr => binder.bind(node.cast()),
            _ => {}
        }
        pg_sys::expression_tree_walker(node, Some(walk), context)
    }
}

/// Whether an ORDER BY key of a bm25 index path names another bm25 index than `index`: a
/// `body <@> bm25query` whose constant is bound to another index, or whose
/// `to_bm25query(query, 'name')` names another one. Such a scan would fail ("names another
/// index"), so the cost estimate makes the planner take the named index (or no index) instead.
/// A key it cannot read at plan time (a parameter) names none.
///
/// # Safety
/// `orderbys` must be the `indexorderbys` list of an IndexPath being costed, on the backend's
/// main thread inside the planning transaction.
pub unsafe fn names_another_index(orderbys: *mut pg_sys::List, index: pg_sys::Oid) -> bool {
    // SAFETY: the planner's live expression nodes (this function's contract); lsyscache and
    // namespace lookups run in the planning transaction, and `missing_ok` makes an unknown name
    // resolve to InvalidOid instead of raising.
    unsafe {
        pgrx::PgList::<pg_sys::Node>::from_pg(orderbys).iter_ptr().any(|key| {
            if (*key).type_ != pg_sys::NodeTag::T_OpExpr {
                return false;
            }
            let op = key.cast::<pg_sys::OpExpr>();
            if pg_sys::list_length((*op).args) != 2 {
                return false;
            }
            let name = pg_sys::get_func_name(pg_sys::get_opcode((*op).opno));
            if name.is_null() || CStr::from_ptr(name) != c"strata_bm25_score" {
                return false;
            }
            let right = pg_sys::list_nth((*op).args, 1).cast::<pg_sys::Node>();
            let named = match (*right).type_ {
                pg_sys::NodeTag::T_Const => {
                    let constant = right.cast::<pg_sys::Const>();
                    (!(*constant).constisnull).then(|| QueryValue::from_datum((*constant).constvalue).index)
                }
                pg_sys::NodeTag::T_FuncExpr => {
                    let call = right.cast::<pg_sys::FuncExpr>();
                    let function = pg_sys::get_func_name((*call).funcid);
                    // The second argument is read only once the call is known to have two.
                    let binds = !function.is_null()
                        && CStr::from_ptr(function) == c"to_bm25query"
                        && pg_sys::list_length((*call).args) == 2;
                    let name = if binds {
                        pg_sys::list_nth((*call).args, 1).cast::<pg_sys::Node>()
                    } else {
                        std::ptr::null_mut()
                    };
                    let bind = !name.is_null()
                        && (*name).type_ == pg_sys::NodeTag::T_Const
                        && !(*name.cast::<pg_sys::Const>()).constisnull;
                    bind.then(|| {
                        let text = pg_sys::text_to_cstring((*name.cast::<pg_sys::Const>()).constvalue.cast_mut_ptr());
                        let range = pg_sys::makeRangeVarFromNameList(crate::pg_compat::qualified_name_list(text));
                        pg_sys::RangeVarGetRelidExtended(
                            range,
                            pg_sys::NoLock as pg_sys::LOCKMODE,
                            pg_sys::RVROption::RVR_MISSING_OK,
                            None,
                            std::ptr::null_mut(),
                        )
                    })
                }
                _ => None,
            };
            named.is_some_and(|named| named != pg_sys::InvalidOid && named != index)
        })
    }
}
