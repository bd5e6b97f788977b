//! An HLO module: computations (callees and the entry), buffer aliasing and
//! module-level annotations.

use crate::ir::computation::Computation;
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
    /// Index of the entry computation in `computations`.
    pub entry: usize,
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
    pub fn fused_computations(&self) -> std::collections::BTreeSet<&str> {
        self.computations
            .iter()
            .flat_map(|c| c.ids().map(move |id| &c.instr(id).op))
            .filter_map(|op| match op {
                crate::ir::op::Op::Fusion { calls, .. } => Some(calls.as_str()),
                _ => None,
            })
            .collect()
    }

    /// A module whose entry is `entry`.
    pub fn new(name: impl Into<String>, entry: Computation) -> Self {
        Module {
            name: name.into(),
            computations: vec![entry],
            entry: 0,
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
        &self.computations[self.entry]
    }

    pub fn entry_mut(&mut self) -> &mut Computation {
        &mut self.computations[self.entry]
    }

    pub fn computation(&self, name: &str) -> Option<&Computation> {
        self.computations.iter().find(|c| c.name == name)
    }

    /// Adds a callee computation and returns its name.
    pub fn add_computation(&mut self, c: Computation) -> String {
        let name = c.name.clone();
        self.computations.push(c);
        name
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
    pub fn computation_order(&self) -> Vec<usize> {
        let index: BTreeMap<&str, usize> = self
            .computations
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.as_str(), i))
            .collect();
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
                    for name in comp.instr(id).op.called_computations() {
                        if let Some(&k) = index.get(name) {
                            if !callees.contains(&k) {
                                callees.push(k);
                            }
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
        visit(self.entry, &mut reached, &mut done.clone());
        if reached.len() == self.computations.len() {
            // All reached (hlatc's own modules): the walk is the order.
            return reached;
        }
        let mut is_reached = vec![false; self.computations.len()];
        for &i in &reached {
            is_reached[i] = true;
        }
        for (i, _) in is_reached.iter().enumerate().filter(|(_, &r)| !r) {
            visit(i, &mut order, &mut done);
        }
        visit(self.entry, &mut order, &mut done);
        order.retain(|&i| i != self.entry);
        order.push(self.entry);
        order
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
        self.computations.iter().all(|c| {
            other
                .computation(&c.name)
                .is_some_and(|o| c.structurally_eq(o))
        })
    }
}
