//! An HLO module: computations (callees and the entry), buffer aliasing and
//! module-level annotations.

use crate::ir::computation::Computation;
use crate::ir::computation_id::ComputationId;
use crate::ir::shape::Shape;
use std::collections::BTreeMap;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AliasKind {
    MayAlias,
    MustAlias,
}

impl AliasKind {
    pub fn name(self) -> &'static str {
        match self {
            AliasKind::MayAlias => "may-alias",
            AliasKind::MustAlias => "must-alias",
        }
    }
}

/// One `input_output_alias` entry: output `{output_index}` reuses the buffer
/// of parameter `parameter` at `{parameter_index}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IoAlias {
    pub output_index: Vec<i64>,
    pub parameter: i64,
    pub parameter_index: Vec<i64>,
    pub kind: AliasKind,
}

/// One `buffer_donor` entry: parameter `parameter` at `{parameter_index}`
/// gives its buffer up to the program, which may reuse it for any output
/// (torch-xla marks donated inputs so, where JAX writes
/// `input_output_alias`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferDonor {
    pub parameter: i64,
    pub parameter_index: Vec<i64>,
}

#[derive(Clone, Debug)]
pub struct Module {
    pub name: String,
    /// Callees and the entry. Printing and emission order them callees first.
    pub computations: Vec<Computation>,
    /// The entry computation.
    pub entry: ComputationId,
    pub input_output_alias: Vec<IoAlias>,
    pub buffer_donors: Vec<BufferDonor>,
    pub frontend_attributes: BTreeMap<String, String>,
    /// XLA's `is_scheduled=true`: each computation's instruction order (the
    /// order instructions were added) is its schedule, kept when printed
    /// and emitted. A pass that changes the module drops it.
    pub is_scheduled: bool,
    /// XLA's `entry_computation_layout` where it differs from the entry
    /// computation's own parameter and root layouts (same dimensions and
    /// types): the layouts the program's buffers have at its boundary, as
    /// torch-xla writes for outputs it transposed inside. `None` when the
    /// entry's own layouts are the boundary's.
    pub entry_layout: Option<EntryLayout>,
    /// The stack-frame tables instructions' `metadata.stack_frame_id`
    /// point into (JAX writes them); empty when there are none.
    pub stack_frames: crate::ir::stack_frames::StackFrameIndex,
    /// XLA's `allow_spmd_sharding_propagation_to_parameters` and
    /// `..._to_output` (JAX writes them on every module), kept through
    /// text. They belong to XLA's module config, not to `HloModuleProto`,
    /// so a proto carries them no more than XLA's own proto dumps do.
    pub allow_spmd_sharding_propagation: SpmdPropagation,
    /// XLA's `replica_count` and `num_partitions`, kept through text (also
    /// module config: a proto has no field for them).
    pub devices: DeviceCounts,
    /// XLA's `alias_passthrough_params`: an output that is a parameter
    /// returned unchanged shares the parameter's buffer. Kept through
    /// text; module config too, so a proto has no field for it.
    pub alias_passthrough_params: bool,
    /// The proto's `device_assignment`, kept through the proto (HLO text
    /// has no syntax for it); `None` when not written.
    pub device_assignment: Option<crate::ir::device_assignment::DeviceAssignment>,
}

/// How many copies of the program run side by side (`replica_count`) and
/// into how many SPMD partitions it is split (`num_partitions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceCounts {
    pub replica_count: i64,
    pub num_partitions: i64,
}

impl Default for DeviceCounts {
    fn default() -> Self {
        DeviceCounts {
            replica_count: 1,
            num_partitions: 1,
        }
    }
}

impl DeviceCounts {
    /// One replica, one partition: what runs on a single device.
    pub fn is_single(self) -> bool {
        self == DeviceCounts::default()
    }
}

/// Where XLA's SPMD partitioner may change shardings, per parameter and
/// per output; empty when not written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpmdPropagation {
    pub to_parameters: Vec<bool>,
    pub to_output: Vec<bool>,
}

/// The entry's boundary layouts: each parameter's shape and the result's.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryLayout {
    pub parameters: Vec<Shape>,
    pub result: Shape,
}

impl EntryLayout {
    /// `Ok(None)` when `parameters` and `result` are exactly the entry's
    /// own shapes, `Ok(Some)` when only layouts differ, and the first
    /// difference of dimensions or type otherwise.
    pub fn against(
        m: &Module,
        parameters: Vec<Shape>,
        result: Shape,
    ) -> Result<Option<EntryLayout>, EntryLayoutError> {
        let differs = Self::layouts_differ(m, &parameters, &result)?;
        Ok(differs.then_some(EntryLayout { parameters, result }))
    }

