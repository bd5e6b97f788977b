//! neuronx-cc's module markers: pass-through custom calls that say where a
//! repeated module (a decoder layer) starts and ends, in the forward and
//! the backward pass, so the compiler's modular flow can compile one layer
//! and reuse it. A marker computes nothing: the marked tensor in, the same
//! tensor out. The targets and that convention are torch-neuronx's
//! (`torch_neuronx.xla_impl.custom_call_targets`); the SDK does not
//! document them further.

use crate::graph::builder::{BuildError, Builder};
use crate::ir::op::{CustomCall, CustomCallApiVersion, Op};
use crate::InstrId;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModuleMarker {
    StartForward,
    EndForward,
    StartBackward,
    EndBackward,
}

impl ModuleMarker {
    pub const ALL: [ModuleMarker; 4] = [
        ModuleMarker::StartForward,
        ModuleMarker::EndForward,
        ModuleMarker::StartBackward,
        ModuleMarker::EndBackward,
    ];

    /// The custom-call target neuronx-cc recognizes.
    pub fn target(self) -> &'static str {
        match self {
            ModuleMarker::StartForward => "AwsNeuronModuleMarkerStart-Forward",
            ModuleMarker::EndForward => "AwsNeuronModuleMarkerEnd-Forward",
            ModuleMarker::StartBackward => "AwsNeuronModuleMarkerStart-Backward",
            ModuleMarker::EndBackward => "AwsNeuronModuleMarkerEnd-Backward",
        }
    }

    /// The marker `op` is, if it is one.
    pub fn of(op: &Op) -> Option<ModuleMarker> {
        match op {
            Op::CustomCall(cc) => Self::ALL.into_iter().find(|m| m.target() == cc.target),
            _ => None,
        }
    }

    /// What marks the same boundary on the gradient: the backward pass
    /// meets a layer's end first, so a forward start becomes a backward
    /// end and a forward end a backward start.
    pub fn adjoint(self) -> ModuleMarker {
        match self {
            ModuleMarker::StartForward => ModuleMarker::EndBackward,
            ModuleMarker::EndForward => ModuleMarker::StartBackward,
            ModuleMarker::StartBackward => ModuleMarker::EndForward,
            ModuleMarker::EndBackward => ModuleMarker::StartForward,
        }
    }

    fn op(self) -> Op {
        Op::CustomCall(CustomCall {
            target: self.target().to_string(),
            api_version: CustomCallApiVersion::Original,
            ..Default::default()
        })
    }
}

impl Builder {
    /// `x` marked by `marker` (the same value).
    pub fn module_marker(
        &mut self,
        marker: ModuleMarker,
        x: InstrId,
    ) -> Result<InstrId, BuildError> {
        let shape = self.shape(x).clone();
        self.add(marker.op(), &[x], Some(shape))
    }
}
