//! Filter columns: the key columns of a strata index after the vector (`CREATE INDEX … USING
//! strata (embedding vector_cosine_ops, tenant_id, tags, created_at)`), whose values the index
//! keeps so that a WHERE clause on them filters rows before distances are computed.
//!
//! Key columns rather than `INCLUDE` columns because PostgreSQL hands an access method scan
//! keys only for key columns (quals on `INCLUDE` columns are never index quals). Each filter
//! column's default operator class (`strata_int4_ops`, `strata_text_ops`, `strata_array_ops`, …
//! in `sql/am.sql`) lists the operators the index applies. This module reads the columns' types,
//! a row's values and a scan's keys; what they mean is strata-engine's
//! ([`strata_engine::filter::row`]) and strata-lsm's ([`strata_lsm::scan::keys`]).

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_engine::filter::row::text_key;
use strata_engine::filter::{ColumnType, FilterSchema, FilterValue, Literal, Predicate};
use strata_lsm::options::{opclass_role, OpclassRole};
use strata_lsm::scan::keys::{self, FilterKey, FilterOp, KeyArgument};

use crate::fmgr::error;

/// Support function 1 of a filter-column operator class: its code
/// ([`strata_lsm::options::FILTER_OPCLASS_CODE`]).
pub unsafe fn support(_fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    pg_sys::Datum::from(strata_lsm::options::FILTER_OPCLASS_CODE)
}

/// The marker operator `<?>`'s function (see `paths`): always TRUE. The condition it marks stays a
/// filter the executor applies; the scan applies it through the marker's argument.
pub unsafe fn marker(_fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    pg_sys::Datum::from(true)
}

/// The role of index column `attno` (1-based): what its opclass's support function 1 says.
///
/// # Safety
/// `index` must be a valid, open relation of a strata access method with at least `attno` key
/// columns.
pub unsafe fn role_of(index: pg_sys::Relation, attno: u16) -> OpclassRole {
    // SAFETY: `index` is an open strata-AM index with at least `attno` key columns (this function's
    // contract: `opclass_of` asks for column 1, `filter_columns` for 2..=indnkeyatts), so
    // index_getprocinfo's column is in range; every strata opclass has support procedure 1, which
    // takes no meaningful argument; the relcache keeps its FmgrInfo.
    let code = unsafe {
        let procinfo = pg_sys::index_getprocinfo(index, attno as pg_sys::AttrNumber, 1);
        pg_sys::FunctionCall1Coll(procinfo, pg_sys::InvalidOid, pg_sys::Datum::from(0)).value() as i32
    };
    opclass_role(code).unwrap_or_else(|e| {
        error(PgSqlErrorCode::ERRCODE_INVALID_OBJECT_DEFINITION, format!("strata opclass support function: {e}"))
    })
}

/// Key columns of `index`.
///
/// # Safety
/// `index` must be a valid, open index relation.
unsafe fn key_columns(index: pg_sys::Relation) -> u16 {
    // SAFETY: `index` is an open index relation (this function's contract; `filter_columns` passes
    // its own), and the relcache sets rd_index for every index, so reading `indnkeyatts` is valid.
    unsafe { (*(*index).rd_index).indnkeyatts as u16 }
}

/// A filter column: its type as the index keeps it, and its SQL type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterColumn {
    /// How the index keeps it.
    pub ty: ColumnType,
    /// The column's SQL type (how its datums are read).
    pub oid: pg_sys::Oid,
}

