//! Attributes of the collectives: which asynchronous collective a `-done`
//! completes (the replica groups are `ir::collective`'s).

/// Which asynchronous collective a `-done` completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AsyncCollective {
    AllReduce,
    AllGather,
    CollectivePermute,
}
