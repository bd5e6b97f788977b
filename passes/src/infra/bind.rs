//! Binding an entry parameter to a value known ahead of time, and dropping
//! parameters nothing reads. A mask that arrives as a parameter (NxD and
//! torch-xla feed the causal mask from the host) gives the same HLO whether
//! it is causal or not, so it is never folded from its shape; binding it to
//! its actual value lets `fold-causal-mask` decide from the data.

use hlatc_compiler::{Instruction, Literal, Module, Op, Shape};

#[derive(Debug, Clone, PartialEq, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum BindError {
    #[error("no entry parameter named '{name}' (parameters: {known})")]
    UnknownParameter { name: String, known: String },
    #[error("parameter '{name}' is {expected}, but the bound tensor is {got}")]
    Mismatch {
        name: String,
        expected: String,
        got: String,
    },
}

/// Replaces every read of the entry parameter `name` by a constant holding
/// `value`, whose type and dimensions must be the parameter's. The
/// parameter stays in the signature, so callers keep working.
pub fn bind_parameter(m: &mut Module, name: &str, value: Literal) -> Result<(), BindError> {
    let c = m.entry();
    let params = c.parameters();
    let Some(&p) = params.iter().find(|&&p| c.instr(p).name == name) else {
        return Err(BindError::UnknownParameter {
            name: name.to_string(),
            known: params
                .iter()
                .map(|&p| c.instr(p).name.clone())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let want = &c.instr(p).shape;
    let got = Shape::array(value.ty(), value.dims().to_vec());
    let same = match want.as_array() {
        Some(a) => a.ty == value.ty() && a.dims == value.dims(),
        None => false,
    };
    if !same {
        return Err(BindError::Mismatch {
            name: name.to_string(),
            expected: want.to_string(),
            got: got.to_string(),
        });
    }
    let shape = want.clone();
    let mut names = crate::infra::names::Names::of_module(m);
    let c = m.entry_mut();
    let mut k = Instruction::new(
        names.fresh(&format!("{name}.bound")),
        shape,
        Op::Constant(value),
    );
    k.metadata = c.instr(p).metadata.clone();
    let k = c.add(k, &[]);
    c.replace_all_uses(p, k);
    Ok(())
}

/// Removes entry parameters nothing reads and no output aliases, numbering
/// the rest from 0 in their old order; returns the names removed. A
/// removed parameter's buffer donation goes with it; the others follow
/// their parameters' new numbers.
pub fn drop_unused_parameters(m: &mut Module) -> Vec<String> {
    let aliased: Vec<i64> = m.input_output_alias.iter().map(|a| a.parameter).collect();
    let c = m.entry_mut();
    let mut params = c.parameters();
    params.sort_by_key(|&p| match c.instr(p).op {
        Op::Parameter(n) => n,
        _ => unreachable!("parameters() returns parameters"),
    });
    let mut dropped = Vec::new();
    let mut dropped_numbers = Vec::new();
    let mut renumber = Vec::new();
    let mut next = 0i64;
    for p in params {
        let Op::Parameter(n) = c.instr(p).op else {
            continue;
        };
        if !c.has_users(p) && c.root() != Some(p) && !aliased.contains(&n) {
            dropped.push(c.instr(p).name.clone());
            dropped_numbers.push(n as usize);
            c.remove(p);
        } else {
            c.instr_mut(p).op = Op::Parameter(next);
            renumber.push((n, next));
            next += 1;
        }
    }
    // The boundary layouts of the parameters that stay stay theirs.
    if let Some(l) = &mut m.entry_layout {
        for &n in dropped_numbers.iter().rev() {
            if n < l.parameters.len() {
                l.parameters.remove(n);
            }
        }
    }
    let new_number = |old: i64| renumber.iter().find(|(o, _)| *o == old).map(|&(_, n)| n);
    for a in &mut m.input_output_alias {
        if let Some(new) = new_number(a.parameter) {
            a.parameter = new;
        }
    }
    m.buffer_donors
        .retain_mut(|d| match new_number(d.parameter) {
            Some(new) => {
                d.parameter = new;
                true
            }
            None => false,
        });
    dropped
}
