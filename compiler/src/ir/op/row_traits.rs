//! What a row of the op table says of an op beyond its attributes: how
//! many operands it takes and its traits. A file of its own because the
//! families' attribute types use them and the table uses the families'
//! types.

/// How many operands an op takes, as a row of the table says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    Exactly(usize),
    /// The count depends on the op's attributes or operands; its shape
    /// rule checks it.
    Variadic,
}

/// What an op is beyond its attributes, as a row of the table says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpTraits(u8);

impl OpTraits {
    pub const NONE: OpTraits = OpTraits(0);
    /// Two instructions with the op and the same operands may differ: a
    /// parameter, a random draw, a barrier, or an op that runs a
    /// computation as a whole (a loop, a branch, a fusion).
    pub const IMPURE: OpTraits = OpTraits(1);
    /// Exchanges data between devices.
    pub const COLLECTIVE: OpTraits = OpTraits(2);
    /// Acts beyond its value: a transfer, infeed or outfeed.
    pub const SIDE_EFFECT: OpTraits = OpTraits(4);
    /// Carries its float operands' element type through to its result,
    /// whatever float type that is (see [`super::Op::carries_float_type`]).
    pub const CARRIES_FLOAT_TYPE: OpTraits = OpTraits(8);

    pub const fn with(self, other: OpTraits) -> OpTraits {
        OpTraits(self.0 | other.0)
    }

    pub const fn has(self, other: OpTraits) -> bool {
        self.0 & other.0 == other.0
    }
}