    /// Whether this boundary still fits `m`'s entry (what the verifier
    /// asks after every pass).
    pub fn check(&self, m: &Module) -> Result<(), EntryLayoutError> {
        Self::layouts_differ(m, &self.parameters, &self.result).map(|_| ())
    }

    /// Whether `parameters` and `result` differ from the entry's own only
    /// in layouts (`Ok(true)`), not at all (`Ok(false)`), or otherwise
    /// (the first difference).
    fn layouts_differ(
        m: &Module,
        parameters: &[Shape],
        result: &Shape,
    ) -> Result<bool, EntryLayoutError> {
        let own = m.entry_parameter_shapes();
        if own.len() != parameters.len() {
            return Err(EntryLayoutError(BoundaryMismatch::ParameterCount {
                written: parameters.len(),
                own: own.len(),
            }));
        }
        let own_result = m.entry_result_shape();
        let pairs = parameters
            .iter()
            .zip(&own)
            .enumerate()
            .map(|(i, (w, o))| (BoundaryValue::Parameter(i), w, o))
            .chain(
                own_result
                    .iter()
                    .map(|o| (BoundaryValue::Result, result, o)),
            );
        let mut same = true;
        for (value, written, o) in pairs {
            if !written.compatible(o) {
                return Err(EntryLayoutError(BoundaryMismatch::ShapeDiffers {
                    value,
                    written: Box::new(written.clone()),
                    own: Box::new(o.clone()),
                }));
            }
            same &= written == o;
        }
        Ok(!same)
    }
}

/// A written entry boundary that is not the entry computation's up to
/// layouts, as text's `entry_computation_layout` names it. A proto's
/// `host_program_shape` reports the same [`BoundaryMismatch`] under its
/// own name.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("entry_computation_layout {0}")]
pub struct EntryLayoutError(pub BoundaryMismatch);

/// How a written entry boundary differs from the entry computation's
/// beyond layouts: the first difference, without the field that wrote it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BoundaryMismatch {
    #[error("lists {written} parameters, the entry computation has {own}")]
    ParameterCount { written: usize, own: usize },
    /// Dimensions or element type differ, not only the layout. Boxed: a
    /// result should not be the size of two shapes for its rare error.
    #[error("gives {value} as {written}, the entry computation as {own}")]
    ShapeDiffers {
        value: BoundaryValue,
        written: Box<Shape>,
        own: Box<Shape>,
    },
}

/// One value crossing the entry's boundary: a parameter, by number, or the
/// result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoundaryValue {
    Parameter(usize),
    Result,
}

impl fmt::Display for BoundaryValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BoundaryValue::Parameter(i) => write!(f, "parameter {i}"),
            BoundaryValue::Result => f.write_str("the result"),
        }
    }
}

impl Module {
    /// The computations a `fusion` calls: XLA marks them
    /// `is_fusion_computation` in a proto.
    pub fn fused_computations(&self) -> std::collections::BTreeSet<ComputationId> {
        self.computations
            .iter()
            .flat_map(|c| c.ids().map(move |id| &c.instr(id).op))
            .filter_map(|op| match op {
                crate::ir::op::Op::Fusion { calls, .. } => Some(*calls),
                _ => None,
            })
            .collect()
    }

    /// A module whose entry is `entry`.
    pub fn new(name: impl Into<String>, entry: Computation) -> Self {
        Module {
            name: name.into(),
            computations: vec![entry],
            entry: ComputationId::new(0),
            input_output_alias: Vec::new(),
            buffer_donors: Vec::new(),
            frontend_attributes: BTreeMap::new(),
            is_scheduled: false,
            entry_layout: None,
            stack_frames: Default::default(),
            allow_spmd_sharding_propagation: Default::default(),
            devices: DeviceCounts::default(),
            alias_passthrough_params: false,
            device_assignment: None,
        }
    }

    /// Takes `other`'s module config: the device counts, the SPMD
    /// propagation flags and `alias_passthrough_params`, which text keeps
    /// and `HloModuleProto` has no field for (XLA's own proto dumps lack
    /// them too). For comparing a module with its proto's reading.
    pub fn adopt_config(&mut self, other: &Module) {
        self.devices = other.devices;
        self.allow_spmd_sharding_propagation = other.allow_spmd_sharding_propagation.clone();
        self.alias_passthrough_params = other.alias_passthrough_params;
    }

