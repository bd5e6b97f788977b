//! The text of the annotations any instruction may carry and no op reads:
//! `statistics=`, `result_accuracy=` and `origin=`, each read whole with a
//! cursor so an error points at the byte inside the value.

use super::cursor::{AttrSyntaxError, Cursor};
use crate::ir::op::F64Bits;
use crate::ir::original_value::{OriginalArray, OriginalLeaf, OriginalValue};
use crate::ir::result_accuracy::ResultAccuracy;
use crate::ir::statistics::Statistics;

type Result<T> = std::result::Result<T, AttrSyntaxError>;

/// `{visualizing_index=1,stat-0=55.5,...}`. XLA's reader takes the first
/// entry as the index whatever its key; hlatc wants it named.
pub(crate) fn parse_statistics(text: &str) -> Result<Statistics> {
    let mut c = Cursor::new(text);
    c.require("{")?;
    let mut stats = Statistics::default();
    if c.eat("}") {
        return Ok(stats);
    }
    c.skip_ws();
    let at = c.pos;
    let key = stat_name(&mut c)?;
    if key != "visualizing_index" {
        c.pos = at;
        return c.fail(format!(
            "statistics start with visualizing_index=N, not '{key}' (XLA would take its value as the index)"
        ));
    }
    c.require("=")?;
    stats.visualizing_index = c.int()?;
    while c.eat(",") {
        let name = stat_name(&mut c)?;
        c.require("=")?;
        stats.values.push((name, F64Bits::new(c.float()?)));
    }
    c.require("}")?;
    c.finish()?;
    Ok(stats)
}

/// A statistic's name: an attribute name (`stat-0`, `mean.abs`).
fn stat_name(c: &mut Cursor<'_>) -> Result<String> {
    let name = c.run(crate::ir::statistics::is_stat_name_byte);
    if name.is_empty() {
        return c.fail("expected a statistic's name");
    }
    Ok(name.to_string())
}

/// `{mode=highest}` or `{tolerance={atol=a,rtol=r,ulps=u}}`, the bounds in
/// any order and 0 where left out; `{mode=default}` is no annotation.
pub(crate) fn parse_result_accuracy(text: &str) -> Result<Option<ResultAccuracy>> {
    let mut c = Cursor::new(text);
    c.require("{")?;
    let at = c.pos;
    let key = c.word().to_string();
    c.require("=")?;
    let accuracy = match key.as_str() {
        "mode" => {
            let at = c.pos;
            let mode = c.word().to_ascii_lowercase();
            match mode.as_str() {
                "default" => None,
                "highest" => Some(ResultAccuracy::Highest),
                _ => {
                    c.pos = at;
                    return c.fail(format!(
                        "unknown accuracy mode '{mode}' (known: default, highest)"
                    ));
                }
            }
        }
        "tolerance" => Some(tolerance(&mut c)?),
        _ => {
            c.pos = at;
            return c.fail(format!("expected mode= or tolerance=, found '{key}'"));
        }
    };
    c.require("}")?;
    c.finish()?;
    Ok(accuracy)
}

fn tolerance(c: &mut Cursor<'_>) -> Result<ResultAccuracy> {
    c.require("{")?;
    let (mut atol, mut rtol, mut ulps) = (0.0, 0.0, 0);
    if !c.eat("}") {
        loop {
            let at = c.pos;
            let key = c.word().to_string();
            c.require("=")?;
            match key.as_str() {
                "atol" => atol = c.float()?,
                "rtol" => rtol = c.float()?,
                // XLA truncates `ulps=2.5` to 2; hlatc wants the integer.
                "ulps" => ulps = c.int()?,
                _ => {
                    c.pos = at;
                    return c.fail(format!(
                        "unknown tolerance '{key}' (known: atol, rtol, ulps)"
                    ));
                }
            }
            if !c.eat(",") {
                break;
            }
        }
        c.require("}")?;
    }
    Ok(ResultAccuracy::Tolerance {
        atol: F64Bits::new(atol),
        rtol: F64Bits::new(rtol),
        ulps,
    })
}

/// `{tree}`: a tree of `{"name" {shape index}}` leaves in parentheses,
/// `{}` for an unknown leaf, or `{[synthetic_call]}`.
pub(crate) fn parse_original_value(text: &str) -> Result<OriginalValue> {
    let mut c = Cursor::new(text);
    c.require("{")?;
    if c.eat("[") {
        let at = c.pos;
        if c.word() != "synthetic_call" {
            c.pos = at;
            return c.fail("expected `synthetic_call`");
        }
        c.require("]")?;
        c.require("}")?;
        c.finish()?;
        return Ok(OriginalValue::SyntheticCall);
    }
    let mut leaves = Vec::new();
    // `origin={}`: XLA reads it as the empty tuple.
    if !c.eat("}") {
        tree(&mut c, &mut Vec::new(), &mut leaves, 0)?;
        c.require("}")?;
    }
    c.finish()?;
    Ok(OriginalValue::Tree(leaves))
}

fn tree(
    c: &mut Cursor<'_>,
    index: &mut Vec<i64>,
    leaves: &mut Vec<OriginalLeaf>,
    depth: usize,
) -> Result<()> {
    if depth > super::MAX_NESTING {
        return c.fail("origin nests too deep");
    }
    c.skip_ws();
    let at = c.pos;
    if c.eat("(") {
        if c.eat(")") {
            if depth > 0 {
                c.pos = at;
                // Leaves are all a proto keeps: an empty tuple inside has
                // none, and would be lost.
                return c.fail("an empty tuple inside an origin has no leaf to keep");
            }
            return Ok(());
        }
        let mut element = 0;
        loop {
            index.push(element);
            tree(c, index, leaves, depth + 1)?;
            index.pop();
            element += 1;
            if !c.eat(",") {
                break;
            }
        }
        return c.require(")");
    }
    c.require("{")?;
    let array = if c.eat("}") {
        None
    } else {
        let instruction = c.string()?;
        let shape_index = if c.eat("{") {
            if c.eat("}") {
                Vec::new()
            } else {
                let v = c.ints()?;
                c.require("}")?;
                v
            }
        } else {
            Vec::new()
        };
        c.require("}")?;
        Some(OriginalArray {
            instruction,
            shape_index,
        })
    };
    leaves.push(OriginalLeaf {
        index: index.clone(),
        array,
    });
    Ok(())
}