/// The filter columns of `index`: its key columns after the first, each checked to be a filter
/// column of a type the index can keep (deterministic collations only for texts, whose equality
/// the index decides by bytes).
///
/// # Safety
/// `index` must be a valid, open relation of a strata access method.
pub unsafe fn filter_columns(index: pg_sys::Relation) -> Vec<FilterColumn> {
    // SAFETY: `index` is an open strata-AM index (this function's contract, met by `config_of`), so
    // rd_att holds natts >= indnkeyatts attributes: attribute `attno - 1` exists for every key column.
    unsafe {
        (2..=key_columns(index))
            .map(|attno| {
                let attribute = &*crate::pg_compat::tuple_desc_attr((*index).rd_att, usize::from(attno) - 1);
                let name = std::ffi::CStr::from_ptr(attribute.attname.data.as_ptr()).to_string_lossy();
                if role_of(index, attno) != OpclassRole::Filter {
                    error(
                        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                        format!("a strata index orders by its first column only; column \"{name}\" must be a filter column"),
                    );
                }
                let ty = column_type(attribute.atttypid).unwrap_or_else(|| {
                    let type_name = std::ffi::CStr::from_ptr(pg_sys::format_type_be(attribute.atttypid)).to_string_lossy();
                    error(
                        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                        format!(
                            "column \"{name}\" of type {type_name} cannot be a strata filter column (smallint, integer, \
                             bigint, timestamp, timestamptz, text, varchar and arrays of integers or texts can)"
                        ),
                    )
                });
                let collation = attribute.attcollation;
                if matches!(ty, ColumnType::Text | ColumnType::TextArray)
                    && collation != pg_sys::InvalidOid
                    && !pg_sys::get_collation_isdeterministic(collation)
                {
                    error(
                        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                        format!("filter column \"{name}\" has a nondeterministic collation, whose equality is not byte equality"),
                    );
                }
                FilterColumn { ty, oid: attribute.atttypid }
            })
            .collect()
    }
}

/// The filter columns of `index`, whose configuration lists them as `schema` (checked when the
/// index was created): the SQL types read from its tuple descriptor. A configuration that no longer
/// matches the relation (a damaged or foreign manifest: more filter columns than key columns, or a
/// column whose type is not the one stored) is refused with `XX001` before any datum is read by the
/// stored type.
///
/// # Safety
/// `index` must be a valid, open relation of a strata access method.
pub unsafe fn columns_of(index: pg_sys::Relation, schema: &FilterSchema) -> Vec<FilterColumn> {
    // SAFETY: `index` is an open index relation (this function's contract), so rd_index is set.
    let keys = usize::from(unsafe { key_columns(index) });
    if schema.columns().len() + 1 > keys {
        error(
            PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
            format!(
                "the index's stored configuration lists {} filter columns but it has {} key columns: REINDEX it",
                schema.columns().len(),
                keys
            ),
        );
    }
    schema
        .columns()
        .iter()
        .enumerate()
        .map(|(c, spec)| {
            // SAFETY: `index` is open with at least c + 2 key columns (checked above), and rd_att
            // holds natts >= indnkeyatts attributes, so attribute c + 1 exists.
            let oid = unsafe { (*crate::pg_compat::tuple_desc_attr((*index).rd_att, c + 1)).atttypid };
            if column_type(oid) != Some(spec.ty) {
                error(
                    PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                    format!(
                        "filter column {} of the index's stored configuration does not match its type: REINDEX it",
                        c + 1
                    ),
                );
            }
            FilterColumn { ty: spec.ty, oid }
        })
        .collect()
}

/// The filter column type of SQL type `oid`.
fn column_type(oid: pg_sys::Oid) -> Option<ColumnType> {
    Some(match oid {
        pg_sys::INT2OID | pg_sys::INT4OID => ColumnType::Int4,
        pg_sys::INT8OID => ColumnType::Int8,
        pg_sys::TIMESTAMPOID | pg_sys::TIMESTAMPTZOID => ColumnType::Timestamp,
        pg_sys::TEXTOID | pg_sys::VARCHAROID => ColumnType::Text,
        pg_sys::INT2ARRAYOID | pg_sys::INT4ARRAYOID | pg_sys::INT8ARRAYOID => ColumnType::IntArray,
        pg_sys::TEXTARRAYOID | pg_sys::VARCHARARRAYOID => ColumnType::TextArray,
        _ => return None,
    })
}