    pub fn entry(&self) -> &Computation {
        self.computation(self.entry)
    }

    pub fn entry_mut(&mut self) -> &mut Computation {
        self.computation_mut(self.entry)
    }

    /// The computation `id` names. Ids come from this module: an op's
    /// callee in a verified module, or what [`Module::add_computation`]
    /// returned; use [`Module::get_computation`] for one not yet checked.
    pub fn computation(&self, id: ComputationId) -> &Computation {
        &self.computations[id.index()]
    }

    pub fn computation_mut(&mut self, id: ComputationId) -> &mut Computation {
        &mut self.computations[id.index()]
    }

    /// The computation `id` names, if there is one.
    pub fn get_computation(&self, id: ComputationId) -> Option<&Computation> {
        self.computations.get(id.index())
    }

    /// A callee's name, or its id where it names no computation (for
    /// messages, and for printing a module the verifier has not seen).
    pub fn callee_name(&self, id: ComputationId) -> std::borrow::Cow<'_, str> {
        match self.get_computation(id) {
            Some(c) => c.name.as_str().into(),
            None => id.describe().into(),
        }
    }

    /// The computation named `name`.
    pub fn find_computation(&self, name: &str) -> Option<ComputationId> {
        self.computations
            .iter()
            .position(|c| c.name == name)
            .map(ComputationId::new)
    }

    /// The computation named `name`, itself.
    pub fn computation_named(&self, name: &str) -> Option<&Computation> {
        self.computations.iter().find(|c| c.name == name)
    }

    /// Every computation's id, in `computations` order.
    pub fn computation_ids(&self) -> impl Iterator<Item = ComputationId> {
        (0..self.computations.len()).map(ComputationId::new)
    }

    /// Adds a callee computation and returns its id.
    pub fn add_computation(&mut self, c: Computation) -> ComputationId {
        self.computations.push(c);
        ComputationId::new(self.computations.len() - 1)
    }

    /// Adds `other`'s computations, its callees' ids renumbered to their
    /// places here, and returns the id its entry now has. Its module
    /// config is not taken.
    pub fn absorb(&mut self, other: Module) -> ComputationId {
        let base = self.computations.len();
        let shift = |id: ComputationId| id.shifted(base);
        let entry = shift(other.entry);
        for mut c in other.computations {
            c.renumber_callees(&shift);
            self.computations.push(c);
        }
        entry
    }

    /// Keeps the computations `keep` says to, in their order, and gives
    /// every callee and the entry its new number. Nothing kept may call
    /// one removed, and the entry must be kept.
    pub fn retain_computations(
        &mut self,
        mut keep: impl FnMut(ComputationId, &Computation) -> bool,
    ) {
        let mut new_id = vec![None; self.computations.len()];
        let mut next = 0;
        for (i, c) in self.computations.iter().enumerate() {
            if keep(ComputationId::new(i), c) {
                new_id[i] = Some(ComputationId::new(next));
                next += 1;
            }
        }
        if next == self.computations.len() {
            return;
        }
        let mut i = 0;
        self.computations.retain(|_| {
            i += 1;
            new_id[i - 1].is_some()
        });
        self.renumber(&new_id);
    }

    /// Puts the computations in `order` (each id once, every computation
    /// named), every callee and the entry renumbered to match.
    pub fn reorder_computations(&mut self, order: &[ComputationId]) {
        debug_assert_eq!(order.len(), self.computations.len());
        if order.iter().enumerate().all(|(i, id)| id.index() == i) {
            return;
        }
        let mut new_id = vec![None; self.computations.len()];
        for (to, from) in order.iter().enumerate() {
            new_id[from.index()] = Some(ComputationId::new(to));
        }
        let mut old: Vec<Option<Computation>> = std::mem::take(&mut self.computations)
            .into_iter()
            .map(Some)
            .collect();
        self.computations = order
            .iter()
            .filter_map(|from| old[from.index()].take())
            .collect();
        self.renumber(&new_id);
    }

    /// Gives the entry and every callee its new id, `new_id` by old id:
    /// `None` for a computation removed (its callers, which should be
    /// none, then hold a pending id); an id past the old ones stays as it
    /// is, naming no computation still.
    fn renumber(&mut self, new_id: &[Option<ComputationId>]) {
        fn renumbered(new_id: &[Option<ComputationId>], id: ComputationId) -> ComputationId {
            match new_id.get(id.index()) {
                Some(new) => new.unwrap_or(ComputationId::PENDING),
                None => id,
            }
        }
        for c in &mut self.computations {
            c.renumber_callees(&|id| renumbered(new_id, id));
        }
        self.entry = renumbered(new_id, self.entry);
    }

    /// Parameter shapes of the entry, by parameter number.
    pub fn entry_parameter_shapes(&self) -> Vec<Shape> {
        let e = self.entry();
        e.parameters()
            .into_iter()
            .map(|p| e.instr(p).shape.clone())
            .collect()
    }

    pub fn entry_result_shape(&self) -> Option<Shape> {
        let e = self.entry();
        e.root().map(|r| e.instr(r).shape.clone())
    }

    /// Computations in definition order: every callee before its callers, the
    /// entry last; unreachable ones keep their relative order before the entry.
    pub fn computation_order(&self) -> Vec<ComputationId> {
        let mut done = vec![false; self.computations.len()];
        let mut order = Vec::with_capacity(self.computations.len());
        let visit = |start: usize, order: &mut Vec<usize>, done: &mut Vec<bool>| {
            let mut stack = vec![(start, false)];
            let mut on_stack = vec![false; self.computations.len()];
            while let Some((c, expanded)) = stack.pop() {
                if expanded {
                    on_stack[c] = false;
                    if !done[c] {
                        done[c] = true;
                        order.push(c);
                    }
                    continue;
                }
                if done[c] || on_stack[c] {
                    continue;
                }
                on_stack[c] = true;
                stack.push((c, true));
                let comp = &self.computations[c];
                let mut callees: Vec<usize> = Vec::new();
                for id in comp.post_order() {
                    for callee in comp.instr(id).op.called_computations() {
                        let k = callee.index();
                        if k < self.computations.len() && !callees.contains(&k) {
                            callees.push(k);
                        }
                    }
                }
                for k in callees.into_iter().rev() {
                    if !done[k] && !on_stack[k] {
                        stack.push((k, false));
                    }
                }
            }
        };
        // What the entry does not reach comes first, each computation after
        // its callees (which may be ones the entry reaches too), then the
        // entry's own, and the entry last.
        let mut reached = Vec::new();
        visit(self.entry.index(), &mut reached, &mut done.clone());
        if reached.len() == self.computations.len() {
            // All reached (hlatc's own modules): the walk is the order.
            return reached.into_iter().map(ComputationId::new).collect();
        }
        let mut is_reached = vec![false; self.computations.len()];
        for &i in &reached {
            is_reached[i] = true;
        }
        for (i, _) in is_reached.iter().enumerate().filter(|(_, &r)| !r) {
            visit(i, &mut order, &mut done);
        }
        visit(self.entry.index(), &mut order, &mut done);
        order.retain(|&i| i != self.entry.index());
        order.push(self.entry.index());
        order.into_iter().map(ComputationId::new).collect()
    }

    /// Total instruction count over all computations.
    pub fn instruction_count(&self) -> usize {
        self.computations.iter().map(|c| c.len()).sum()
    }
}

