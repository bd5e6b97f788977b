//! The HLO text grammar, read by hand into a flat syntax tree that
//! [`super::parser`] turns into a module. A generated PEG parser spent
//! three quarters of the parse time in its own machinery; this one reads
//! bytes once, with backtracking only where the grammar chooses.
//!
//! The grammar, in PEG form. Between the items of a rule, whitespace and
//! `/* */` or `//` comments are skipped, except in the rules marked
//! *atomic* (no skipping; no inner nodes) and *compound* (no skipping;
//! inner nodes kept):
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
//! literal        = literal_list | scalar
//! literal_list   = "{" (literal ("," literal)*)? ","? "}"
//! scalar         = "true" | "false" | "-"? ("inf" | "nan" ("(0x" HEX+ ")")?) | number  (atomic)
//! shape          = tuple_shape | array_shape
//! tuple_shape    = "(" (shape ("," shape)*)? ")"
//! array_shape    = elem_type "[" dims "]" layout?                  (compound)
//! elem_type      = LOWER ALNUM*                                    (atomic)
//! dims           = (" "* int (" "* "," " "* int)*)? " "*           (atomic)
//! layout         = "{" (" "* int (" "* "," " "* int)*)? " "* (":" tail)? "}"  (atomic;
//!                  the tail is any text with balanced parentheses up to the "}")
//! attribute      = attr_name "=" attr_value
//! attr_name      = (ALPHA | "_") name_char*                        (atomic)
//! attr_value     = string | arrow_value | padding | slice_list | int_list | kv_map
//!                | word_list | shape_list | number | raw_value | mesh_groups | shape | word
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

/// The nodes of the syntax tree, one per grammar rule that keeps one.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    module,
    alias_attr,
    alias_entry,
    alias_kind,
    donor_attr,
    donor_entry,
    shape_index,
    layout_attr,
    program_shape,
    computation,
    entry_kw,
    signature,
    sig_param,
    instruction,
    root_kw,
    constant_body,
    elided,
    parameter_body,
    op_body,
    operand,
    opcode,
    literal,
    literal_list,
    /// `(re, im)`: one element of a c64 or c128 literal, or a tuple
    /// constant of two scalars; each part is a `literal` holding a scalar.
    complex_scalar,
    /// `(a, b, ...)`: a tuple constant's elements, each a `literal`.
    tuple_literal,
    scalar,
    shape,
    tuple_shape,
    /// `b(f32[16])`: an array held as a buffer.
    buffer_shape,
    array_shape,
    elem_type,
    dims,
    layout,
    attribute,
    attr_name,
    string,
    string_inner,
    arrow_value,
    padding,
    slice_list,
    slice,
    int_list,
    kv_map,
    kv,
    word_list,
    shape_list,
    /// A shape as an attribute value, with its value where one is written
    /// (`s32[2]{0} {1, 2}`: a custom call's `literal=`).
    shaped_literal,
    number,
    raw_value,
    word,
    name,
    int,
}

/// What a syntax error says was expected, for the rules a user would
/// recognize; the others leave the expectations of what they tried.
fn label(rule: Rule) -> Option<&'static str> {
    Some(match rule {
        Rule::computation => "a computation",
        Rule::instruction => "an instruction",
        Rule::name => "a name",
        Rule::shape => "a shape such as f32[2,3]",
        Rule::elem_type => "an element type",
        Rule::int => "an integer",
        Rule::opcode => "an opcode",
        Rule::operand => "an operand",
        Rule::literal => "a literal value",
        Rule::attribute => "an attribute (key=value)",
        Rule::attr_name => "an attribute name",
        Rule::string => "a quoted string",
        Rule::number => "a number",
        Rule::word => "a word",
        Rule::root_kw => "`ROOT`",
        Rule::entry_kw => "`ENTRY`",
        Rule::signature => "a signature",
        Rule::alias_entry => "an alias entry such as {0}: (0, {})",
        Rule::program_shape => "a program shape (params)->result",
        Rule::shape_index => "a shape index such as {0}",
        Rule::alias_kind => "`may-alias` or `must-alias`",
        _ => return None,
    })
}

/// A syntax error at a byte offset, with what would have been accepted.
pub(crate) struct SyntaxError {
    pub offset: usize,
    pub expected: Vec<String>,
}

struct Node {
    rule: Rule,
    start: usize,
    end: usize,
    /// The index just past this node's subtree: its next sibling, if any.
    after: usize,
}

/// A parsed text: nodes in preorder, each spanning its text.
pub(crate) struct Tree<'i> {
    input: &'i str,
    nodes: Vec<Node>,
}