/// The integer (or timestamp) a by-value datum of type `oid` holds.
fn int_of(oid: pg_sys::Oid, datum: pg_sys::Datum) -> Option<i64> {
    Some(match oid {
        pg_sys::INT2OID => i64::from(datum.value() as i16),
        pg_sys::INT4OID => i64::from(datum.value() as i32),
        pg_sys::INT8OID | pg_sys::TIMESTAMPOID | pg_sys::TIMESTAMPTZOID => datum.value() as i64,
        _ => return None,
    })
}

/// The bytes of a text datum (detoasted into the current memory context when needed).
///
/// # Safety
/// `datum` must be a non-null `text` (or `varchar`) datum.
unsafe fn text_bytes<'a>(datum: pg_sys::Datum) -> &'a [u8] {
    // SAFETY: `datum` is a non-null text or varchar (this function's contract: callers pass only a
    // null-checked value of a text column or element, or a text-typed key or marker argument);
    // pg_detoast_datum_packed returns the value itself or a
    // palloc'd copy, alive for the current memory context.
    unsafe {
        let detoasted = pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr());
        pgrx::varlena::varlena_to_byte_slice(detoasted)
    }
}

/// The element type and the elements (`None` for NULL elements) of an array datum.
///
/// # Safety
/// `datum` must be a non-null array datum; the element datums live in the current memory
/// context.
unsafe fn array_elements(datum: pg_sys::Datum) -> (pg_sys::Oid, Vec<Option<pg_sys::Datum>>) {
    // SAFETY: `datum` is a non-null array (this function's contract: a null-checked array column
    // value, search-array key, `&&`/`@>` argument or SAOP constant); the array is detoasted before
    // its header is read, and
    // deconstruct_array fills arrays of `count` datums and flags.
    unsafe {
        let array = pg_sys::pg_detoast_datum(datum.cast_mut_ptr()).cast::<pg_sys::ArrayType>();
        let element_type = (*array).elemtype;
        let (mut typlen, mut typbyval, mut typalign) = (0i16, false, 0 as std::ffi::c_char);
        pg_sys::get_typlenbyvalalign(element_type, &raw mut typlen, &raw mut typbyval, &raw mut typalign);
        let (mut elements, mut nulls, mut count) = (std::ptr::null_mut(), std::ptr::null_mut(), 0);
        pg_sys::deconstruct_array(
            array,
            element_type,
            i32::from(typlen),
            typbyval,
            typalign,
            &raw mut elements,
            &raw mut nulls,
            &raw mut count,
        );
        let count = count.max(0) as usize;
        let out = (0..count).map(|i| (!*nulls.add(i)).then(|| *elements.add(i))).collect();
        (element_type, out)
    }
}

/// The filter values of a row whose index columns hold `values` / `isnull` (the filter columns
/// from the second on).
///
/// # Safety
/// `values` and `isnull` must hold one entry per index column, of the index's column types
/// (`columns` its filter columns); texts borrowed from them live in the current memory context.
pub unsafe fn row_values<'a>(
    columns: &[FilterColumn],
    values: *const pg_sys::Datum,
    isnull: *const bool,
) -> Vec<FilterValue<'a>> {
    columns
        .iter()
        .enumerate()
        .map(|(c, column)| {
            // SAFETY: `values`/`isnull` hold one entry per index column (this function's contract:
            // the AM callback's or FormIndexDatum's arrays), and entry c + 1 is filter column c.
            let (datum, null) = unsafe { (*values.add(c + 1), *isnull.add(c + 1)) };
            if null {
                return FilterValue::Null;
            }
            // SAFETY: `null` is false, and `datum` is of index column c + 1's type, which `column`
            // describes (this function's contract), so each arm reads the kind of datum it expects.
            unsafe {
                match column.ty {
                    ColumnType::Int4 | ColumnType::Int8 | ColumnType::Timestamp => {
                        int_of(column.oid, datum).map_or(FilterValue::Null, FilterValue::Int)
                    }
                    ColumnType::Text => FilterValue::Text(text_bytes(datum)),
                    ColumnType::IntArray => {
                        let (element, elements) = array_elements(datum);
                        FilterValue::IntArray(
                            elements.into_iter().map(|e| e.and_then(|d| int_of(element, d))).collect(),
                        )
                    }
                    ColumnType::TextArray => FilterValue::TextArray(
                        array_elements(datum).1.into_iter().map(|e| e.map(|d| text_bytes(d))).collect(),
                    ),
                }
            }
        })
        .collect()
}

