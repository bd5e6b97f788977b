//! The module's header: the attributes after its name, and what they say
//! about the module once its computations are read.

use super::*;
use crate::ir::module::{DeviceCounts, EntryLayout, SpmdPropagation};
use crate::ir::stack_frames::StackFrameIndex;

/// The header's attributes as read, kept until the module they describe
/// is built.
#[derive(Default)]
pub(super) struct ModuleHeader<'i> {
    aliases: Vec<IoAlias>,
    donors: Vec<BufferDonor>,
    frontend_attributes: BTreeMap<String, String>,
    /// `entry_computation_layout`: where it is, the parameters and result.
    entry_layout: Option<(Span<'i>, Vec<Shape>, Shape)>,
    /// Where `is_scheduled=true` is written, when it is.
    is_scheduled: Option<Span<'i>>,
    spmd: SpmdPropagation,
    devices: DeviceCounts,
    alias_passthrough_params: bool,
}

impl<'i> ModuleHeader<'i> {
    pub(super) fn read(attributes: &[syntax::ModuleAttribute<'i>]) -> Result<Self, ParseError> {
        let mut header = ModuleHeader::default();
        for a in attributes {
            match a {
                syntax::ModuleAttribute::InputOutputAlias(entries) => {
                    for e in entries {
                        header.aliases.push(alias_entry(e)?);
                    }
                }
                syntax::ModuleAttribute::BufferDonor(entries) => {
                    for e in entries {
                        header.donors.push(BufferDonor {
                            parameter: int(&e.parameter)?,
                            parameter_index: shape_index(&e.parameter_index)?,
                        });
                    }
                }
                syntax::ModuleAttribute::EntryComputationLayout { at, program } => {
                    let parameters = program
                        .parameters
                        .iter()
                        .map(shape)
                        .collect::<Result<Vec<_>, _>>()?;
                    header.entry_layout = Some((*at, parameters, shape(&program.result)?));
                }
                syntax::ModuleAttribute::Other(a) => {
                    let (key, value, at) = attribute(a)?;
                    header.attribute(key, value, at.attribute)?;
                }
            }
        }
        Ok(header)
    }

    /// One of the attributes without a rule of their own.
    fn attribute(&mut self, key: &str, value: Value, at: Span<'i>) -> Result<(), ParseError> {
        match key {
            "frontend_attributes" => self.frontend_attributes = value.into_string_map(&at)?,
            // Written by XLA with their default values; anything else
            // would be lost, so it is refused by name.
            "is_scheduled" if value.is_word("false") => {}
            "is_scheduled" if value.is_word("true") => self.is_scheduled = Some(at),
            "allow_spmd_sharding_propagation_to_output" => self.spmd.to_output = bools(value, &at)?,
            "allow_spmd_sharding_propagation_to_parameters" => {
                self.spmd.to_parameters = bools(value, &at)?
            }
            "replica_count" => self.devices.replica_count = device_count(key, &value, &at)?,
            "num_partitions" => self.devices.num_partitions = device_count(key, &value, &at)?,
            "alias_passthrough_params" => {
                self.alias_passthrough_params = match value {
                    v if v.is_word("true") => true,
                    v if v.is_word("false") => false,
                    other => {
                        return err_at(
                            &at,
                            format!(
                                "'alias_passthrough_params' is true or false, got {}",
                                other.kind()
                            ),
                        )
                    }
                }
            }
            // The dedicated rule did not read it: its shapes use syntax
            // hlatc does not read yet.
            "entry_computation_layout" => {
                return err_at(
                    &at,
                    format!(
                    "entry_computation_layout {}: its shapes use syntax hlatc does not read yet \
                         (layout tiles, memory spaces or dynamic dimensions)",
                    value.kind()
                ),
                )
            }
            _ => return err_at(&at, format!("unsupported module attribute '{key}'")),
        }
        Ok(())
    }

    /// The module of `computations`, as the header describes it: its
    /// schedule checked and the entry's layout kept where it differs.
    pub(super) fn into_module(
        self,
        name: &str,
        computations: Vec<Computation>,
        entry: usize,
        stack_frames: StackFrameIndex,
    ) -> Result<Module, ParseError> {
        let mut m = Module {
            name: name.to_string(),
            computations,
            entry: ComputationId::new(entry),
            input_output_alias: self.aliases,
            buffer_donors: self.donors,
            frontend_attributes: self.frontend_attributes,
            is_scheduled: self.is_scheduled.is_some(),
            entry_layout: None,
            stack_frames,
            allow_spmd_sharding_propagation: self.spmd,
            alias_passthrough_params: self.alias_passthrough_params,
            devices: self.devices,
            device_assignment: None,
        };
        if let Some(at) = self.is_scheduled {
            check_schedule(&m, &at)?;
        }
        if let Some((at, params, result)) = self.entry_layout {
            if m.get_computation(m.entry).is_some() {
                m.entry_layout = EntryLayout::against(&m, params, result)
                    .or_else(|e| err_at(&at, e.to_string()))?;
            }
        }
        Ok(m)
    }
}

pub(super) fn alias_entry(e: &syntax::AliasEntry<'_>) -> Result<IoAlias, ParseError> {
    Ok(IoAlias {
        output_index: shape_index(&e.output_index)?,
        parameter: int(&e.parameter)?,
        parameter_index: shape_index(&e.parameter_index)?,
        kind: e.kind.unwrap_or(AliasKind::MayAlias),
    })
}
