//! The HLO text grammar, read by hand into a typed syntax tree
//! ([`tree`]: one type per production) that [`super::parser`] turns into
//! a module. A generated PEG parser spent three quarters of the parse time
//! in its own machinery; this one reads bytes once, with backtracking only
//! where the grammar chooses.
//!
//! The grammar, in PEG form; each rule is a method of the reader in the
//! file of its level (`module`, `instruction`, `shape`, `literal`,
//! `value`, `token`). Between the items of a rule, whitespace and `/* */`
//! or `//` comments are skipped, except in the rules marked *atomic* (no
//! skipping; read as one token) and *compound* (no skipping; its parts
//! kept):
//!
//! ```text
//! module         = "HloModule" name ("," module_attr)* computation+ EOI
//! module_attr    = alias_attr | donor_attr | layout_attr | attribute
//! alias_attr     = "input_output_alias" "=" "{" (alias_entry ("," alias_entry)*)? "}"
//! alias_entry    = shape_index ":" "(" int "," shape_index ("," alias_kind)? ")"
//! alias_kind     = "may-alias" | "must-alias"                      (atomic)
//! donor_attr     = "buffer_donor" "=" "{" (donor_entry ("," donor_entry)*)? "}"
//! donor_entry    = "(" int "," shape_index ")"
//! shape_index    = "{" (int ("," int)*)? "}"
//! layout_attr    = "entry_computation_layout" "=" "{" program_shape "}"
//! program_shape  = "(" (shape ("," shape)*)? ")" "->" shape
//! computation    = entry_kw? name signature? "{" instruction* "}"
//! entry_kw       = "ENTRY" !name_char                              (atomic)
//! signature      = "(" (sig_param ("," sig_param)*)? ")" "->" shape
//! sig_param      = name ":" shape
//! instruction    = root_kw? name "=" shape? body ("," attribute)*
//! root_kw        = "ROOT" !name_char                               (atomic)
//! body           = constant_body | parameter_body | op_body
//! constant_body  = "constant" "(" (elided | literal) ")"
//! elided         = "{" "..." "}"
//! parameter_body = "parameter" "(" int ")"
//! op_body        = opcode "(" (operand ("," operand)*)? ")"
//! operand        = shape? (&(name_char+ "(") body | name)
//! opcode         = ALPHA (ALNUM | "-" | "_")*                      (atomic)
//! literal        = scalar_pair | tuple_literal | literal_list | scalar
//! scalar_pair    = "(" scalar "," scalar ")"   (a complex value, or a tuple of two)
//! tuple_literal  = "(" (literal ("," literal)*)? ")"
//! literal_list   = "{" (literal (("," | &"{") literal)*)? ","? "}"
//! scalar         = "true" | "false" | "-"? ("inf" | "nan" ("(0x" HEX+ ")")?) | number  (atomic)
//! shape          = tuple_shape | buffer_shape | array_shape
//! tuple_shape    = "(" (shape ("," shape)*)? ")"
//! buffer_shape   = "b(" shape ")"
//! array_shape    = elem_type " "* "[" dims "]" (" "* layout)?      (compound)
//! elem_type      = LOWER ALNUM*                                    (atomic)
//! dims           = (" "* dim (" "* "," " "* dim)*)? " "*           (atomic)
//! dim            = int | "<=" int | "?"
//! layout         = "{" (" "* int (" "* "," " "* int)*)? " "* (":" tail)? "}"  (atomic;
//!                  the tail is any text with balanced parentheses up to the "}")
//! attribute      = attr_name "=" attr_value
//! attr_name      = (ALPHA | "_") name_char*                        (atomic)
//! attr_value     = string | arrow_value | padding | slice_list | int_list | kv_map
//!                | word_list | shape_list | number | raw_value | mesh_groups
//!                | shaped_literal | word
//! shaped_literal = shape (" "* literal)?
//! string         = "\"" string_inner "\""                          (compound)
//! string_inner   = ("\\" ANY | !("\"" | "\\") ANY)*                (atomic)
//! arrow_value    = (!"->" (name_char | "?"))+ "->" (name_char | "?")+   (atomic)
//! padding        = pad ("x" pad)* !name_char, pad = int "_" int ("_" int)?  (atomic)
//! slice_list     = "{" slice ("," slice)* "}"
//! slice          = "[" int ":" int (":" int)? "]"
//! int_list       = "{" (int ("," int)*)? "}"             (atomic, whitespace allowed)
//! kv_map         = "{" kv (","? kv)* "}"
//! kv             = attr_name "=" (string | number | word | raw_value)
//! word_list      = "{" word ("," word)* "}"
//! shape_list     = "{" shape ("," shape)* "}"
//! raw_value      = group | iota                                     (atomic)
//!   group        = "{" (group | "\"" string_inner "\"" | !("{" | "}" | "\"") ANY)* "}"
//!   iota         = "[" (!"]" ANY)* "]" "<=" "[" (!"]" ANY)* "]" ("T(" (!")" ANY)* ")")?
//! mesh_groups    = "mesh[" (!"]" ANY)* "]" ("," " "* "device_ids=" parens)? " "* group  (atomic)
//! word, name     = "%"? (ALPHA | "_") name_char*                   (atomic)
//! name_char      = ALNUM | "_" | "." | "-"
//! int            = "-"? DIGIT+                                     (atomic)
//! number         = "-"? (DIGIT+ ("." DIGIT*)? | "." DIGIT+) (("e" | "E") ("+" | "-")? DIGIT+)?  (atomic)
//! ```
//!
//! Values the grammar takes whole (shardings, windows, replica groups, JSON
//! backend configs, layout tails) are read by the parser, so an attribute
//! hlatc does not model is refused by its name, never reported as a syntax
//! error inside it.

mod instruction;
mod literal;
mod module;
mod reader;
mod shape;
mod span;
mod token;
mod tree;
mod value;

use reader::{Expect, Reader};
pub(crate) use span::{char_floor, line_col, Int, Name, Span};
pub(crate) use tree::*;

/// A syntax error at a byte offset, with what would have been accepted.
pub(crate) struct SyntaxError {
    pub offset: usize,
    pub expected: Vec<String>,
}

/// Reads `input` as a module. On failure, the input is read again with
/// expectations recorded (which costs time a successful read should not
/// pay), and the error is at the furthest byte any rule reached. The
/// input is taken by a reference to it, which every span keeps: a thin
/// one, so a span is three words rather than four.
pub(crate) fn parse<'i>(input: &'i &'i str) -> Result<Module<'i>, SyntaxError> {
    if let Some(m) = Reader::new(input, false).module() {
        return Ok(m);
    }
    let mut r = Reader::new(input, true);
    // The second reading is the first's, recording as it goes.
    if let Some(m) = r.module() {
        return Ok(m);
    }
    let mut expected: Vec<String> = r
        .expected
        .iter()
        .map(|e| match e {
            Expect::Token(t) => format!("`{t}`"),
            Expect::Label(l) => l.to_string(),
        })
        .collect();
    expected.sort();
    expected.dedup();
    Err(SyntaxError {
        offset: r.furthest,
        expected,
    })
}
