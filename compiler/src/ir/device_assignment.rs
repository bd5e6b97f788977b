//! XLA's `DeviceAssignmentProto` (`HloModuleProto.device_assignment`, field
//! 15): which device runs each replica of each computation (partition).
//! torch-xla's proto dumps carry one. HLO text has no syntax for it, so it
//! lives in the proto only, as in XLA.

/// `devices[computation][replica]` is a device id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceAssignment {
    pub replica_count: i32,
    pub computation_count: i32,
    pub devices: Vec<Vec<i64>>,
}

/// Why a device assignment is not one XLA's `DeviceAssignment::Deserialize`
/// accepts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeviceAssignmentError {
    #[error("device_assignment has replica_count {replica_count} and computation_count {computation_count}; both must be positive")]
    Counts {
        replica_count: i32,
        computation_count: i32,
    },
    /// Another count of device lists than computations.
    #[error("device_assignment lists devices for {lists} computation(s), its computation_count is {computation_count}")]
    ComputationLists {
        lists: usize,
        computation_count: i32,
    },
    /// A computation's list has another count of devices than replicas.
    #[error("device_assignment gives computation {computation} {devices} device(s), its replica_count is {replica_count}")]
    ReplicaDevices {
        computation: usize,
        devices: usize,
        replica_count: i32,
    },
    /// The first device that is negative or already runs a replica.
    #[error("device_assignment uses device {0} twice or as a negative id")]
    Device(i64),
}

impl DeviceAssignment {
    /// What XLA's `DeviceAssignment::Deserialize` requires: positive
    /// counts, one list per computation, one device per replica. A device
    /// may not run two replicas or computations.
    pub fn check(&self) -> Result<(), DeviceAssignmentError> {
        if self.replica_count <= 0 || self.computation_count <= 0 {
            return Err(DeviceAssignmentError::Counts {
                replica_count: self.replica_count,
                computation_count: self.computation_count,
            });
        }
        if self.devices.len() != self.computation_count as usize {
            return Err(DeviceAssignmentError::ComputationLists {
                lists: self.devices.len(),
                computation_count: self.computation_count,
            });
        }
        let mut seen = std::collections::BTreeSet::new();
        for (c, replicas) in self.devices.iter().enumerate() {
            if replicas.len() != self.replica_count as usize {
                return Err(DeviceAssignmentError::ReplicaDevices {
                    computation: c,
                    devices: replicas.len(),
                    replica_count: self.replica_count,
                });
            }
            if let Some(d) = replicas.iter().find(|&&d| d < 0 || !seen.insert(d)) {
                return Err(DeviceAssignmentError::Device(*d));
            }
        }
        Ok(())
    }

    /// Whether it puts the program on exactly one device, and which.
    pub fn single_device(&self) -> Option<i64> {
        match self.devices.as_slice() {
            [replicas] => match replicas.as_slice() {
                [d] => Some(*d),
                _ => None,
            },
            _ => None,
        }
    }
}

impl std::fmt::Display for DeviceAssignment {
    /// `2 replica(s) x 1 computation(s) on devices [[0, 1]]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} replica(s) x {} computation(s) on devices {:?}",
            self.replica_count, self.computation_count, self.devices
        )
    }
}
