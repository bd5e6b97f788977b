//! Attributes of the ops ordered by tokens: which step of a point-to-point
//! transfer an op is and what it carries.

use super::description::Arity;

/// Which step of a point-to-point transfer: `send` and `recv` start one
/// (their value is the data, a u32 context and a token), `send-done` and
/// `recv-done` wait for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransferStep {
    Send,
    SendDone,
    Recv,
    RecvDone,
}

impl TransferStep {
    pub(super) const ALL: [TransferStep; 4] = [
        TransferStep::Send,
        TransferStep::SendDone,
        TransferStep::Recv,
        TransferStep::RecvDone,
    ];

    pub const fn opcode(self) -> &'static str {
        match self {
            TransferStep::Send => "send",
            TransferStep::SendDone => "send-done",
            TransferStep::Recv => "recv",
            TransferStep::RecvDone => "recv-done",
        }
    }

    pub fn from_opcode(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.opcode() == s)
    }

    /// A send takes its data and a token, a recv a token, and each done
    /// the transfer in flight.
    pub fn arity(self) -> Arity {
        match self {
            TransferStep::Send => Arity::Exactly(2),
            TransferStep::SendDone | TransferStep::Recv | TransferStep::RecvDone => {
                Arity::Exactly(1)
            }
        }
    }
}

/// A `send`, `recv` or their `-done`: the four share their attributes.
/// `channel_id` pairs a send with its recv (XLA's text may leave it out);
/// `is_host_transfer` says the other end is the host, not a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Transfer {
    pub step: TransferStep,
    pub channel_id: Option<i64>,
    pub is_host_transfer: bool,
}
