//! `custom-call`: a target and the many attributes XLA lets one carry.

use super::*;

pub(super) fn custom_call(opcode_at: &Span<'_>, a: &mut Attrs) -> Result<Op, ParseError> {
    let Some(target) = a.string("custom_call_target")? else {
        return err_at(opcode_at, "custom-call needs custom_call_target=\"...\"");
    };
    let api_version = optional_enum(
        a,
        "api_version",
        CustomCallApiVersion::from_name,
        "API_VERSION_*",
    )?;
    let convolution = convolution(a)?;
    let operand_layouts = operand_layouts(a)?;
    Ok(Op::CustomCall(CustomCall {
        target,
        api_version,
        has_side_effect: a.flag("custom_call_has_side_effect")?,
        schedule: optional_enum(
            a,
            "schedule",
            CustomCallSchedule::from_name,
            "SCHEDULE_NONE, SCHEDULE_LATEST, SCHEDULE_EARLIEST",
        )?,
        padding_type: optional_enum(
            a,
            "padding_type",
            PaddingType::from_name,
            "PADDING_INVALID, PADDING_VALID, PADDING_SAME",
        )?,
        literal: literal_attribute(a)?,
        convolution,
        operand_layouts,
        aliasing: a.operand_aliasing()?,
        called: called_computations(a)?,
    }))
}

/// A convolution's attributes on a custom call, when any is written.
fn convolution(a: &mut Attrs) -> Result<Option<Box<CallConvolution>>, ParseError> {
    const KEYS: [&str; 5] = [
        "window",
        "dim_labels",
        "feature_group_count",
        "batch_group_count",
        "operand_precision",
    ];
    if !KEYS.iter().any(|k| a.map.contains_key(*k)) {
        return Ok(None);
    }
    let window = a
        .map
        .contains_key("window")
        .then(|| a.window())
        .transpose()?;
    Ok(Some(Box::new(CallConvolution {
        window,
        dims: a.dim_labels()?,
        feature_group_count: a.optional_int("feature_group_count")?.unwrap_or(1),
        batch_group_count: a.optional_int("batch_group_count")?.unwrap_or(1),
        precision: a.precision()?,
    })))
}

/// `operand_layout_constraints={f32[2]{0}, ...}`: one shape per operand.
fn operand_layouts(a: &mut Attrs) -> Result<Option<Vec<Shape>>, ParseError> {
    match a.take("operand_layout_constraints") {
        None => Ok(None),
        Some((Value::Shapes(shapes), _)) => Ok(Some(shapes)),
        Some((Value::Ints(v), _)) if v.is_empty() => Ok(Some(Vec::new())),
        Some((other, p)) => err_at(
            &p,
            format!(
                "'operand_layout_constraints' must list one shape per operand, got {}",
                other.kind()
            ),
        ),
    }
}

/// `literal=s32[2]{0} {1, 2}`: a shape and its value.
fn literal_attribute(a: &mut Attrs) -> Result<Option<Box<Literal>>, ParseError> {
    match a.take("literal") {
        None => Ok(None),
        Some((Value::Literal(lit), _)) => Ok(Some(Box::new(lit))),
        Some((other, p)) => err_at(
            &p,
            format!(
                "'literal' must be a shape and its value, like s32[2]{{0}} {{1, 2}}, got {}",
                other.kind()
            ),
        ),
    }
}

/// `called_computations={f, g}`. XLA's reader takes `to_apply=f` on a
/// custom call as its one called computation, and prints it back as
/// `called_computations={f}` (checked through jaxlib).
fn called_computations(a: &mut Attrs) -> Result<Vec<ComputationId>, ParseError> {
    match a.take("called_computations") {
        None => match a.take("to_apply") {
            None => Ok(Vec::new()),
            Some((Value::Word(name), p)) => Ok(vec![a.callee("to_apply", &name, p)]),
            Some((other, p)) => err_at(
                &p,
                format!("'to_apply' must name a computation, got {}", other.kind()),
            ),
        },
        Some((Value::Words(names), p)) => Ok(names
            .iter()
            .map(|n| a.callee("called_computations", n, p))
            .collect()),
        Some((Value::Ints(v), _)) if v.is_empty() => Ok(Vec::new()),
        Some((other, p)) => err_at(
            &p,
            format!(
                "'called_computations' must list computation names, got {}",
                other.kind()
            ),
        ),
    }
}
