//! Where an instruction came from: XLA's `OpMetadata`.

/// XLA's `OpMetadata`, kept so that imported programs keep their provenance.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Metadata {
    pub op_type: String,
    pub op_name: String,
    pub source_file: String,
    pub source_line: i64,
    pub source_end_line: i64,
    pub source_column: i64,
    pub source_end_column: i64,
    /// Index into the module's stack-frame tables (1-based; 0: none).
    pub stack_frame_id: i32,
    pub scheduling_name: String,
    pub deduplicated_name: String,
}

impl Metadata {
    /// Field by field, without comparing against a default value: that
    /// compared every string with `memcmp`, which was half of printing a
    /// module on one VM. The destructuring names every field, so a new one
    /// cannot be left out.
    pub fn is_empty(&self) -> bool {
        let Metadata {
            op_type,
            op_name,
            source_file,
            source_line,
            source_end_line,
            source_column,
            source_end_column,
            stack_frame_id,
            scheduling_name,
            deduplicated_name,
        } = self;
        op_type.is_empty()
            && op_name.is_empty()
            && source_file.is_empty()
            && scheduling_name.is_empty()
            && deduplicated_name.is_empty()
            && [
                *source_line,
                *source_end_line,
                *source_column,
                *source_end_column,
            ] == [0; 4]
            && *stack_frame_id == 0
    }
}
