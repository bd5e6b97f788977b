//! The stack-frame tables current XLA prints after the module header (as
//! JAX's dumps carry them), which an instruction's `metadata.stack_frame_id`
//! points into: source files, function names, locations in them and frames
//! (a location and its caller frame). Ids are 1-based positions; a parent
//! of 0 means none. XLA's text writes `parent_frame_id` one above that
//! (1 for no parent), as its printer does; the model and the proto do not.
//!
//! ```text
//! FileNames
//! 1 "train.py"
//!
//! FunctionNames
//! 1 "loss"
//!
//! FileLocations
//! 1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=11 end_column=26}
//!
//! StackFrames
//! 1 {file_location_id=1 parent_frame_id=1}
//! ```

use std::fmt::Write;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct StackFrameIndex {
    pub file_names: Vec<String>,
    pub function_names: Vec<String>,
    pub file_locations: Vec<FileLocation>,
    pub stack_frames: Vec<StackFrame>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileLocation {
    pub file_name_id: i32,
    pub function_name_id: i32,
    pub line: i32,
    pub end_line: i32,
    pub column: i32,
    pub end_column: i32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackFrame {
    pub file_location_id: i32,
    pub parent_frame_id: i32,
}

/// A frame's location resolved: (file, function, line, column, end line,
/// end column).
pub type ResolvedLocation = (String, String, i32, i32, i32, i32);

/// One of the four tables, each printed under its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    FileNames,
    FunctionNames,
    FileLocations,
    StackFrames,
}

impl Section {
    /// Every table, in the order XLA prints them.
    pub const ALL: [Section; 4] = [
        Section::FileNames,
        Section::FunctionNames,
        Section::FileLocations,
        Section::StackFrames,
    ];

    /// The table's heading, as XLA writes it.
    pub fn name(self) -> &'static str {
        match self {
            Section::FileNames => "FileNames",
            Section::FunctionNames => "FunctionNames",
            Section::FileLocations => "FileLocations",
            Section::StackFrames => "StackFrames",
        }
    }

    /// The table a heading names.
    pub fn from_name(name: &str) -> Option<Section> {
        Section::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl std::fmt::Display for Section {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An id in the stack-frame tables that points at no entry of the table
/// it refers to.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{table} {entry}: {field} {id} is not among the {listed} listed")]
pub struct StackFrameError {
    /// The table whose entry holds the id: `FileLocations` or `StackFrames`.
    pub table: Section,
    /// That entry's id (1-based).
    pub entry: usize,
    /// The field holding the id, as XLA names it (`file_name_id`, ...).
    pub field: &'static str,
    pub id: i32,
    /// How many entries the table it refers to has.
    pub listed: usize,
}

/// An entry of one of the tables, whose ids [`StackFrameIndex::check`]
/// checks.
struct Entry {
    table: Section,
    /// 1-based, as the tables number their entries.
    id: usize,
}

impl Entry {
    fn new(table: Section, index: usize) -> Self {
        Entry {
            table,
            id: index + 1,
        }
    }

    /// `id`, in this entry's `field`, names one of the `listed` entries it
    /// refers to, or none (0) where `none_ok`.
    fn refers(
        &self,
        field: &'static str,
        id: i32,
        listed: usize,
        none_ok: bool,
    ) -> Result<(), StackFrameError> {
        if (none_ok && id == 0) || (id >= 1 && id as usize <= listed) {
            return Ok(());
        }
        Err(StackFrameError {
            table: self.table,
            entry: self.id,
            field,
            id,
            listed,
        })
    }
}

impl StackFrameIndex {
    pub fn is_empty(&self) -> bool {
        self == &StackFrameIndex::default()
    }

    /// Every id points at an entry (or is 0 where a parent may be none).
    pub fn check(&self) -> Result<(), StackFrameError> {
        let (names, functions) = (self.file_names.len(), self.function_names.len());
        let (locations, frames) = (self.file_locations.len(), self.stack_frames.len());
        for (i, l) in self.file_locations.iter().enumerate() {
            let at = Entry::new(Section::FileLocations, i);
            at.refers("file_name_id", l.file_name_id, names, false)?;
            at.refers("function_name_id", l.function_name_id, functions, false)?;
        }
        for (i, f) in self.stack_frames.iter().enumerate() {
            let at = Entry::new(Section::StackFrames, i);
            at.refers("file_location_id", f.file_location_id, locations, false)?;
            at.refers("parent_frame_id", f.parent_frame_id, frames, true)?;
        }
        Ok(())
    }

    /// The call chain of frame `id`, innermost first, as (file, function,
    /// line, column, end line, end column): what the ids mean, whatever
    /// numbering a writer chose (XLA renumbers the tables as it reads).
    pub fn chain(&self, id: i32) -> Vec<ResolvedLocation> {
        let mut out = Vec::new();
        let mut seen = Vec::new();
        let mut id = id;
        // A frame may name itself as parent (JAX writes outermost frames so).
        while id >= 1 && (id as usize) <= self.stack_frames.len() && !seen.contains(&id) {
            seen.push(id);
            let f = self.stack_frames[id as usize - 1];
            if let Some(l) = self
                .file_locations
                .get((f.file_location_id - 1).max(0) as usize)
            {
                let name = |v: &[String], i: i32| {
                    v.get((i - 1).max(0) as usize).cloned().unwrap_or_default()
                };
                out.push((
                    name(&self.file_names, l.file_name_id),
                    name(&self.function_names, l.function_name_id),
                    l.line,
                    l.column,
                    l.end_line,
                    l.end_column,
                ));
            }
            id = f.parent_frame_id;
        }
        out
    }

    /// Whether `metadata.stack_frame_id` `id` points at a frame (0: none).
    pub fn has_frame(&self, id: i32) -> bool {
        id == 0 || (id >= 1 && id as usize <= self.stack_frames.len())
    }

    /// The tables as XLA prints them, each followed by a blank line;
    /// nothing when there are none.
    pub fn print_into(&self, out: &mut String) {
        if self.is_empty() {
            return;
        }
        let section = |out: &mut String, name: Section, rows: Vec<String>| {
            let _ = writeln!(out, "{name}");
            for (i, r) in rows.iter().enumerate() {
                let _ = writeln!(out, "{} {r}", i + 1);
            }
            out.push('\n');
        };
        let quoted = |v: &[String]| {
            v.iter()
                .map(|s| format!("\"{}\"", crate::util::escape::escape(s)))
                .collect()
        };
        section(out, Section::FileNames, quoted(&self.file_names));
        section(out, Section::FunctionNames, quoted(&self.function_names));
        section(
            out,
            Section::FileLocations,
            self.file_locations
                .iter()
                .map(|l| {
                    format!(
                        "{{file_name_id={} function_name_id={} line={} end_line={} column={} end_column={}}}",
                        l.file_name_id, l.function_name_id, l.line, l.end_line, l.column, l.end_column
                    )
                })
                .collect(),
        );
        section(
            out,
            Section::StackFrames,
            self.stack_frames
                .iter()
                .map(|f| {
                    format!(
                        "{{file_location_id={} parent_frame_id={}}}",
                        f.file_location_id,
                        f.parent_frame_id + 1
                    )
                })
                .collect(),
        );
    }
}
