//! The module's rules: its header and attributes, and its computations.

use super::reader::{is_name_char, Expect, Item, Reader};
use super::tree::{AliasEntry, Computation, DonorEntry, Module, ModuleAttribute, ProgramShape};
use super::Int;
use crate::ir::module::AliasKind;

impl<'i> Reader<'i> {
    pub(super) fn module(&mut self) -> Option<Module<'i>> {
        self.skip();
        self.lit("HloModule")?;
        let name = self.then_item(Self::name)?;
        // Older dumps end the name with a colon (`HloModule m:`), which
        // XLA's lexer takes as part of a name token.
        self.eat_byte(b':');
        let mut attributes = Vec::new();
        while let Some(a) = self.attempt(|r| {
            r.then(",")?;
            r.then_item(Self::module_attribute)
        }) {
            attributes.push(a);
        }
        let mut computations = vec![self.then_item(Self::computation)?];
        while let Some(c) = self.attempt(|r| r.then_item(Self::computation)) {
            computations.push(c);
        }
        self.skip();
        if self.pos != self.s.len() {
            self.note_expected(Expect::Label("end of input"));
            return None;
        }
        Some(Module {
            name,
            attributes,
            computations,
        })
    }

    fn module_attribute(&mut self) -> Option<ModuleAttribute<'i>> {
        self.rule(None, |r| {
            r.braced_list_attr("input_output_alias", Self::alias_entry)
        })
        .map(ModuleAttribute::InputOutputAlias)
        .or_else(|| {
            self.rule(None, |r| {
                r.braced_list_attr("buffer_donor", Self::donor_entry)
            })
            .map(ModuleAttribute::BufferDonor)
        })
        .or_else(|| self.layout_attr())
        .or_else(|| self.attribute().map(ModuleAttribute::Other))
    }

    /// `key = { (item ("," item)*)? }`: the module's alias and donor lists.
    fn braced_list_attr<T>(&mut self, key: &'static str, item: Item<'i, T>) -> Option<Vec<T>> {
        self.lit(key)?;
        self.then("=")?;
        self.then("{")?;
        let items = self.list(item);
        self.then("}")?;
        Some(items)
    }

    fn alias_entry(&mut self) -> Option<AliasEntry<'i>> {
        self.rule(Some("an alias entry such as {0}: (0, {})"), |r| {
            let output_index = r.shape_index()?;
            r.then(":")?;
            r.then("(")?;
            let parameter = r.then_item(Self::int)?;
            r.then(",")?;
            let parameter_index = r.then_item(Self::shape_index)?;
            let kind = r.attempt(|r| {
                r.then(",")?;
                r.then_item(Self::alias_kind)
            });
            r.then(")")?;
            Some(AliasEntry {
                output_index,
                parameter,
                parameter_index,
                kind,
            })
        })
    }

    fn alias_kind(&mut self) -> Option<AliasKind> {
        self.atomic(Some("`may-alias` or `must-alias`"), |r| {
            if r.eat("may-alias") {
                Some(AliasKind::MayAlias)
            } else if r.eat("must-alias") {
                Some(AliasKind::MustAlias)
            } else {
                None
            }
        })
    }

    fn donor_entry(&mut self) -> Option<DonorEntry<'i>> {
        self.rule(None, |r| {
            r.lit("(")?;
            let parameter = r.then_item(Self::int)?;
            r.then(",")?;
            let parameter_index = r.then_item(Self::shape_index)?;
            r.then(")")?;
            Some(DonorEntry {
                parameter,
                parameter_index,
            })
        })
    }

    fn shape_index(&mut self) -> Option<Vec<Int<'i>>> {
        self.rule(Some("a shape index such as {0}"), |r| {
            r.lit("{")?;
            let index = r.list(Self::int);
            r.then("}")?;
            Some(index)
        })
    }

    fn layout_attr(&mut self) -> Option<ModuleAttribute<'i>> {
        let start = self.pos;
        self.rule(None, |r| {
            r.lit("entry_computation_layout")?;
            r.then("=")?;
            r.then("{")?;
            let program = r.then_item(Self::program_shape)?;
            r.then("}")?;
            Some(ModuleAttribute::EntryComputationLayout {
                at: r.span(start),
                program,
            })
        })
    }

    fn program_shape(&mut self) -> Option<ProgramShape<'i>> {
        self.rule(Some("a program shape (params)->result"), |r| {
            let (parameters, result) = r.arrow(Self::shape)?;
            Some(ProgramShape { parameters, result })
        })
    }

    /// `"(" (param ("," param)*)? ")" "->" shape`: a program shape, or a
    /// computation's signature.
    fn arrow<T>(&mut self, param: Item<'i, T>) -> Option<(Vec<T>, super::Shape<'i>)> {
        self.lit("(")?;
        let params = self.list(param);
        self.then(")")?;
        self.then("->")?;
        let result = self.then_item(Self::shape)?;
        Some((params, result))
    }

    fn computation(&mut self) -> Option<Computation<'i>> {
        let start = self.pos;
        self.rule(Some("a computation"), |r| {
            let is_entry = r.keyword(Some("`ENTRY`"), "ENTRY");
            if is_entry {
                r.skip();
            }
            let name = r.name()?;
            r.attempt(|r| r.then_item(Self::signature));
            r.then("{")?;
            let mut instructions = Vec::new();
            while let Some(i) = r.attempt(|r| r.then_item(Self::instruction)) {
                instructions.push(i);
            }
            r.then("}")?;
            // `}, execution_thread="host"`, read as an attribute.
            let mut attributes = Vec::new();
            while let Some(a) = r.attempt(|r| {
                r.then(",")?;
                r.then_item(Self::attribute)
            }) {
                attributes.push(a);
            }
            Some(Computation {
                at: r.span(start),
                is_entry,
                name,
                instructions,
                attributes,
            })
        })
    }

    /// `word`, not followed by a name character.
    pub(super) fn keyword(&mut self, label: Option<&'static str>, word: &'static str) -> bool {
        self.token(label, |r| r.eat(word) && !r.peek_is(is_name_char))
            .is_some()
    }

    fn signature(&mut self) -> Option<()> {
        self.rule(Some("a signature"), |r| {
            r.arrow(Self::sig_param).map(|_| ())
        })
    }

    fn sig_param(&mut self) -> Option<()> {
        self.rule(None, |r| {
            r.name()?;
            r.then(":")?;
            r.then_item(Self::shape).map(|_| ())
        })
    }
}
