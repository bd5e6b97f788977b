//! What a serialized module holds, read from the protobuf wire format
//! itself. prost skips fields a message does not declare, as protobuf
//! does; hlatc must not, so every field of an incoming proto is checked
//! against the fields hlatc models ([`check_modeled`]) before it is
//! decoded, and one it does not model is refused by its path and XLA's
//! name. The same walk tells an `xla.HloProto` wrapper (what
//! `--xla_dump_hlo_as_proto` writes) from a bare `HloModuleProto`.

use super::schema::{Modeled, Schema};

/// Why the wire walk refuses a proto.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WireError {
    /// A field hlatc does not model, which protobuf would skip: named by
    /// its path, its number and, where the table has it, XLA's name.
    #[error(
        "{path}: field {number}{} of {message} is not modeled by hlatc",
        xla_name.map(|name| format!(" ({name})")).unwrap_or_default()
    )]
    Unmodeled {
        path: String,
        number: u32,
        xla_name: Option<&'static str>,
        message: &'static str,
    },
    #[error("{path}: messages nest too deep")]
    TooDeep { path: String },
}

/// A field read off the wire: its number and, when length-delimited, its
/// payload.
struct Field<'b> {
    number: u32,
    payload: Option<&'b [u8]>,
}

fn varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The fields of one message, in order; `None` when the bytes are not a
/// well-formed message.
fn fields(bytes: &[u8]) -> Option<Vec<Field<'_>>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let key = varint(bytes, &mut pos)?;
        let number = u32::try_from(key >> 3).ok().filter(|&n| n > 0)?;
        let payload = match key & 7 {
            0 => {
                varint(bytes, &mut pos)?;
                None
            }
            1 => {
                pos = pos.checked_add(8).filter(|&p| p <= bytes.len())?;
                None
            }
            2 => {
                let len = usize::try_from(varint(bytes, &mut pos)?).ok()?;
                let end = pos.checked_add(len).filter(|&e| e <= bytes.len())?;
                let p = &bytes[pos..end];
                pos = end;
                Some(p)
            }
            5 => {
                pos = pos.checked_add(4).filter(|&p| p <= bytes.len())?;
                None
            }
            // Groups (3, 4) are not in XLA's protos; 6 and 7 do not exist.
            _ => return None,
        };
        out.push(Field { number, payload });
    }
    Some(out)
}

/// Checks that every field in `bytes`, at any depth, is one hlatc models
/// in `M`. Malformed bytes pass: decoding reports them.
pub(crate) fn check_modeled<M: Modeled>(bytes: &[u8]) -> Result<(), WireError> {
    let schema = M::schema();
    walk(bytes, schema, schema.name.to_string(), 0)
}

fn walk(
    bytes: &[u8],
    schema: &'static Schema,
    path: String,
    depth: usize,
) -> Result<(), WireError> {
    // Deeper than any module nests (shapes are capped at 64 tuple levels).
    if depth > 200 {
        return Err(WireError::TooDeep { path });
    }
    let Some(fields) = fields(bytes) else {
        return Ok(());
    };
    let mut seen: Vec<(u32, usize)> = Vec::new();
    for f in fields {
        // An empty length-delimited field (an empty message, string or
        // list, as XLA writes `statistics_viz {}`) holds nothing to lose.
        if f.payload.is_some_and(<[u8]>::is_empty) {
            continue;
        }
        let Some(field) = schema.fields.iter().find(|s| s.number == f.number) else {
            return Err(WireError::Unmodeled {
                path,
                number: f.number,
                xla_name: schema
                    .unmodeled
                    .iter()
                    .find(|(n, _)| *n == f.number)
                    .map(|&(_, name)| name),
                message: schema.name,
            });
        };
        if let (Some(nested), Some(payload)) = ((field.nested)(), f.payload) {
            let index = match seen.iter_mut().find(|(n, _)| *n == f.number) {
                Some((_, i)) => {
                    *i += 1;
                    *i
                }
                None => {
                    seen.push((f.number, 0));
                    0
                }
            };
            walk(
                payload,
                nested,
                format!("{path}.{}[{index}]", field.name),
                depth + 1,
            )?;
        }
    }
    Ok(())
}

/// The module inside an `xla.HloProto` wrapper, if `bytes` is one (its
/// fields are only `hlo_module` (1) and `buffer_assignment` (3), and the
/// first holds computations), and whether a buffer assignment came with it.
pub(crate) fn unwrap_hlo_proto(bytes: &[u8]) -> Option<(&[u8], bool)> {
    let top = fields(bytes)?;
    if top.iter().any(|f| f.number != 1 && f.number != 3) {
        return None;
    }
    // A module's field 1 is its name, which never reads as a message with
    // computations (field 3) in it.
    let module = top.iter().find(|f| f.number == 1)?.payload?;
    let inner = fields(module)?;
    if !inner.iter().any(|f| f.number == 3 && f.payload.is_some()) {
        return None;
    }
    let has_assignment = top.iter().any(|f| f.number == 3);
    Some((module, has_assignment))
}
