//! The step's signature: what each input and output is for ([`Role`]),
//! its name, type and shape, and the parameter and layer it belongs to
//! ([`TensorSpec`]), and where the carried state lives in it
//! ([`StateLayout`]), found from roles and names, never from positions.
//! Runtimes, the manifest and the trainer read the step through these
//! alone; a name is made from the typed fields ([`state_name`]) and never
//! read back for them.

use hlatc_compiler::{AliasKind, ElementType, IoAlias};
use hlatc_models::ParamSpec;
use serde::Serialize;

/// What a buffer is for, so a runtime knows what to feed and keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Parameter,
    AdamM,
    AdamV,
    /// The f32 master copy of a bf16 parameter (`bf16-master`), which the
    /// update is applied to.
    MasterWeight,
    Step,
    Tokens,
    Targets,
    SegmentIds,
    /// The state of the RNG that stochastic rounding draws from (`u64[2]`,
    /// cpu), seeded once and carried from step to step.
    RngState,
    /// A parameter's gradient summed over the micro-batches of one
    /// optimizer step so far (`grad.NAME`, the rank's share, in f32; f64
    /// under fp64): the micro step adds into it, the apply step reads and
    /// zeroes it.
    GradAccumulator,
    /// How many targets the whole optimizer step counts (`s32[]`, the
    /// ignore index left out): each micro-batch's loss is a share of
    /// their mean.
    TokenCount,
    /// Under [`RankSource::Input`], the rank's number (`s32[1]`, holding
    /// r on rank r), fed rather than read from the device.
    Rank,
    /// Under pipeline parallelism, the tick of the schedule a stage
    /// program runs (`s32[]`, from 0): which micro-batch each stage
    /// computes follows from it (see `crate::pipeline::Schedule`).
    Tick,
    /// Under pipeline parallelism, the tokens of the micro-batch whose
    /// backward pass stage 0 runs this tick (`s32[batch, seq]`), whose
    /// embedding it computes again.
    BackwardTokens,
    /// Under pipeline parallelism, a buffer the stage programs carry from
    /// tick to tick within one optimizer step: the stage inputs kept for
    /// the backward passes, and the activation and gradient received from
    /// the neighbouring stages.
    StageBuffer,
    Loss,
    GradNorm,
    LearningRate,
    /// A mixture of experts' token slots routed to each expert over the
    /// step's sparse layers and global batch (`f32[E]`).
    ExpertTokens,
    /// Of those, the slots a capacity factor dropped (`f32[]`).
    DroppedTokens,
}

impl Role {
    /// Whether an input with this role is state the step carries to the
    /// next step: an output with the same name and role updates it, in the
    /// same buffer.
    pub fn is_state(self) -> bool {
        matches!(
            self,
            Role::Parameter
                | Role::AdamM
                | Role::AdamV
                | Role::MasterWeight
                | Role::Step
                | Role::RngState
                | Role::GradAccumulator
                | Role::StageBuffer
        )
    }

    /// Whether an input with this role is the optimizer's state of one
    /// parameter (named by a prefix and the parameter's name), which
    /// ZeRO-1 divides over the DP replicas.
    pub fn is_optimizer_state(self) -> bool {
        matches!(self, Role::AdamM | Role::AdamV | Role::MasterWeight)
    }

    /// Whether `par` divides an input with this role over the DP replicas
    /// (each holding a flat shard of the rank's share): the optimizer
    /// state under ZeRO-1 and FSDP, the weights too under FSDP.
    pub fn is_divided_by(self, par: &hlatc_models::Parallelism) -> bool {
        match self {
            Role::Parameter => par.shards_weights(),
            role => role.is_optimizer_state() && par.shards_optimizer_state(),
        }
    }

    /// The roles of tensors that belong to one parameter.
    pub const PER_PARAMETER: [Role; 5] = [
        Role::Parameter,
        Role::MasterWeight,
        Role::AdamM,
        Role::AdamV,
        Role::GradAccumulator,
    ];

    /// Whether an input with this role belongs to one parameter, laid out
    /// as its share (or, under ZeRO-1, a shard of that).
    pub fn is_per_parameter(self) -> bool {
        Self::PER_PARAMETER.contains(&self)
    }
}

/// Where the carried state lives in the step's signature, found from the
/// roles and names of its inputs and outputs (never from positions): for
/// each state input, in input order, the output that updates it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateLayout {
    /// `(input index, output index)` for each state input, in input order.
    pub updates: Vec<(usize, usize)>,
}

