//! The op an opcode and its attributes name, and the attributes with syntax
//! of their own (collectives, domains, branches, async short forms).

use super::*;
use crate::formats::{read_by, ReadBy};

/// `replica_groups`, `channel_id`, `use_global_device_ids` and
/// `constrain_layout`.
pub(in crate::formats::text) fn collective(a: &mut Attrs) -> Result<Collective, ParseError> {
    let replica_groups = match a.take("replica_groups") {
        None => ReplicaGroups::default(),
        Some((Value::Ints(v), _)) if v.is_empty() => ReplicaGroups::default(),
        Some((_, p)) => read_whole_value(&p, "replica_groups", |text| {
            crate::formats::text::collective::parse_replica_groups(text)
        })?,
    };
    Ok(Collective {
        replica_groups,
        channel_id: channel_id(a)?,
        use_global_device_ids: a.flag("use_global_device_ids")?,
        constrain_layout: a.flag("constrain_layout")?,
    })
}

/// `domain={kind="sharding", entry={...}, exit={...}}`: the one kind of
/// domain XLA's text writes.
pub(super) fn domain(at: &Span<'_>, a: &mut Attrs) -> Result<Op, ParseError> {
    let (value, p) = a.required("domain")?;
    let Value::Map(entries) = value else {
        return err_at(
            &p,
            format!(
                "'domain' must be {{kind=..., entry=..., exit=...}}, got {}",
                value.kind()
            ),
        );
    };
    let mut kind = None;
    let (mut entry, mut exit) = (None, None);
    for (k, v) in entries {
        match (k.as_str(), v) {
            ("kind", Value::Str(s)) => kind = Some(s),
            ("entry", Value::Raw(text)) => entry = Some(text),
            ("exit", Value::Raw(text)) => exit = Some(text),
            (other, v) => {
                return err_at(
                    &p,
                    format!(
                        "domain has '{other}' ({}), which hlatc does not read",
                        v.kind()
                    ),
                )
            }
        }
    }
    if kind.as_deref() != Some("sharding") {
        return err_at(
            at,
            format!("domain of kind {kind:?}: hlatc reads sharding domains only"),
        );
    }
    let sharding = |text: Option<String>, side: &str| -> Result<Box<Sharding>, ParseError> {
        let Some(text) = text else {
            return err_at(&p, format!("domain needs its {side} sharding"));
        };
        crate::formats::text::sharding::parse_sharding(&text)
            .map(Box::new)
            .or_else(|e| err_at(&p, format!("domain {side}: {}", e.message)))
    };
    Ok(Op::Domain {
        entry: sharding(entry, "entry")?,
        exit: sharding(exit, "exit")?,
    })
}

/// `channel_id=N`. XLA reads a non-positive id as none (its proto cannot
/// tell `channel_id=0` from no channel), and so does hlatc.
pub(in crate::formats::text) fn channel_id(a: &mut Attrs) -> Result<Option<i64>, ParseError> {
    Ok(a.optional_int("channel_id")?.filter(|&id| id > 0))
}

/// `source_target_pairs={{0,1},...}`.
pub(in crate::formats::text) fn source_target_pairs(
    a: &mut Attrs,
) -> Result<Vec<(i64, i64)>, ParseError> {
    match a.take("source_target_pairs") {
        None => Ok(Vec::new()),
        Some((Value::Ints(v), _)) if v.is_empty() => Ok(Vec::new()),
        Some((_, p)) => read_whole_value(&p, "source_target_pairs", |text| {
            crate::formats::text::collective::parse_pairs(text)
        }),
    }
}

/// An in-place collective-permute's `slice_sizes={{1,8},{1,8}}`; none
/// (absent or `{}`) for the other forms.
pub(in crate::formats::text) fn permute_slice_sizes(
    a: &mut Attrs,
) -> Result<Vec<Vec<i64>>, ParseError> {
    match a.take("slice_sizes") {
        None => Ok(Vec::new()),
        Some((Value::Ints(v), _)) if v.is_empty() => Ok(Vec::new()),
        Some((_, p)) => read_whole_value(&p, "slice_sizes", |text| {
            crate::formats::text::collective::parse_slice_sizes(text)
        }),
    }
}

