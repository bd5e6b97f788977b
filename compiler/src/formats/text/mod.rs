//! XLA's HLO text syntax: a printer whose output XLA's parser accepts, and a
//! hand-written parser for what the printer writes and what JAX and torch-xla dump.

mod annotations;
mod attr_values;
mod collective;
mod cursor;
mod described;
mod layout;
mod metadata;
mod nesting;
mod parse_error;
mod parser;
mod positions;
mod printer;
mod sharding;
mod stack_frame_tables;
mod syntax;

// Public for the crate's tests (tests/it/text_positions.rs).
#[doc(hidden)]
pub use nesting::check_nesting;
pub use nesting::MAX_NESTING;
pub use parser::{parse_module, parse_module_noted, ParseError};
pub use positions::{instruction_positions, TextPosition, TextPositions};
pub use printer::{print_computation, print_instruction, print_module};

/// What `m`'s text cannot say, one line each: the constants whose printed
/// value XLA's text reader takes for another (see
/// [`crate::Literal::text_reads_otherwise`]). The proto form keeps them.
pub fn unprintable(m: &crate::Module) -> Vec<String> {
    let mut out = Vec::new();
    for c in &m.computations {
        for id in c.ids() {
            let i = c.instr(id);
            if let crate::Op::Constant(l) = &i.op {
                if l.text_reads_otherwise() {
                    out.push(format!(
                        "constant '{}' in '{}' holds a complex value with a NaN part, which text cannot carry: XLA's text reader copies a NaN real part into the imaginary part and drops an imaginary NaN's payload; the proto form keeps it",
                        i.name, c.name
                    ));
                }
            }
        }
    }
    out
}