/// A scan key's argument datum of type `subtype` as a literal for a filter column of type `ty`
/// (texts as their keys); `None` when the index has no use for it.
///
/// # Safety
/// `datum` must be a non-null datum of type `subtype`.
unsafe fn literal(ty: ColumnType, subtype: pg_sys::Oid, datum: pg_sys::Datum) -> Option<Literal> {
    match ty {
        ColumnType::Text | ColumnType::TextArray if matches!(subtype, pg_sys::TEXTOID | pg_sys::VARCHAROID) => {
            // SAFETY: `subtype` is text or varchar (matched above) and `datum` a non-null value of it
            // (this function's contract: callers check SK_ISNULL / constisnull), as `text_bytes` needs.
            Some(Literal::Int(text_key(unsafe { text_bytes(datum) })))
        }
        ColumnType::Text | ColumnType::TextArray => None,
        _ => int_of(subtype, datum).map(Literal::Int),
    }
}

/// The literals of an array datum's elements for a column of type `ty` (NULL elements as
/// [`Literal::Null`]); `None` when some element is of no use.
///
/// # Safety
/// `datum` must be a non-null array datum.
unsafe fn literals(ty: ColumnType, datum: pg_sys::Datum) -> Option<Vec<Literal>> {
    // SAFETY: `datum` is a non-null array (this function's contract: a search-array key, an `&&`/`@>`
    // argument or a SAOP constant, each null-checked first), as `array_elements` requires.
    let (element, elements) = unsafe { array_elements(datum) };
    // SAFETY: each element is a non-null datum of the array's element type.
    elements.into_iter().map(|e| e.map_or(Some(Literal::Null), |d| unsafe { literal(ty, element, d) })).collect()
}

/// The predicate the scan keys `keys[..nkeys]` of a scan of an index with filter columns
/// `schema` admit rows by (see [`strata_lsm::scan::keys::predicate`]); `None` without keys.
///
/// # Safety
/// `keys` must point to `nkeys` scan keys of a scan of that index.
pub unsafe fn scan_predicate(schema: &FilterSchema, keys: pg_sys::ScanKey, nkeys: i32) -> Option<Predicate> {
    if keys.is_null() || nkeys <= 0 {
        return None;
    }
    let mut filter_keys = Vec::with_capacity(nkeys as usize);
    let mut markers = Vec::new();
    for i in 0..nkeys as usize {
        // SAFETY: `keys` is non-null and points to `nkeys` scan keys (this function's contract:
        // amrescan passes `keyData` and `numberOfKeys`), and `i < nkeys`.
        let key = unsafe { &*keys.add(i) };
        if key.sk_attno == 1 && key.sk_strategy == keys::PREDICATE_STRATEGY {
            if key.sk_flags as u32 & pg_sys::SK_ISNULL == 0 {
                // SAFETY: the marker operator's argument is a non-null text.
                let json = String::from_utf8_lossy(unsafe { text_bytes(key.sk_argument) }).into_owned();
                markers.extend(keys::decode_predicate(&json, schema));
            }
            continue;
        }
        let (Some(column), Some(op)) =
            (usize::try_from(key.sk_attno - 2).ok(), FilterOp::from_strategy(key.sk_strategy))
        else {
            continue;
        };
        let Some(ty) = schema.columns().get(column).map(|spec| spec.ty) else { continue };
        let flags = key.sk_flags as u32;
        let argument = if flags & pg_sys::SK_ISNULL != 0 {
            Some(KeyArgument::Null)
        } else if flags & pg_sys::SK_SEARCHARRAY != 0 {
            // SAFETY: a search-array key's argument is a non-null array of its subtype.
            unsafe { literals(ty, key.sk_argument) }.map(KeyArgument::AnyOf)
        } else if matches!(op, FilterOp::Overlaps | FilterOp::Contains) {
            // SAFETY: `&&` and `@>` take an array argument.
            unsafe { literals(ty, key.sk_argument) }.map(KeyArgument::Array)
        } else {
            // SAFETY: a non-null argument of type sk_subtype.
            unsafe { literal(ty, key.sk_subtype, key.sk_argument) }.map(KeyArgument::Value)
        };
        if let Some(argument) = argument {
            filter_keys.push(FilterKey { column, op, argument });
        }
    }
    let mut predicate = keys::predicate(&filter_keys, schema);
    if let Predicate::And(parts) = &mut predicate {
        parts.extend(markers);
    }
    Some(predicate)
}

