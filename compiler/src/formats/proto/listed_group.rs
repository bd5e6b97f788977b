//! One group of `HloInstructionProto.replica_groups` (49), a
//! `ReplicaGroup` on the wire. A sharded step of 2,048 ranks has about a
//! thousand collectives over a handful of group sets, each 2,048 ids:
//! prost would size and encode every id of every collective again (twice
//! over, as each enclosing message sizes its parts). A group the writer
//! takes from a shared [`GroupList`] is encoded once per set
//! ([`GroupList::encoded_with`]) and copied; a group read from the wire
//! holds its ids. Both encode to the bytes prost writes for a
//! `ReplicaGroup { replica_ids }`, so the proto is unchanged. It is written
//! by hand from prost's encoding of that one field (1, packed int64s), so
//! the message table (`messages.rs`) names it without it naming the table
//! back; the table states its schema (a `ReplicaGroup`'s).

use crate::ir::collective::GroupList;
use prost::bytes::{Buf, BufMut};
use prost::encoding::{DecodeContext, WireType};
use prost::{DecodeError, Message};

/// A `ReplicaGroup`: its ids as read, or one group of a shared set.
#[derive(Clone)]
pub struct ListedGroup(Held);

#[derive(Clone)]
enum Held {
    Read(Vec<i64>),
    Shared { list: GroupList, index: usize },
}

/// `ReplicaGroup.replica_ids`' field number.
const REPLICA_IDS: u32 = 1;

impl ListedGroup {
    /// A group of these ids.
    pub fn new(replica_ids: Vec<i64>) -> Self {
        ListedGroup(Held::Read(replica_ids))
    }

    /// Every group of `list`, each copied from the set's bytes when
    /// encoded.
    pub fn all_of(list: &GroupList) -> Vec<ListedGroup> {
        (0..list.len())
            .map(|index| {
                ListedGroup(Held::Shared {
                    list: list.clone(),
                    index,
                })
            })
            .collect()
    }

    pub fn replica_ids(&self) -> &[i64] {
        match &self.0 {
            Held::Read(ids) => ids,
            Held::Shared { list, index } => &list.groups()[*index],
        }
    }
}

/// A group's ids as prost writes `ReplicaGroup.replica_ids` (packed): the
/// one encoding of a shared set.
fn encode_ids(ids: &[i64], buf: &mut Vec<u8>) {
    prost::encoding::int64::encode_packed(REPLICA_IDS, ids, buf);
}

impl Default for ListedGroup {
    fn default() -> Self {
        ListedGroup::new(Vec::new())
    }
}

impl From<Vec<i64>> for ListedGroup {
    fn from(replica_ids: Vec<i64>) -> Self {
        ListedGroup::new(replica_ids)
    }
}

/// By the ids, however held.
impl PartialEq for ListedGroup {
    fn eq(&self, other: &Self) -> bool {
        self.replica_ids() == other.replica_ids()
    }
}

impl std::fmt::Debug for ListedGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaGroup")
            .field("replica_ids", &self.replica_ids())
            .finish()
    }
}

impl Message for ListedGroup {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        match &self.0 {
            Held::Read(ids) => prost::encoding::int64::encode_packed(REPLICA_IDS, ids, buf),
            Held::Shared { list, index } => {
                buf.put_slice(list.encoded_with(encode_ids).group(*index))
            }
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        // Only a reader merges; a shared group becomes its ids first.
        let mut ids = match std::mem::replace(&mut self.0, Held::Read(Vec::new())) {
            Held::Read(ids) => ids,
            Held::Shared { list, index } => list.groups()[index].clone(),
        };
        // As prost's ReplicaGroup: its one field, any other skipped (the
        // reader's wire walk refuses a stray field by the schema first).
        let merged = if tag == REPLICA_IDS {
            prost::encoding::int64::merge_repeated(wire_type, &mut ids, buf, ctx)
        } else {
            prost::encoding::skip_field(wire_type, tag, buf, ctx)
        };
        self.0 = Held::Read(ids);
        merged
    }

    fn encoded_len(&self) -> usize {
        match &self.0 {
            Held::Read(ids) => prost::encoding::int64::encoded_len_packed(REPLICA_IDS, ids),
            Held::Shared { list, index } => list.encoded_with(encode_ids).group(*index).len(),
        }
    }

    fn clear(&mut self) {
        *self = ListedGroup::default();
    }
}
