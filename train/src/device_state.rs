//! The state a trainer carries from step to step, kept on the devices:
//! each rank's on its own device, uploaded once, then donated to every
//! step whose output aliases it, that output becoming the next step's
//! input. Only the batch goes in and the statistics come out; the state
//! comes to the host when it is read (a checkpoint, `Trainer::state`).

use crate::run_error::RunError;
use crate::Error;
use hlatc_compiler::Literal;
use hlatc_runtime::{DeviceBuffer, Program};

/// One state input's buffer on its rank's device, or `None` once it was
/// donated to a step that failed (gone with it).
pub type Slot = Option<DeviceBuffer>;

/// Each rank's slots, in the trainer's state order.
pub type DeviceState = Vec<Vec<Slot>>;

/// `host` (each rank's values, in state order) on the devices: rank `r`'s
/// on device `r`, through `program`'s runtime.
pub fn upload(program: &Program, host: Vec<Vec<Literal>>) -> Result<DeviceState, Error> {
    host.iter()
        .enumerate()
        .map(|(rank, values)| upload_rank(program, values, rank))
        .collect()
}

/// One rank's values on its device.
fn upload_rank(program: &Program, values: &[Literal], rank: usize) -> Result<Vec<Slot>, Error> {
    values
        .iter()
        .map(|v| Ok(Some(program.to_device(v, rank)?)))
        .collect()
}

/// The buffer in `slot`, state input `name`'s, or why it is gone.
pub fn buffer<'a>(slot: &'a Slot, name: &str) -> Result<&'a DeviceBuffer, Error> {
    slot.as_ref().ok_or_else(|| {
        RunError::StateGone {
            input: name.to_string(),
        }
        .into()
    })
}

/// A host copy of state input `name`'s value in `slot`.
pub fn read(slot: &Slot, name: &str) -> Result<Literal, Error> {
    Ok(buffer(slot, name)?.to_literal()?)
}
