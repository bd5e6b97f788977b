//! A computation: its instructions in order, operands resolved by name
//! (nested ones added before their users), unwritten shapes inferred.

use super::*;

pub(super) struct PendingInstr<'i> {
    pub(super) id: InstrId,
    pub(super) operands: Vec<OperandRef<'i>>,
    /// Written without a result shape, or with one XLA's parser replaces:
    /// inferred once its operands are.
    pub(super) unshaped: Option<(Span<'i>, Option<Shape>)>,
}

/// An operand as written: a name to look up once the computation is read,
/// or an instruction written in its place, already added.
pub(super) enum OperandRef<'i> {
    Named(syntax::Name<'i>),
    Nested(InstrId),
}

/// Names each instruction written in place of an operand as XLA does,
/// `{opcode}.anon`, then `.anon.1`, ... past every name already taken.
pub(super) fn name_nested(
    comp: &mut Computation,
    anonymous: &[InstrId],
    written: &FxHashMap<&str, InstrId>,
) {
    let mut taken: FxHashSet<String> = FxHashSet::default();
    for &id in anonymous {
        let base = format!("{}.anon", comp.instr(id).op.opcode());
        let mut name = base.clone();
        let mut k = 0;
        while written.contains_key(name.as_str()) || taken.contains(&name) {
            k += 1;
            name = format!("{base}.{k}");
        }
        taken.insert(name.clone());
        comp.instr_mut(id).name = name;
    }
}

/// One computation, and the computations its short-form async starts wrap
/// and its instructions write inline (which come before it, as callees
/// do).
// Kept out of line: inlined into `parse_module_noted` it cost the JAX 7B
// step's parse 2% more instructions (callgrind: 188.2 M against 184.0 M).
#[inline(never)]
pub(super) fn computation<'i>(
    c: &'i syntax::Computation<'i>,
    before: &[Computation],
    notes: &mut Vec<String>,
) -> Result<(Computation, Vec<Computation>), ParseError> {
    let mut b = Builder::new(c);
    for i in &c.instructions {
        b.instruction(i, before, notes)?;
    }
    for a in &c.attributes {
        b.attribute(a)?;
    }
    let unshaped = b.resolve_operands()?;
    b.resolve_control()?;
    b.finish(&c.name, unshaped, before, notes)
}