/// The types of the filter columns of an index the planner describes (`info`, on the table with
/// OID `table`), as a schema for translating clauses; `None` when a filter column is an
/// expression or of a type no filter column has.
///
/// # Safety
/// `info` must be the planner's valid description of a strata index on `table`.
pub unsafe fn planner_schema(info: *mut pg_sys::IndexOptInfo, table: pg_sys::Oid) -> Option<FilterSchema> {
    // SAFETY: `info` is the planner's IndexOptInfo of a strata index on `table` (this function's
    // contract, from `or_clauses`); `indexkeys` has `ncolumns` >= `nkeycolumns` entries, so c is in bounds.
    let specs = unsafe {
        (1..(*info).nkeycolumns as usize)
            .map(|c| {
                let attno = *(*info).indexkeys.add(c);
                if attno <= 0 {
                    return None;
                }
                column_type(pg_sys::get_atttype(table, attno as pg_sys::AttrNumber))
                    .map(strata_engine::filter::FilterSpec::new)
            })
            .collect::<Option<Vec<_>>>()?
    };
    FilterSchema::new(&specs).ok()
}

/// A predicate over the filter columns of the index `info` (with `schema`) that is TRUE at least
/// wherever `node`, a restriction clause of relation `relid`, is TRUE: comparisons of a filter
/// column with a constant, `= ANY(constant array)`, `&&` / `@>` with a constant array, `AND`
/// (conjuncts it cannot translate are left out) and `OR` (every arm must translate). `None` when
/// it has no such predicate (a `NOT`, a parameter, another column, another operator).
///
/// # Safety
/// The arguments must be the planner's valid structures.
pub unsafe fn clause_predicate(
    info: *mut pg_sys::IndexOptInfo,
    relid: pg_sys::Index,
    schema: &FilterSchema,
    node: *mut pg_sys::Node,
) -> Option<Predicate> {
    // SAFETY: `node` is a live clause of the planner's RelOptInfo (this function's contract:
    // `or_clauses` passes a RestrictInfo's clause, the recursion its BoolExpr arms), so its tag and
    // fields can be read; `info` is the matching IndexOptInfo.
    unsafe {
        match (*node).type_ {
            pg_sys::NodeTag::T_BoolExpr => {
                let expr = node.cast::<pg_sys::BoolExpr>();
                let args = pgrx::PgList::<pg_sys::Node>::from_pg((*expr).args);
                let parts = args.iter_ptr().map(|arm| clause_predicate(info, relid, schema, arm));
                match (*expr).boolop {
                    pg_sys::BoolExprType::AND_EXPR => Some(Predicate::And(parts.flatten().collect())),
                    pg_sys::BoolExprType::OR_EXPR => parts.collect::<Option<Vec<_>>>().map(Predicate::Or),
                    _ => None,
                }
            }
            pg_sys::NodeTag::T_OpExpr => {
                let expr = node.cast::<pg_sys::OpExpr>();
                leaf_predicate(info, relid, schema, (*expr).opno, (*expr).args, false)
            }
            pg_sys::NodeTag::T_ScalarArrayOpExpr => {
                let expr = node.cast::<pg_sys::ScalarArrayOpExpr>();
                if !(*expr).useOr {
                    return None;
                }
                leaf_predicate(info, relid, schema, (*expr).opno, (*expr).args, true)
            }
            _ => None,
        }
    }
}

