//! XLA's HLO text syntax: a printer whose output XLA's parser accepts, and a
//! hand-written parser for what the printer writes and what JAX and torch-xla dump.

mod collective;
mod cursor;
mod escape;
mod layout;
mod nesting;
mod parser;
mod printer;
mod sharding;
mod stack_frame_tables;
mod syntax;

pub use escape::{escape, unescape};
pub use nesting::MAX_NESTING;
pub use parser::{parse_module, parse_module_noted, ParseError};
pub use printer::{print_computation, print_instruction, print_module};
