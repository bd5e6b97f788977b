//! Which XLA flags a plugin file defines, read from the file before it is
//! loaded.
//!
//! XLA CPU parses `XLA_FLAGS` when the client is created and aborts the
//! whole process on a name it does not define (`parse_flags_from_env.cc`:
//! "Unknown flag in XLA_FLAGS"). Builds of XLA add and drop flags:
//! `xla_cpu_use_fusion_emitters`, which `scripts/test.sh` sets and the
//! 0.0.1 plugin (PJRT C API 0.81) defines, is gone from the plugin of
//! jaxlib 0.11 (API 0.115), whose compile also refuses it as an option
//! override. The C API has no call that lists a plugin's flags, so they
//! are read from the library itself: XLA registers each flag under its
//! name as a C string literal, which the linker lays out in `.rodata`
//! between NUL bytes. A name found only inside other text (a proto
//! descriptor keeps the names of removed fields) is not a flag.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

/// Why a plugin's flags could not be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PluginFlagsError {
    #[error("cannot read it: {0}")]
    Io(#[source] Arc<std::io::Error>),
    #[error("its ELF section table is malformed: {0}")]
    Elf(&'static str),
    #[error("it has no .rodata section, where XLA keeps its flags' names")]
    NoRodata,
}

impl From<std::io::Error> for PluginFlagsError {
    fn from(e: std::io::Error) -> Self {
        PluginFlagsError::Io(Arc::new(e))
    }
}

/// The plugin's read-only data, to ask for flag names.
pub struct PluginFlags {
    rodata: Vec<u8>,
}

impl PluginFlags {
    /// Reads the `.rodata` section of the 64-bit little-endian ELF file at
    /// `path` (`plugin::check_plugin_file` has checked its header and that
    /// its section table lies inside it).
    pub fn read(path: &Path) -> Result<PluginFlags, PluginFlagsError> {
        let mut file = std::fs::File::open(path)?;
        let mut header = [0u8; 64];
        file.read_exact(&mut header)?;
        let table_offset = u64_at(&header, 0x28);
        let entry_size = u64::from(u16_at(&header, 0x3A));
        let count = u64::from(u16_at(&header, 0x3C));
        let names_index = u64::from(u16_at(&header, 0x3E));
        if entry_size < 64 || names_index >= count {
            return Err(PluginFlagsError::Elf("no section-name table"));
        }
        let table_len = usize::try_from(entry_size * count)
            .map_err(|_| PluginFlagsError::Elf("section table too large"))?;
        let mut table = vec![0u8; table_len];
        file.seek(SeekFrom::Start(table_offset))?;
        file.read_exact(&mut table)?;
        let section = |i: u64| {
            let at = (i * entry_size) as usize;
            Section {
                name: u32::from_le_bytes([table[at], table[at + 1], table[at + 2], table[at + 3]]),
                offset: u64_at(&table[at..], 0x18),
                size: u64_at(&table[at..], 0x20),
            }
        };
        let names = read_section(&mut file, section(names_index))?;
        let rodata = (0..count)
            .map(section)
            .find(|s| {
                names
                    .get(s.name as usize..)
                    .is_some_and(|rest| rest.starts_with(b".rodata\0"))
            })
            .ok_or(PluginFlagsError::NoRodata)?;
        Ok(PluginFlags {
            rodata: read_section(&mut file, rodata)?,
        })
    }

    /// Whether the plugin defines the XLA flag `name` (without dashes).
    pub fn defines(&self, name: &str) -> bool {
        let mut needle = Vec::with_capacity(name.len() + 2);
        needle.push(0);
        needle.extend_from_slice(name.as_bytes());
        needle.push(0);
        memchr::memmem::find(&self.rodata, &needle).is_some()
    }
}

struct Section {
    name: u32,
    offset: u64,
    size: u64,
}

fn read_section(file: &mut std::fs::File, s: Section) -> Result<Vec<u8>, PluginFlagsError> {
    let len = file.metadata()?.len();
    if !matches!(s.offset.checked_add(s.size), Some(end) if end <= len) {
        return Err(PluginFlagsError::Elf(
            "a section runs past the end of the file",
        ));
    }
    let mut bytes = vec![0u8; s.size as usize];
    file.seek(SeekFrom::Start(s.offset))?;
    file.read_exact(&mut bytes)?;
    Ok(bytes)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}
