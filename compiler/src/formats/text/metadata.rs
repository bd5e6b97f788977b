//! `metadata={op_name="a" source_line=3 ...}`: an instruction's, or one of
//! a sharding's, from its fields.

use crate::ir::metadata::Metadata;
use std::collections::BTreeMap;

/// A metadata field hlatc cannot keep.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum MetadataError {
    #[error("metadata {key} must be an integer, got {value}")]
    NotAnInteger { key: String, value: String },
    #[error("metadata stack_frame_id {0} is out of range")]
    StackFrameOutOfRange(i64),
    #[error("unsupported metadata field '{0}'")]
    UnknownField(String),
}

/// Metadata from its `key=value` fields, refusing a field it does not know.
pub(crate) fn metadata_fields(mut m: BTreeMap<String, String>) -> Result<Metadata, MetadataError> {
    let mut int = |key: &str| -> Result<i64, MetadataError> {
        match m.remove(key) {
            Some(value) => value.parse().map_err(|_| MetadataError::NotAnInteger {
                key: key.to_string(),
                value,
            }),
            None => Ok(0),
        }
    };
    let source_line = int("source_line")?;
    let source_end_line = int("source_end_line")?;
    let source_column = int("source_column")?;
    let source_end_column = int("source_end_column")?;
    let stack_frame_id = int("stack_frame_id")?;
    let stack_frame_id = i32::try_from(stack_frame_id)
        .map_err(|_| MetadataError::StackFrameOutOfRange(stack_frame_id))?;
    let md = Metadata {
        op_type: m.remove("op_type").unwrap_or_default(),
        op_name: m.remove("op_name").unwrap_or_default(),
        source_file: m.remove("source_file").unwrap_or_default(),
        source_line,
        source_end_line,
        source_column,
        source_end_column,
        stack_frame_id,
        scheduling_name: m.remove("scheduling_name").unwrap_or_default(),
        deduplicated_name: m.remove("deduplicated_name").unwrap_or_default(),
    };
    if let Some(key) = m.into_keys().next() {
        return Err(MetadataError::UnknownField(key));
    }
    Ok(md)
}