/// `replica_count=N` / `num_partitions=N`: a positive count.
pub(super) fn device_count(key: &str, value: &Value, at: &Span<'_>) -> Result<i64, ParseError> {
    match value {
        Value::Number(n) => match n.parse::<i64>() {
            Ok(v) if v >= 1 => Ok(v),
            _ => err_at(
                at,
                format!("module attribute '{key}' must be a positive integer, got {n}"),
            ),
        },
        other => err_at(
            at,
            format!(
                "module attribute '{key}' must be a positive integer, got {}",
                other.kind()
            ),
        ),
    }
}

pub(super) fn parse_enum<T>(
    attrs: &mut Attrs,
    key: &str,
    from: fn(&str) -> Option<T>,
    choices: &str,
) -> Result<T, ParseError> {
    let (w, p) = attrs.word(key)?;
    from(&w).map_or_else(
        || {
            err_at(
                &p,
                format!("unknown {key} '{w}' (expected one of {choices})"),
            )
        },
        Ok,
    )
}

/// [`parse_enum`] where the attribute is written, the default where not.
pub(super) fn optional_enum<T: Default>(
    attrs: &mut Attrs,
    key: &str,
    from: fn(&str) -> Option<T>,
    choices: &str,
) -> Result<T, ParseError> {
    if attrs.map.contains_key(key) {
        parse_enum(attrs, key, from, choices)
    } else {
        Ok(T::default())
    }
}

/// A conditional's branches: `branch_computations={...}`, or the pred
/// form's `true_computation` and `false_computation`.
pub(super) fn conditional_branches(
    at: &Span<'_>,
    a: &mut Attrs,
) -> Result<Vec<ComputationId>, ParseError> {
    const KEY: &str = "branch_computations";
    let listed = a.take(KEY);
    let pred_form =
        a.map.contains_key("true_computation") || a.map.contains_key("false_computation");
    match listed {
        Some((_, p)) if pred_form => err_at(
            &p,
            "conditional has both branch_computations and true_computation/false_computation",
        ),
        Some((Value::Words(ws), p)) => Ok(ws.iter().map(|w| a.callee(KEY, w, p)).collect()),
        Some((Value::Word(w), p)) => Ok(vec![a.callee(KEY, &w, p)]),
        Some((other, p)) => err_at(
            &p,
            format!(
                "'branch_computations' must list computations like {{%a, %b}}, got {}",
                other.kind()
            ),
        ),
        None if pred_form => {
            let mut branch = |key| {
                let (name, p) = a.word(key)?;
                Ok(a.callee(key, &name, p))
            };
            Ok(vec![
                branch("true_computation")?,
                branch("false_computation")?,
            ])
        }
        None => err_at(
            at,
            "conditional needs branch_computations={...} or true_computation and false_computation",
        ),
    }
}

/// The op `opcode` with its attributes from `a`; `opcode_at` is where
/// it is written (for a short-form async op, the wrapped op's opcode is
/// part of the word).
pub(super) fn op_named(
    opcode: &str,
    opcode_at: &Span<'_>,
    a: &mut Attrs,
) -> Result<Op, ParseError> {
    let built = |op: Op, by: ReadBy| {
        debug_assert_eq!(read_by(&op), by, "'{opcode}' read otherwise than stated");
        Ok(op)
    };
    if let Some(op) = Op::without_attributes(opcode) {
        return built(op, ReadBy::Opcode);
    }
    if let Some(op) = stepped_op(opcode, a)? {
        return built(op, ReadBy::Family);
    }
    let mut described = described::TextReader {
        attrs: a,
        opcode,
        last: None,
    };
    if let Some(op) = Op::read_described(opcode, &mut described)? {
        return built(op, ReadBy::Description);
    }
    let op = match opcode {
        "conditional" => Op::Conditional {
            branches: conditional_branches(opcode_at, a)?,
        },
        "domain" => domain(opcode_at, a)?,
        "outfeed" => outfeed(a)?,
        "custom-call" => custom_call(opcode_at, a)?,
        _ => match async_short_form(opcode, opcode_at, a)? {
            Some(op) => op,
            None => {
                return err_at(
                    opcode_at,
                    format!(
                        "unsupported opcode '{opcode}' (supported: {}, and an async form \
                         `<opcode>-start`, `-update`, `-done` of each)",
                        all_opcodes().join(", ")
                    ),
                )
            }
        },
    };
    // A short-form async op is an `Op::Async` its family states.
    let by = match op {
        Op::Async { .. } => ReadBy::Family,
        _ => ReadBy::Hand,
    };
    built(op, by)
}