impl PartialEq for Module {
    /// Structural: same computations by name, same instructions by name with
    /// the same contents and operands; node ids and order do not matter.
    fn eq(&self, other: &Module) -> bool {
        if self.name != other.name
            || self.input_output_alias != other.input_output_alias
            || self.buffer_donors != other.buffer_donors
            || self.frontend_attributes != other.frontend_attributes
            || self.entry().name != other.entry().name
            || self.computations.len() != other.computations.len()
        {
            return false;
        }
        // Callee ids compare as numbers, so `other` is first put in this
        // module's order of names.
        let order: Option<Vec<ComputationId>> = self
            .computations
            .iter()
            .map(|c| other.find_computation(&c.name))
            .collect();
        let Some(order) = order else {
            return false;
        };
        let mut named = vec![false; order.len()];
        if !order
            .iter()
            .all(|id| !std::mem::replace(&mut named[id.index()], true))
        {
            // A name twice: no one computation for each.
            return false;
        }
        let reordered;
        let other = if order.iter().enumerate().all(|(i, id)| id.index() == i) {
            other
        } else {
            let mut o = other.clone();
            o.reorder_computations(&order);
            reordered = o;
            &reordered
        };
        self.computations
            .iter()
            .zip(&other.computations)
            .all(|(c, o)| c.structurally_eq(o))
    }
}