/// A computation as it is read: its instructions added as they come,
/// what they name kept until every name is known.
struct Builder<'i> {
    comp: Computation,
    pending: Vec<PendingInstr<'i>>,
    /// Each instruction's control predecessors, by name.
    control: Vec<(InstrId, ControlPredecessors<'i>)>,
    by_name: FxHashMap<&'i str, InstrId>,
    /// The instructions written in place of operands, in written order.
    anonymous: Vec<InstrId>,
    /// Short-form async starts, and the ops they wrap.
    wrapped_ops: Vec<(InstrId, Op, Span<'i>)>,
    /// Computations written inline, adopted under free names.
    hoisted: Vec<Computation>,
    async_without_callee: bool,
    root: Option<InstrId>,
    last: Option<InstrId>,
}

impl<'i> Builder<'i> {
    fn new(c: &syntax::Computation<'_>) -> Self {
        let written = c.instructions.len();
        Builder {
            comp: Computation::with_capacity(c.name.text(), written),
            pending: Vec::with_capacity(written),
            control: Vec::new(),
            by_name: FxHashMap::with_capacity_and_hasher(written, Default::default()),
            anonymous: Vec::new(),
            wrapped_ops: Vec::new(),
            hoisted: Vec::new(),
            async_without_callee: false,
            root: None,
            last: None,
        }
    }

    /// `}, execution_thread="host"`: the one attribute a computation has.
    fn attribute(&mut self, a: &syntax::Attribute<'_>) -> Result<(), ParseError> {
        let (key, value, at) = attribute(a)?;
        match (key, value) {
            ("execution_thread", Value::Str(thread)) => {
                self.comp.execution_thread =
                    (thread != crate::ir::computation::MAIN_THREAD).then_some(thread);
                Ok(())
            }
            ("execution_thread", other) => err_at(
                &at,
                format!(
                    "'execution_thread' must be a quoted string, got {}",
                    other.kind()
                ),
            ),
            _ => err_at(&at, format!("unsupported computation attribute '{key}'")),
        }
    }

    fn instruction(
        &mut self,
        written: &'i syntax::Instruction<'i>,
        before: &[Computation],
        notes: &mut Vec<String>,
    ) -> Result<(), ParseError> {
        let mut attrs = Attrs::new(written.at);
        let ParsedInstruction {
            shape,
            mut op,
            operands,
            note,
            mut wrapped,
            inline,
        } = instruction(written, &mut attrs)?;
        // Most instructions call nothing: they skip resolving.
        if !attrs.callees.is_empty() {
            let callees = std::mem::take(&mut attrs.callees);
            let inline = adopt_inline(&mut self.hoisted, inline, before);
            let scope = Scope {
                before,
                own: &self.hoisted,
            };
            scope.resolve(&mut op, &callees, &inline)?;
            if let Some(w) = &mut wrapped {
                scope.resolve(w, &callees, &inline)?;
            }
        }
        let mut instr = Instruction::new(written.name.text(), shape, op);
        let control = annotate(&mut instr, attrs)?;
        notes.extend(note);
        let at = written.at;
        let source = shape_source(&instr.op, &instr.shape, written.shape.is_none(), at);
        self.async_without_callee |=
            matches!(&instr.op, Op::Async { calls, .. } if calls.is_pending());
        // Operands written in place come first, as in XLA.
        let operands = self.add_operands(operands, notes)?;
        let id = self.comp.add(instr, &[]);
        if let Some(op) = wrapped {
            self.wrapped_ops.push((id, *op, at));
        }
        if self.by_name.insert(written.name.text(), id).is_some() {
            let name = &self.comp.instr(id).name;
            return err_at(&at, format!("instruction name '{name}' is defined twice"));
        }
        if written.is_root {
            if self.root.is_some() {
                return err_at(&at, "a second ROOT instruction");
            }
            self.root = Some(id);
        }
        self.last = Some(id);
        if let Some(c) = control {
            self.control.push((id, c));
        }
        self.pending.push(PendingInstr {
            id,
            operands,
            unshaped: source,
        });
        Ok(())
    }

    /// Adds the instructions written in place of operands, each after its
    /// own operands (as XLA adds them, so a schedule of the written order
    /// holds), and refers to each by its id. They are named later, when
    /// every written name is known, in the order they are written.
    fn add_operands(
        &mut self,
        operands: &'i [syntax::Operand<'i>],
        notes: &mut Vec<String>,
    ) -> Result<Vec<OperandRef<'i>>, ParseError> {
        let mut refs = Vec::with_capacity(operands.len());
        for o in operands {
            let nested = match o {
                syntax::Operand::Named(name) => {
                    refs.push(OperandRef::Named(*name));
                    continue;
                }
                syntax::Operand::Nested(nested) => nested,
            };
            let ParsedNested {
                instr,
                operands: inner,
                unshaped,
                note,
            } = nested_instruction(nested)?;
            notes.extend(note);
            let source = shape_source(&instr.op, &instr.shape, unshaped, nested.at);
            let slot = self.anonymous.len();
            self.anonymous.push(InstrId::end());
            let inner = self.add_operands(inner, notes)?;
            let id = self.comp.add(instr, &[]);
            self.anonymous[slot] = id;
            self.pending.push(PendingInstr {
                id,
                operands: inner,
                unshaped: source,
            });
            refs.push(OperandRef::Nested(id));
        }
        Ok(refs)
    }

    /// Connects every instruction to its operands, which may be defined
    /// further down, as in XLA; returns the instructions whose shapes are
    /// still to infer.
    fn resolve_operands(&mut self) -> Result<Vec<Unshaped<'i>>, ParseError> {
        let mut edges = Vec::with_capacity(self.pending.len());
        let mut unshaped = Vec::new();
        for PendingInstr {
            id,
            operands,
            unshaped: without_shape,
        } in std::mem::take(&mut self.pending)
        {
            let mut ids = Vec::with_capacity(operands.len());
            for o in operands {
                ids.push(match o {
                    OperandRef::Nested(nid) => nid,
                    OperandRef::Named(name) => self.named(&name, "operand")?,
                });
            }
            if let Some((at, written)) = without_shape {
                unshaped.push((id, ids.clone(), at, written));
            }
            edges.push((id, ids));
        }
        for (id, ops) in edges {
            self.comp.connect_operands(id, &ops);
        }
        Ok(unshaped)
    }

    /// The instruction `name` names, or an error naming it as `what`.
    fn named(&self, name: &syntax::Name<'_>, what: &str) -> Result<InstrId, ParseError> {
        let n = name.text();
        match self.by_name.get(n) {
            Some(&id) => Ok(id),
            None => err_at(
                name,
                format!(
                    "{what} '{n}' is not defined in computation '{}'",
                    self.comp.name
                ),
            ),
        }
    }

    fn resolve_control(&mut self) -> Result<(), ParseError> {
        for (id, ControlPredecessors { names, at }) in std::mem::take(&mut self.control) {
            for n in names {
                match self.by_name.get(n.as_str()) {
                    Some(&pred) => self.comp.add_control_dependency(pred, id),
                    None => {
                        return err_at(
                            &at,
                            format!(
                                "control predecessor '{n}' is not defined in computation '{}'",
                                self.comp.name
                            ),
                        )
                    }
                }
            }
        }
        Ok(())
    }

    /// The computation, rooted and its shapes inferred, after the
    /// computations it writes inline and those its async starts wrap.
    fn finish(
        mut self,
        name: &syntax::Name<'_>,
        unshaped: Vec<Unshaped<'i>>,
        before: &[Computation],
        notes: &mut Vec<String>,
    ) -> Result<(Computation, Vec<Computation>), ParseError> {
        let comp = &mut self.comp;
        name_nested(comp, &self.anonymous, &self.by_name);
        // Computations written inline come first: a wrapped op may call one.
        let scope = Scope {
            before,
            own: &self.hoisted,
        };
        let mut wrapped = wrap_async_starts(comp, self.wrapped_ops, &scope)?;
        if self.async_without_callee {
            crate::ir::async_ops::find_async_callees(comp)
                .or_else(|e| err_at(name, e.to_string()))?;
        }
        self.hoisted.append(&mut wrapped);
        let wrapped = self.hoisted;
        let scope = Scope {
            before,
            own: &wrapped,
        };
        let mut comp = self.comp;
        infer_unwritten_shapes(&mut comp, unshaped, &|id| scope.signature(id), notes)?;
        match self.root.or(self.last) {
            Some(r) => comp.set_root(r),
            None => {
                return err_at(
                    name,
                    format!("computation '{}' has no instructions", comp.name),
                )
            }
        }
        Ok((comp, wrapped))
    }
}
