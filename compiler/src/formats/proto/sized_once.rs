//! A nested message that computes its encoded length once.
//!
//! prost sizes a nested message every time an enclosing message is sized
//! or written: the module sizes itself, then writes each computation (its
//! length prefix sizes it again), which writes each instruction (sized a
//! third time), whose shape is sized a fourth. On the 7B step that
//! re-sizing was a third of the proto writer's time, which runs beside the
//! text printer and is the longer of the two. Wrapped, each instruction,
//! computation and shape is sized once; the bytes are prost's.
//!
//! The length is forgotten whenever the message may change: through
//! `DerefMut`, a merge or a clear.

use prost::bytes::{Buf, BufMut};
use prost::encoding::{DecodeContext, WireType};
use prost::{DecodeError, Message};
use std::ops::{Deref, DerefMut};
use std::sync::OnceLock;

/// `M`, with its encoded length kept once computed.
#[derive(Default)]
pub struct SizedOnce<M> {
    message: M,
    len: OnceLock<usize>,
}

impl<M> SizedOnce<M> {
    pub fn new(message: M) -> Self {
        SizedOnce {
            message,
            len: OnceLock::new(),
        }
    }

    pub fn into_inner(self) -> M {
        self.message
    }
}

impl<M> From<M> for SizedOnce<M> {
    fn from(message: M) -> Self {
        SizedOnce::new(message)
    }
}

impl<M> Deref for SizedOnce<M> {
    type Target = M;

    fn deref(&self) -> &M {
        &self.message
    }
}

impl<M> DerefMut for SizedOnce<M> {
    /// The message may change: its length is computed again when asked.
    fn deref_mut(&mut self) -> &mut M {
        self.len = OnceLock::new();
        &mut self.message
    }
}

impl<M: Clone> Clone for SizedOnce<M> {
    fn clone(&self) -> Self {
        SizedOnce {
            message: self.message.clone(),
            len: self.len.clone(),
        }
    }
}

/// By the message.
impl<M: PartialEq> PartialEq for SizedOnce<M> {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message
    }
}

/// As the message.
impl<M: std::fmt::Debug> std::fmt::Debug for SizedOnce<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.message.fmt(f)
    }
}

impl<M: Message + Default> Message for SizedOnce<M> {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        self.message.encode_raw(buf)
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        self.deref_mut().merge_field(tag, wire_type, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        *self.len.get_or_init(|| self.message.encoded_len())
    }

    fn clear(&mut self) {
        self.deref_mut().clear()
    }
}