/// A node of a [`Tree`], with its text and children.
#[derive(Clone, Copy)]
pub(crate) struct Pair<'i> {
    tree: &'i Tree<'i>,
    at: usize,
}

/// The children of a node, in order.
pub(crate) struct Pairs<'i> {
    tree: &'i Tree<'i>,
    next: usize,
    end: usize,
}

impl<'i> Tree<'i> {
    /// The module node.
    pub(crate) fn root(&'i self) -> Pair<'i> {
        Pair { tree: self, at: 0 }
    }
}

impl<'i> Pair<'i> {
    fn node(&self) -> &'i Node {
        &self.tree.nodes[self.at]
    }

    pub(crate) fn as_rule(&self) -> Rule {
        self.node().rule
    }

    pub(crate) fn as_str(&self) -> &'i str {
        let n = self.node();
        &self.tree.input[n.start..n.end]
    }

    pub(crate) fn into_inner(self) -> Pairs<'i> {
        Pairs {
            tree: self.tree,
            next: self.at + 1,
            end: self.node().after,
        }
    }

    /// 1-based line and column (in characters) of where the node starts.
    pub(crate) fn line_col(&self) -> (usize, usize) {
        self.line_col_at(0)
    }

    /// [`Pair::line_col`] of the byte `offset` bytes into the node (kept
    /// inside the text).
    pub(crate) fn line_col_at(&self, offset: usize) -> (usize, usize) {
        line_col(self.tree.input, self.node().start + offset)
    }
}

/// 1-based line and column (in characters) of byte `at` of `input` (or
/// of the character it falls in).
pub(crate) fn line_col(input: &str, at: usize) -> (usize, usize) {
    let before = &input[..char_floor(input, at)];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

impl<'i> Iterator for Pairs<'i> {
    type Item = Pair<'i>;

    fn next(&mut self) -> Option<Pair<'i>> {
        let p = self.peek()?;
        self.next = p.node().after;
        Some(p)
    }
}

impl<'i> Pairs<'i> {
    pub(crate) fn peek(&self) -> Option<Pair<'i>> {
        (self.next < self.end).then_some(Pair {
            tree: self.tree,
            at: self.next,
        })
    }
}

/// Reads `input` as a module. On failure, the input is read again with
/// expectations recorded (which costs time a successful read should not
/// pay), and the error is at the furthest byte any rule reached.
pub(crate) fn parse(input: &str) -> Result<Tree<'_>, SyntaxError> {
    let mut r = Reader::new(input, false);
    if r.module() {
        return Ok(Tree {
            input,
            nodes: r.nodes,
        });
    }
    let mut r = Reader::new(input, true);
    let parsed = r.module();
    debug_assert!(!parsed, "the second reading agrees with the first");
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

enum Expect {
    Token(&'static str),
    Label(&'static str),
}

struct Reader<'i> {
    s: &'i [u8],
    pos: usize,
    nodes: Vec<Node>,
    track: bool,
    furthest: usize,
    expected: Vec<Expect>,
}

type Item<'i> = fn(&mut Reader<'i>) -> bool;

fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

impl<'i> Reader<'i> {
    fn new(input: &'i str, track: bool) -> Self {
        Reader {
            s: input.as_bytes(),
            pos: 0,
            // About one node per four bytes of a typical dump.
            nodes: Vec::with_capacity(input.len() / 4),
            track,
            furthest: 0,
            expected: Vec::new(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn peek_is(&self, f: impl Fn(u8) -> bool) -> bool {
        self.peek().is_some_and(f)
    }

    fn expect(&mut self, e: Expect) {
        if !self.track {
            return;
        }
        if self.pos > self.furthest {
            self.furthest = self.pos;
            self.expected.clear();
        }
        if self.pos == self.furthest {
            self.expected.push(e);
        }
    }

    /// Whitespace and comments, between the items of a rule.
    fn skip(&mut self) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\r' | b'\n') => self.pos += 1,
                Some(b'/') if self.s.get(self.pos + 1) == Some(&b'*') => {
                    match find(&self.s[self.pos + 2..], b"*/") {
                        Some(i) => self.pos += 2 + i + 2,
                        // An unclosed comment is no comment: the `/` is
                        // then what the grammar finds.
                        None => return,
                    }
                }
                Some(b'/') if self.s.get(self.pos + 1) == Some(&b'/') => {
                    self.pos = match self.s[self.pos..].iter().position(|&b| b == b'\n') {
                        Some(i) => self.pos + i,
                        None => self.s.len(),
                    };
                }
                _ => return,
            }
        }
    }