/// The predicate of `column <op> constant` (or `column <op> ANY(constant)` when `any`).
///
/// # Safety
/// As [`clause_predicate`]; `args` is the operator's argument list.
unsafe fn leaf_predicate(
    info: *mut pg_sys::IndexOptInfo,
    relid: pg_sys::Index,
    schema: &FilterSchema,
    opno: pg_sys::Oid,
    args: *mut pg_sys::List,
    any: bool,
) -> Option<Predicate> {
    // SAFETY: `args` is a live operator clause's argument list and `info` the planner's IndexOptInfo
    // (the contract of `clause_predicate`); `index_column` < nkeycolumns keeps indexkeys/opfamily
    // reads in bounds, and the constant's value is read only when it is not null.
    unsafe {
        let args = pgrx::PgList::<pg_sys::Node>::from_pg(args);
        let (left, right) = (args.get_ptr(0)?, args.get_ptr(1)?);
        let attno = column_of(left, relid)?;
        if (*right).type_ != pg_sys::NodeTag::T_Const {
            return None;
        }
        let constant = right.cast::<pg_sys::Const>();
        let index_column =
            (1..(*info).nkeycolumns as usize).find(|&c| *(*info).indexkeys.add(c) == i32::from(attno))?;
        let family = *(*info).opfamily.add(index_column);
        let op = FilterOp::from_strategy(u16::try_from(pg_sys::get_op_opfamily_strategy(opno, family)).ok()?)?;
        let column = index_column - 1;
        let ty = schema.columns().get(column)?.ty;
        let argument = if (*constant).constisnull {
            KeyArgument::Null
        } else if any {
            KeyArgument::AnyOf(literals(ty, (*constant).constvalue)?)
        } else if matches!(op, FilterOp::Overlaps | FilterOp::Contains) {
            KeyArgument::Array(literals(ty, (*constant).constvalue)?)
        } else {
            KeyArgument::Value(literal(ty, (*constant).consttype, (*constant).constvalue)?)
        };
        keys::key_predicate(&FilterKey { column, op, argument }, schema)
    }
}

/// The attribute number of the column of relation `relid` that `node` is (possibly under a
/// binary-compatible relabelling, such as `varchar` read as `text`).
///
/// # Safety
/// `node` must be a valid expression node.
pub unsafe fn column_of(mut node: *mut pg_sys::Node, relid: pg_sys::Index) -> Option<pg_sys::AttrNumber> {
    // SAFETY: `node` is a valid expression node (this function's contract: an operator argument of
    // a planner clause), and a RelabelType's `arg` is never null, so each node read is live.
    unsafe {
        while (*node).type_ == pg_sys::NodeTag::T_RelabelType {
            node = (*node.cast::<pg_sys::RelabelType>()).arg.cast();
        }
        if (*node).type_ != pg_sys::NodeTag::T_Var {
            return None;
        }
        let var = node.cast::<pg_sys::Var>();
        ((*var).varno as pg_sys::Index == relid && (*var).varlevelsup == 0).then_some((*var).varattno)
    }
}
