//! What any instruction may carry besides its op: metadata, sharding,
//! statistics, result accuracy, origin and parameter replication; and the
//! reading of values with a syntax of their own, whose errors point inside
//! them.

use super::*;

pub(super) fn metadata(
    m: BTreeMap<String, String>,
    at: &AttrPlace<'_>,
) -> Result<Metadata, ParseError> {
    crate::formats::text::metadata::metadata_fields(m).or_else(|e| err_at(at, e.to_string()))
}

/// An instruction's `statistics=`, `result_accuracy=` (on the ops XLA
/// lets carry it) and `origin=`.
#[allow(clippy::type_complexity)]
pub(super) fn annotations(
    attrs: &mut Attrs,
    op: &Op,
) -> Result<
    (
        Option<Box<crate::ir::statistics::Statistics>>,
        Option<Box<ResultAccuracy>>,
        Option<Box<crate::ir::original_value::OriginalValue>>,
    ),
    ParseError,
> {
    let statistics = attrs
        .take("statistics")
        .map(|(_, p)| {
            read_whole_value(
                &p,
                "statistics",
                crate::formats::text::annotations::parse_statistics,
            )
        })
        .transpose()?;
    let result_accuracy = match attrs.take("result_accuracy") {
        None => None,
        Some((_, p)) => {
            let accuracy = read_whole_value(&p, "result_accuracy", |text| {
                crate::formats::text::annotations::parse_result_accuracy(text)
            })?;
            // Written, it must fit the op even when it reads as none.
            let problem = match &accuracy {
                Some(a) => a.problem_on(op),
                None => ResultAccuracy::refused_on(op),
            };
            if let Some(problem) = problem {
                return err_at(&p, problem);
            }
            accuracy
        }
    };
    let original_value = attrs
        .take("origin")
        .map(|(_, p)| {
            read_whole_value(
                &p,
                "origin",
                crate::formats::text::annotations::parse_original_value,
            )
        })
        .transpose()?
        .map(Box::new);
    Ok((
        statistics.map(Box::new),
        result_accuracy.map(Box::new),
        original_value,
    ))
}

/// `parameter_replication={true,false}`: one flag per leaf buffer.
pub(super) fn parameter_replication(attrs: &mut Attrs) -> Result<Option<Vec<bool>>, ParseError> {
    Ok(match attrs.take("parameter_replication") {
        None => None,
        Some((Value::Words(ws), p)) => Some(
            ws.iter()
                .map(|w| match w.as_str() {
                    "true" => Ok(true),
                    "false" => Ok(false),
                    other => err_at(
                        &p,
                        format!("'parameter_replication' lists true or false, got '{other}'"),
                    ),
                })
                .collect::<Result<Vec<bool>, _>>()?,
        ),
        Some((other, p)) => {
            return err_at(
                &p,
                format!(
                    "'parameter_replication' must be a list like {{true,false}}, got {}",
                    other.kind()
                ),
            )
        }
    })
}

/// The sharding of a `sharding=...` attribute, with an error pointing
/// inside its text.
pub(super) fn sharding(attribute: &AttrPlace<'_>) -> Result<Sharding, ParseError> {
    read_whole_value(
        attribute,
        "sharding",
        crate::formats::text::sharding::parse_sharding,
    )
}

/// Reads an attribute's value (taken whole by the grammar) with `read`; an
/// error points at the byte inside the value where it went wrong.
pub(super) fn read_whole_value<T>(
    attribute: &AttrPlace<'_>,
    what: &str,
    read: impl FnOnce(&str) -> Result<T, crate::formats::text::cursor::AttrSyntaxError>,
) -> Result<T, ParseError> {
    let value = attribute.value;
    read_text_at(&value, what, || read(value.as_str()))
}

/// Runs `read` over the text of `value`; an error points at the byte
/// where it went wrong.
pub(super) fn read_text_at<T>(
    value: &Span<'_>,
    what: &str,
    read: impl FnOnce() -> Result<T, crate::formats::text::cursor::AttrSyntaxError>,
) -> Result<T, ParseError> {
    read().map_err(|e| {
        let (line, column) = value.line_col_at(e.offset);
        ParseError {
            line,
            column,
            message: format!("{what}: {}", e.message),
        }
    })
}