    /// Eats `t` if it comes next, without recording it as expected.
    fn eat(&mut self, t: &str) -> bool {
        if self.s[self.pos..].starts_with(t.as_bytes()) {
            self.pos += t.len();
            true
        } else {
            false
        }
    }

    fn eat_byte(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// `t`, recorded as expected when it does not come next.
    fn lit(&mut self, t: &'static str) -> bool {
        self.eat(t) || {
            self.expect(Expect::Token(t));
            false
        }
    }

    /// Whitespace, then `t`.
    fn then(&mut self, t: &'static str) -> bool {
        self.skip();
        self.lit(t)
    }

    /// Whitespace, then `item`.
    fn then_item(&mut self, item: Item<'i>) -> bool {
        self.skip();
        item(self)
    }

    fn eat_while(&mut self, f: impl Fn(u8) -> bool) -> usize {
        let start = self.pos;
        while self.peek_is(&f) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// `f`, undone (position and nodes) when it fails.
    fn attempt(&mut self, f: impl FnOnce(&mut Self) -> bool) -> bool {
        let (pos, nodes) = (self.pos, self.nodes.len());
        f(self) || {
            self.pos = pos;
            self.nodes.truncate(nodes);
            false
        }
    }

    /// The first of `items` that reads.
    fn choice(&mut self, items: &[Item<'i>]) -> bool {
        items.iter().any(|item| item(self))
    }

    /// `f` as a node of `rule`, labelled as [`label`] says.
    fn rule(&mut self, rule: Rule, f: impl FnOnce(&mut Self) -> bool) -> bool {
        let at = self.nodes.len();
        self.nodes.push(Node {
            rule,
            start: self.pos,
            end: self.pos,
            after: at + 1,
        });
        let ok = self.labelled(label(rule), f);
        if ok {
            let after = self.nodes.len();
            let node = &mut self.nodes[at];
            node.end = self.pos;
            node.after = after;
        } else {
            self.nodes.truncate(at);
        }
        ok
    }

    /// `f`, undone when it fails. When it fails without getting past its
    /// start, `label` (if any) stands for whatever `f` tried there.
    fn labelled(&mut self, label: Option<&'static str>, f: impl FnOnce(&mut Self) -> bool) -> bool {
        let (start, nodes) = (self.pos, self.nodes.len());
        let before = (self.furthest, self.expected.len());
        if f(self) {
            return true;
        }
        self.pos = start;
        self.nodes.truncate(nodes);
        if let (true, Some(l)) = (self.track && self.furthest <= start, label) {
            // Expectations at `start` recorded inside give way to the label.
            if before.0 == start {
                self.expected.truncate(before.1);
            } else {
                self.expected.clear();
            }
            self.expect(Expect::Label(l));
        }
        false
    }

    /// An atomic rule: `f` reads bytes, and a failure is the rule's.
    fn atomic(&mut self, rule: Rule, f: impl FnOnce(&mut Self) -> bool) -> bool {
        let quiet = std::mem::replace(&mut self.track, false);
        let ok = self.rule(rule, f);
        self.track = quiet;
        if !ok {
            if let Some(l) = label(rule) {
                self.expect(Expect::Label(l));
            }
        }
        ok
    }

    /// `(item ("," item)*)?`, then whatever follows is read after
    /// whitespace.
    fn list(&mut self, item: Item<'i>) -> bool {
        self.skip();
        if !self.attempt(item) {
            return true;
        }
        while self.attempt(|r| r.then(",") && r.then_item(item)) {}
        true
    }

    /// `item ("," item)*`.
    fn list1(&mut self, item: Item<'i>) -> bool {
        self.skip();
        if !item(self) {
            return false;
        }
        while self.attempt(|r| r.then(",") && r.then_item(item)) {}
        true
    }

    /// `"{" item ("," item)* "}"`.
    fn braced1(&mut self, item: Item<'i>) -> bool {
        self.lit("{") && self.list1(item) && self.then("}")
    }

    fn module(&mut self) -> bool {
        self.nodes.push(Node {
            rule: Rule::module,
            start: 0,
            end: 0,
            after: 1,
        });
        self.skip();
        let ok = self.lit("HloModule")
            && self.then_item(Self::name)
            && {
                // Older dumps end the name with a colon (`HloModule m:`),
                // which XLA's lexer takes as part of a name token.
                self.eat_byte(b':');
                while self.attempt(|r| r.then(",") && r.then_item(Self::module_attr)) {}
                true
            }
            && self.then_item(Self::computation)
            && {
                while self.attempt(|r| r.then_item(Self::computation)) {}
                self.skip();
                self.pos == self.s.len() || {
                    self.expect(Expect::Label("end of input"));
                    false
                }
            };
        let after = self.nodes.len();
        self.nodes[0].end = self.pos;
        self.nodes[0].after = after;
        ok
    }

    fn module_attr(&mut self) -> bool {
        self.choice(&[
            Self::alias_attr,
            Self::donor_attr,
            Self::layout_attr,
            Self::attribute,
        ])
    }

    fn alias_attr(&mut self) -> bool {
        self.rule(Rule::alias_attr, |r| {
            r.braced_list_attr("input_output_alias", Self::alias_entry)
        })
    }

    /// `key = { (item ("," item)*)? }`: the module's alias and donor lists.
    fn braced_list_attr(&mut self, key: &'static str, item: Item<'i>) -> bool {
        self.lit(key) && self.then("=") && self.then("{") && self.list(item) && self.then("}")
    }

    fn alias_entry(&mut self) -> bool {
        self.rule(Rule::alias_entry, |r| {
            r.shape_index()
                && r.then(":")
                && r.then("(")
                && r.then_item(Self::int)
                && r.then(",")
                && r.then_item(Self::shape_index)
                && {
                    r.attempt(|r| r.then(",") && r.then_item(Self::alias_kind));
                    r.then(")")
                }
        })
    }

    fn alias_kind(&mut self) -> bool {
        self.atomic(Rule::alias_kind, |r| {
            r.eat("may-alias") || r.eat("must-alias")
        })
    }

    fn donor_attr(&mut self) -> bool {
        self.rule(Rule::donor_attr, |r| {
            r.braced_list_attr("buffer_donor", Self::donor_entry)
        })
    }

    fn donor_entry(&mut self) -> bool {
        self.rule(Rule::donor_entry, |r| {
            r.lit("(")
                && r.then_item(Self::int)
                && r.then(",")
                && r.then_item(Self::shape_index)
                && r.then(")")
        })
    }

    fn shape_index(&mut self) -> bool {
        self.rule(Rule::shape_index, |r| {
            r.lit("{") && r.list(Self::int) && r.then("}")
        })
    }

    fn layout_attr(&mut self) -> bool {
        self.rule(Rule::layout_attr, |r| {
            r.lit("entry_computation_layout")
                && r.then("=")
                && r.then("{")
                && r.then_item(Self::program_shape)
                && r.then("}")
        })
    }

    fn program_shape(&mut self) -> bool {
        self.rule(Rule::program_shape, |r| r.arrow(Self::shape))
    }

    /// `"(" (param ("," param)*)? ")" "->" shape`: a program shape, or a
    /// computation's signature.
    fn arrow(&mut self, param: Item<'i>) -> bool {
        self.lit("(")
            && self.list(param)
            && self.then(")")
            && self.then("->")
            && self.then_item(Self::shape)
    }

    fn computation(&mut self) -> bool {
        self.rule(Rule::computation, |r| {
            if r.entry_kw() {
                r.skip();
            }
            r.name()
                && {
                    r.attempt(|r| r.then_item(Self::signature));
                    r.then("{")
                }
                && {
                    while r.attempt(|r| r.then_item(Self::instruction)) {}
                    r.then("}")
                }
                && {
                    // `}, execution_thread="host"`, read as an attribute.
                    while r.attempt(|r| r.then(",") && r.then_item(Self::attribute)) {}
                    true
                }
        })
    }

    fn keyword(&mut self, rule: Rule, word: &'static str) -> bool {
        self.atomic(rule, |r| r.eat(word) && !r.peek_is(is_name_char))
    }

    fn entry_kw(&mut self) -> bool {
        self.keyword(Rule::entry_kw, "ENTRY")
    }

    fn root_kw(&mut self) -> bool {
        self.keyword(Rule::root_kw, "ROOT")
    }

    fn signature(&mut self) -> bool {
        self.rule(Rule::signature, |r| r.arrow(Self::sig_param))
    }

    fn sig_param(&mut self) -> bool {
        self.rule(Rule::sig_param, |r| {
            r.name() && r.then(":") && r.then_item(Self::shape)
        })
    }

    fn instruction(&mut self) -> bool {
        self.rule(Rule::instruction, |r| {
            if r.root_kw() {
                r.skip();
            }
            r.name()
                && r.then("=")
                && {
                    r.attempt(|r| r.then_item(Self::shape));
                    r.skip();
                    r.choice(&[Self::constant_body, Self::parameter_body, Self::op_body])
                }
                && {
                    while r.attempt(|r| r.then(",") && r.then_item(Self::attribute)) {}
                    true
                }
        })
    }

    fn constant_body(&mut self) -> bool {
        self.rule(Rule::constant_body, |r| {
            r.lit("constant")
                && r.then("(")
                && r.then_item(|r| r.choice(&[Self::elided, Self::literal]))
                && r.then(")")
        })
    }

    fn elided(&mut self) -> bool {
        self.rule(Rule::elided, |r| r.lit("{") && r.then("...") && r.then("}"))
    }

    fn parameter_body(&mut self) -> bool {
        self.rule(Rule::parameter_body, |r| {
            r.lit("parameter") && r.then("(") && r.then_item(Self::int) && r.then(")")
        })
    }

    fn op_body(&mut self) -> bool {
        self.rule(Rule::op_body, |r| {
            r.opcode() && r.then("(") && r.list(Self::operand) && r.then(")")
        })
    }

    /// An operand: a name, or an instruction written in its place, without
    /// a name or attributes (`add(f32[10] parameter(0), multiply(p, q))`),
    /// as XLA's parser reads it. A word followed by `(` is the latter; the
    /// look-ahead keeps the common case, a name, from being read twice.
    fn operand(&mut self) -> bool {
        self.rule(Rule::operand, |r| {
            if r.attempt(Self::shape) {
                r.skip();
            }
            if r.at_call() {
                r.choice(&[Self::constant_body, Self::parameter_body, Self::op_body])
            } else {
                r.name()
            }
        })
    }

    /// Whether a word (name characters) and then `(` come next.
    fn at_call(&self) -> bool {
        let rest = &self.s[self.pos..];
        let word = rest.iter().take_while(|&&b| is_name_char(b)).count();
        word > 0 && rest.get(word) == Some(&b'(')
    }

    fn opcode(&mut self) -> bool {
        self.atomic(Rule::opcode, |r| {
            r.peek_is(|b| b.is_ascii_alphabetic()) && {
                r.eat_while(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
                true
            }
        })
    }

    fn literal(&mut self) -> bool {
        self.rule(Rule::literal, |r| {
            // Large constants have millions of elements: the first byte
            // picks the one form that can match, instead of trying each.
            if r.peek_is(|b| b == b'(') {
                r.choice(&[Self::complex_scalar, Self::tuple_literal])
            } else {
                r.choice(&[Self::literal_list, Self::scalar])
            }
        })
    }

    fn complex_scalar(&mut self) -> bool {
        self.rule(Rule::complex_scalar, |r| {
            r.lit("(")
                && r.then_item(Self::scalar_literal)
                && r.then(",")
                && r.then_item(Self::scalar_literal)
                && r.then(")")
        })
    }

    /// A scalar as a `literal` node, so a pair of them reads either as a
    /// complex value's parts or as a tuple constant's elements.
    fn scalar_literal(&mut self) -> bool {
        self.rule(Rule::literal, Self::scalar)
    }

    fn tuple_literal(&mut self) -> bool {
        self.rule(Rule::tuple_literal, |r| {
            r.lit("(") && r.list(Self::literal) && r.then(")")
        })
    }

    /// `{a, b, ...}`. XLA's reader also takes nested lists one after
    /// another without a comma (`{ {1} {2} }`), as some of its tests write
    /// them.
    fn literal_list(&mut self) -> bool {
        self.rule(Rule::literal_list, |r| {
            r.lit("{") && {
                r.skip();
                if r.attempt(Self::literal) {
                    while r.attempt(|r| {
                        (r.then(",") || {
                            r.skip();
                            r.peek() == Some(b'{')
                        }) && r.then_item(Self::literal)
                    }) {}
                }
                r.attempt(|r| r.then(","));
                r.then("}")
            }
        })
    }

    fn scalar(&mut self) -> bool {
        self.atomic(Rule::scalar, |r| {
            r.eat("true")
                || r.eat("false")
                || r.attempt(|r| {
                    r.eat_byte(b'-');
                    r.eat("inf")
                        || r.eat("nan") && {
                            r.attempt(|r| {
                                r.eat("(0x")
                                    && r.eat_while(|b| b.is_ascii_hexdigit()) > 0
                                    && r.eat_byte(b')')
                            });
                            true
                        }
                })
                || r.number_text()
        })
    }

    fn shape(&mut self) -> bool {
        self.rule(Rule::shape, |r| {
            // The first bytes pick the one form that can match: shapes are
            // read for every instruction and operand.
            if r.peek() == Some(b'(') {
                r.tuple_shape()
            } else if r.peek() == Some(b'b') && r.s.get(r.pos + 1) == Some(&b'(') {
                r.buffer_shape()
            } else {
                r.array_shape()
            }
        })
    }

    fn tuple_shape(&mut self) -> bool {
        self.rule(Rule::tuple_shape, |r| {
            r.lit("(") && r.list(Self::shape) && r.then(")")
        })
    }

    fn buffer_shape(&mut self) -> bool {
        self.rule(Rule::buffer_shape, |r| {
            r.lit("b(") && r.then_item(Self::shape) && r.then(")")
        })
    }

    fn array_shape(&mut self) -> bool {
        self.rule(Rule::array_shape, |r| {
            // XLA's lexer takes `s32 [4]` too: spaces between tokens. The
            // `[` is expected right after the type only, so an error after
            // a name and a line break does not list it.
            r.elem_type()
                && (r.lit("[")
                    || r.peek_is(|b| b.is_ascii_whitespace())
                        && r.attempt(|r| {
                            r.skip();
                            r.eat("[")
                        }))
                && r.dims()
                && (r.eat_byte(b']') || {
                    r.dims_refused();
                    false
                })
                && {
                    // XLA's lexer lets spaces stand before a layout
                    // (`f32[3,6] {1,0}`); a computation's `{` after its
                    // result shape is no layout, and the attempt fails.
                    if r.peek() == Some(b'{') {
                        r.attempt(Self::layout);
                    } else if r.peek() == Some(b' ') {
                        r.attempt(|r| {
                            r.eat_while(|b| b == b' ');
                            r.peek() == Some(b'{') && r.layout()
                        });
                    }
                    true
                }
        })
    }

    /// Where the dims of an array shape stop short of their `]`: a bound
    /// on an unbounded dimension (`<=?`) is named as one.
    fn dims_refused(&mut self) {
        if !self.track {
            return;
        }
        let mut at = self.pos;
        if self.s.get(at) == Some(&b',') {
            at += 1;
            while self.s.get(at) == Some(&b' ') {
                at += 1;
            }
        }
        let rest = &self.s[at..];
        if rest.starts_with(b"<=?") {
            let pos = std::mem::replace(&mut self.pos, at);
            self.expect(Expect::Label(
                "a dimension, a bound such as <=8, or ? for an unbounded dimension (which has no bound)",
            ));
            self.pos = pos;
        } else {
            self.expect(Expect::Token(","));
            self.expect(Expect::Token("]"));
        }
    }

    fn elem_type(&mut self) -> bool {
        self.atomic(Rule::elem_type, |r| {
            r.peek_is(|b| b.is_ascii_lowercase()) && {
                r.eat_while(|b| b.is_ascii_alphanumeric());
                true
            }
        })
    }

    /// `int (sep int)*` with `sep` a comma between runs of `space`,
    /// optional as a whole, then `space`: the lists of dims and layouts.
    fn int_run(&mut self, space: impl Fn(u8) -> bool + Copy) {
        self.eat_while(space);
        if self.int_text() {
            while self.attempt(|r| {
                r.eat_while(space);
                r.eat_byte(b',') && {
                    r.eat_while(space);
                    r.int_text()
                }
            }) {}
        }
        self.eat_while(space);
    }

    /// Like `int_run`, where each dimension may be a bound (`<=8`).
    fn dims(&mut self) -> bool {
        self.atomic(Rule::dims, |r| {
            r.eat_while(|b| b == b' ');
            if r.dim_text() {
                while r.attempt(|r| {
                    r.eat_while(|b| b == b' ');
                    r.eat_byte(b',') && {
                        r.eat_while(|b| b == b' ');
                        r.dim_text()
                    }
                }) {}
            }
            r.eat_while(|b| b == b' ');
            true
        })
    }

    #[inline(always)]
    /// A dimension: `8`, a bound `<=8`, or unbounded `?`.
    fn dim_text(&mut self) -> bool {
        match self.peek() {
            Some(b'<') => self.attempt(|r| r.eat("<=") && r.int_text()),
            Some(b'?') => self.eat_byte(b'?'),
            _ => self.int_text(),
        }
    }

    fn layout(&mut self) -> bool {
        self.atomic(Rule::layout, |r| {
            r.eat_byte(b'{') && {
                r.int_run(|b| b == b' ');
                if r.eat_byte(b':') {
                    r.layout_tail();
                }
                r.eat_byte(b'}')
            }
        })
    }

    /// Any text with balanced parentheses, up to a `}` outside them.
    fn layout_tail(&mut self) {
        loop {
            match self.peek() {
                Some(b'(') => {
                    if !self.attempt(Self::paren_group) {
                        return;
                    }
                }
                Some(b'}' | b')') | None => return,
                Some(_) => self.pos += 1,
            }
        }
    }

    fn paren_group(&mut self) -> bool {
        self.eat_byte(b'(') && {
            loop {
                match self.peek() {
                    Some(b'(') => {
                        if !self.attempt(Self::paren_group) {
                            break;
                        }
                    }
                    Some(b')') | None => break,
                    Some(_) => self.pos += 1,
                }
            }
            self.eat_byte(b')')
        }
    }

    fn attribute(&mut self) -> bool {
        self.rule(Rule::attribute, |r| {
            r.attr_name()
                && r.then("=")
                && r.then_item(|r| {
                    r.labelled(Some("an attribute value"), |r| {
                        r.choice(&[
                            Self::string,
                            Self::arrow_value,
                            Self::padding,
                            Self::slice_list,
                            Self::int_list,
                            Self::kv_map,
                            Self::word_list,
                            Self::shape_list,
                            Self::number,
                            Self::raw_value,
                            Self::mesh_groups,
                            Self::shaped_literal,
                            Self::word,
                        ])
                    })
                })
        })
    }

    fn attr_name(&mut self) -> bool {
        self.atomic(Rule::attr_name, |r| {
            r.peek_is(|b| b.is_ascii_alphabetic() || b == b'_') && {
                r.eat_while(is_name_char);
                true
            }
        })
    }

    fn string(&mut self) -> bool {
        self.rule(Rule::string, |r| {
            r.lit("\"") && r.string_inner() && r.eat_byte(b'"')
        })
    }

    fn string_inner(&mut self) -> bool {
        self.atomic(Rule::string_inner, |r| {
            r.string_text();
            true
        })
    }

    /// The text of a string up to its closing quote, escapes included.
    fn string_text(&mut self) {
        while let Some(b) = self.peek() {
            match b {
                b'"' => return,
                b'\\' => {
                    self.pos += 1;
                    self.any_char();
                }
                _ => self.pos += 1,
            }
        }
    }

    /// One character, whole: text positions stay on character boundaries.
    fn any_char(&mut self) -> bool {
        let Some(b) = self.peek() else {
            return false;
        };
        let width = match b {
            0..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            _ => 4,
        };
        self.pos = (self.pos + width).min(self.s.len());
        true
    }

    fn arrow_value(&mut self) -> bool {
        self.atomic(Rule::arrow_value, |r| {
            let part = |b: u8| is_name_char(b) || b == b'?';
            let start = r.pos;
            while r.peek_is(part) && !r.s[r.pos..].starts_with(b"->") {
                r.pos += 1;
            }
            r.pos > start && r.eat("->") && r.eat_while(part) > 0
        })
    }

    fn padding(&mut self) -> bool {
        self.atomic(Rule::padding, |r| {
            r.pad_dim() && {
                while r.attempt(|r| r.eat_byte(b'x') && r.pad_dim()) {}
                !r.peek_is(is_name_char)
            }
        })
    }

    fn pad_dim(&mut self) -> bool {
        self.int_text() && self.eat_byte(b'_') && self.int_text() && {
            self.attempt(|r| r.eat_byte(b'_') && r.int_text());
            true
        }
    }

    fn slice_list(&mut self) -> bool {
        self.rule(Rule::slice_list, |r| r.braced1(Self::slice))
    }

    fn slice(&mut self) -> bool {
        self.rule(Rule::slice, |r| {
            r.lit("[") && r.then_item(Self::int) && r.then(":") && r.then_item(Self::int) && {
                r.attempt(|r| r.then(":") && r.then_item(Self::int));
                r.then("]")
            }
        })
    }

    fn int_list(&mut self) -> bool {
        self.atomic(Rule::int_list, |r| {
            r.eat_byte(b'{') && {
                r.int_run(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'));
                r.eat_byte(b'}')
            }
        })
    }

    fn kv_map(&mut self) -> bool {
        self.rule(Rule::kv_map, |r| {
            r.lit("{") && r.then_item(Self::kv) && {
                while r.attempt(|r| {
                    r.attempt(|r| r.then(","));
                    r.then_item(Self::kv)
                }) {}
                r.then("}")
            }
        })
    }

    fn kv(&mut self) -> bool {
        self.rule(Rule::kv, |r| {
            r.attr_name()
                && r.then("=")
                && r.then_item(|r| {
                    r.choice(&[Self::string, Self::number, Self::word, Self::raw_value])
                })
        })
    }

    fn word_list(&mut self) -> bool {
        self.rule(Rule::word_list, |r| r.braced1(Self::word))
    }

    /// A shape, and a value of it where one follows on the same line (a
    /// custom call's `literal=s32[2]{0} {1, 2}`): one rule, so a word value
    /// is not read as a shape twice.
    fn shaped_literal(&mut self) -> bool {
        self.rule(Rule::shaped_literal, |r| {
            r.shape() && {
                r.attempt(|r| {
                    r.eat_while(|b| b == b' ');
                    r.literal()
                });
                true
            }
        })
    }

    fn shape_list(&mut self) -> bool {
        self.rule(Rule::shape_list, |r| r.braced1(Self::shape))
    }

    fn number(&mut self) -> bool {
        self.atomic(Rule::number, Self::number_text)
    }

    fn number_text(&mut self) -> bool {
        self.attempt(|r| {
            r.eat_byte(b'-');
            let digits = r.eat_while(|b| b.is_ascii_digit());
            let mantissa = if digits > 0 {
                if r.eat_byte(b'.') {
                    r.eat_while(|b| b.is_ascii_digit());
                }
                true
            } else {
                r.eat_byte(b'.') && r.eat_while(|b| b.is_ascii_digit()) > 0
            };
            mantissa && {
                r.attempt(|r| {
                    (r.eat_byte(b'e') || r.eat_byte(b'E')) && {
                        let _ = r.eat_byte(b'+') || r.eat_byte(b'-');
                        r.eat_while(|b| b.is_ascii_digit()) > 0
                    }
                });
                true
            }
        })
    }

    fn raw_value(&mut self) -> bool {
        self.atomic(Rule::raw_value, |r| {
            r.attempt(Self::raw_group) || r.attempt(Self::raw_iota)
        })
    }

    /// Replica groups over a mesh, as XLA writes them in programs it has
    /// partitioned: `mesh['a'=2,'b'=4]`, an optional `, device_ids=(...)`,
    /// then the axes, `{'a','b':(2)2}`. Taken whole, as one value, for
    /// `text::collective` to read.
    fn mesh_groups(&mut self) -> bool {
        self.atomic(Rule::raw_value, |r| {
            r.eat("mesh[")
                && {
                    r.eat_while(|b| b != b']');
                    r.eat_byte(b']')
                }
                && {
                    r.attempt(|r| {
                        r.eat_byte(b',');
                        r.eat_while(|b| b == b' ');
                        r.eat("device_ids=") && r.paren_group()
                    });
                    r.eat_while(|b| b == b' ');
                    r.raw_group()
                }
        })
    }

    fn raw_group(&mut self) -> bool {
        self.eat_byte(b'{') && {
            loop {
                match self.peek() {
                    Some(b'{') => {
                        if !self.attempt(Self::raw_group) {
                            break;
                        }
                    }
                    Some(b'"') => {
                        if !self.attempt(|r| {
                            r.pos += 1;
                            r.string_text();
                            r.eat_byte(b'"')
                        }) {
                            break;
                        }
                    }
                    Some(b'}') | None => break,
                    Some(_) => self.pos += 1,
                }
            }
            self.eat_byte(b'}')
        }
    }

    fn raw_iota(&mut self) -> bool {
        let bracketed = |r: &mut Self| {
            r.eat_byte(b'[') && {
                r.eat_while(|b| b != b']');
                r.eat_byte(b']')
            }
        };
        bracketed(self) && self.eat("<=") && bracketed(self) && {
            self.attempt(|r| {
                r.eat("T(") && {
                    r.eat_while(|b| b != b')');
                    r.eat_byte(b')')
                }
            });
            true
        }
    }

    fn word(&mut self) -> bool {
        self.atomic(Rule::word, Self::name_text)
    }

    fn name(&mut self) -> bool {
        self.atomic(Rule::name, Self::name_text)
    }

    fn name_text(&mut self) -> bool {
        self.attempt(|r| {
            r.eat_byte(b'%');
            r.peek_is(|b| b.is_ascii_alphabetic() || b == b'_') && {
                r.eat_while(is_name_char);
                true
            }
        })
    }

    fn int(&mut self) -> bool {
        self.atomic(Rule::int, Self::int_text)
    }

    fn int_text(&mut self) -> bool {
        self.attempt(|r| {
            r.eat_byte(b'-');
            r.eat_while(|b| b.is_ascii_digit()) > 0
        })
    }
}

/// `at`, moved back to the start of the character it falls in.
pub(crate) fn char_floor(input: &str, at: usize) -> usize {
    let mut at = at.min(input.len());
    while !input.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Where `needle` first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