/// The op families whose opcodes their step or kind spells: batch norms,
/// transfers and the async ops.
fn stepped_op(opcode: &str, a: &mut Attrs) -> Result<Option<Op>, ParseError> {
    if let Some(kind) = BatchNormKind::from_opcode(opcode) {
        return Ok(Some(Op::BatchNorm {
            kind,
            epsilon: a.f32("epsilon")?,
            feature_index: a.int("feature_index")?,
        }));
    }
    if let Some(step) = TransferStep::from_opcode(opcode) {
        return Ok(Some(Op::Transfer(Transfer {
            step,
            channel_id: channel_id(a)?,
            is_host_transfer: a.flag("is_host_transfer")?,
        })));
    }
    if let Some(step) = AsyncStep::from_opcode(opcode) {
        // An update or done may leave out the computation: it is its
        // start's, found once the operands are known.
        let calls = if step == AsyncStep::Start || a.map.contains_key("calls") {
            let (name, p) = a.word("calls")?;
            a.callee("calls", &name, p)
        } else {
            ComputationId::PENDING
        };
        return Ok(Some(Op::Async {
            step,
            calls,
            thread: async_thread(a)?,
        }));
    }
    Ok(None)
}

fn outfeed(a: &mut Attrs) -> Result<Op, ParseError> {
    Ok(Op::Outfeed {
        config: a.string("outfeed_config")?.unwrap_or_default(),
        shape: match a.take("outfeed_shape") {
            None => None,
            Some((Value::Shape(s), _)) => Some(Box::new(s)),
            Some((other, p)) => {
                return err_at(
                    &p,
                    format!("'outfeed_shape' must be a shape, got {}", other.kind()),
                )
            }
        },
    })
}

/// A dot's (or ragged dot's) dimension numbers, precisions and algorithm.
/// `async_execution_thread="..."`; the main thread is none.
pub(super) fn async_thread(a: &mut Attrs) -> Result<Option<String>, ParseError> {
    Ok(a.string("async_execution_thread")?
        .filter(|t| t != crate::ir::computation::MAIN_THREAD))
}

/// XLA's short form of the async ops: `call-start(a, b), to_apply=f` is an
/// `async-start` of a computation whose root is that `call`, built by the
/// reader (see [`wrap_async_starts`]); `call-update` and `call-done` are
/// the update and done of it. `None` when `opcode` is not such a form.
pub(super) fn async_short_form(
    opcode: &str,
    opcode_at: &Span<'_>,
    a: &mut Attrs,
) -> Result<Option<Op>, ParseError> {
    let Some((step, wrapped)) = AsyncStep::ALL
        .into_iter()
        .find_map(|s| opcode.strip_suffix(s.suffix()).map(|w| (s, w)))
    else {
        return Ok(None);
    };
    if !all_opcodes().contains(&wrapped) {
        return Ok(None);
    }
    let thread = async_thread(a)?;
    if step == AsyncStep::Start {
        a.wrapped = Some(Box::new(op_named(wrapped, opcode_at, a)?));
    }
    Ok(Some(Op::Async {
        step,
        calls: ComputationId::PENDING,
        thread,
    }))
}
