//! Attributes of the ops that move elements: a pad's edges.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PadDim {
    pub low: i64,
    pub high: i64,
    pub interior: i64,
}