impl StateLayout {
    /// Pairs each state input with the output of the same name and role;
    /// `None` when one has no such output (a signature that does not carry
    /// its state).
    pub fn of(inputs: &[TensorSpec], outputs: &[TensorSpec]) -> Option<StateLayout> {
        let updates = inputs
            .iter()
            .enumerate()
            .filter(|(_, s)| s.role.is_state())
            .map(|(i, s)| Some((i, updated_by(outputs, s)?)))
            .collect::<Option<Vec<_>>>()?;
        Some(StateLayout { updates })
    }

    /// The state inputs that have an output updating them, paired with it;
    /// the others are read and left as they are (a micro step reads the
    /// parameters it does not update).
    pub fn updated(inputs: &[TensorSpec], outputs: &[TensorSpec]) -> StateLayout {
        let updates = inputs
            .iter()
            .enumerate()
            .filter(|(_, s)| s.role.is_state())
            .filter_map(|(i, s)| Some((i, updated_by(outputs, s)?)))
            .collect();
        StateLayout { updates }
    }

    /// The module's aliasing: each updated input's buffer reused by its
    /// output.
    pub fn aliases(&self) -> Vec<IoAlias> {
        self.updates
            .iter()
            .map(|&(input, output)| IoAlias {
                output_index: vec![output as i64],
                parameter: input as i64,
                parameter_index: vec![],
                kind: AliasKind::MayAlias,
            })
            .collect()
    }
}

/// The output with the name and role of state input `s`.
fn updated_by(outputs: &[TensorSpec], s: &TensorSpec) -> Option<usize> {
    outputs
        .iter()
        .position(|o| o.role == s.role && o.name == s.name)
}

/// The output with role `role` (loss, grad norm, learning rate).
pub fn output_with_role(outputs: &[TensorSpec], role: Role) -> Option<usize> {
    outputs.iter().position(|o| o.role == role)
}

fn serialize_element_type<S: serde::Serializer>(t: &ElementType, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(t.name())
}

fn deserialize_element_type<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<ElementType, D::Error> {
    let name = <String as serde::Deserialize>::deserialize(d)?;
    ElementType::from_name(&name)
        .ok_or_else(|| serde::de::Error::custom(format!("unknown element type '{name}'")))
}

/// One input or output of the step.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct TensorSpec {
    pub name: String,
    /// Written in the manifest as XLA spells it (`bf16`).
    #[serde(
        serialize_with = "serialize_element_type",
        deserialize_with = "deserialize_element_type"
    )]
    pub dtype: ElementType,
    pub shape: Vec<i64>,
    pub role: Role,
    /// For a per-parameter tensor ([`Role::is_per_parameter`]: the
    /// parameter, its master weight, Adam moments or gradient
    /// accumulator), the stored name of the model parameter it belongs
    /// to. Readers take it from here: the tensor's name only spells it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameter: Option<String>,
    /// The decoder layer of that parameter; `None` for the embedding, the
    /// final norm and the LM head, and for a tensor of no parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<i64>,
}

/// The name prefix of each per-parameter role's tensors but the
/// parameter's own.
fn state_prefix(role: Role) -> Option<&'static str> {
    match role {
        Role::AdamM => Some("adam_m."),
        Role::AdamV => Some("adam_v."),
        Role::MasterWeight => Some("master."),
        Role::GradAccumulator => Some("grad."),
        _ => None,
    }
}

/// The name of the `role` tensor of parameter `parameter` (`adam_m.` and
/// the parameter's name): the one place such a name is made. Nothing
/// reads it back; a [`TensorSpec`] carries the parameter in its own field.
pub fn state_name(role: Role, parameter: &str) -> String {
    format!("{}{parameter}", state_prefix(role).unwrap_or(""))
}

/// A tensor that belongs to no parameter.
pub(crate) fn spec(name: &str, ty: ElementType, shape: &[i64], role: Role) -> TensorSpec {
    TensorSpec {
        name: name.to_string(),
        dtype: ty,
        shape: shape.to_vec(),
        role,
        parameter: None,
        layer: None,
    }
}

/// Parameter `p`'s tensor of the per-parameter `role`, of type `ty` and
/// shape `dims`.
pub(crate) fn parameter_spec(
    p: &ParamSpec,
    role: Role,
    ty: ElementType,
    dims: &[i64],
) -> TensorSpec {
    TensorSpec {
        name: state_name(role, &p.name),
        dtype: ty,
        shape: dims.to_vec(),
        role,
        parameter: Some(p.name.clone()),
        layer: p.layer,
    }
}
