//! Float attributes kept by their bits, so ops stay `Eq` and `Hash` and a
//! value comes back exactly.

/// An f32 attribute kept by its bits (`epsilon=0.001`), so ops stay `Eq`
/// and `Hash` and the value comes back exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct F32Bits(pub u32);

impl F32Bits {
    pub fn new(v: f32) -> Self {
        F32Bits(v.to_bits())
    }

    pub fn get(self) -> f32 {
        f32::from_bits(self.0)
    }
}

impl std::fmt::Display for F32Bits {
    /// The shortest decimal that reads back to the same f32.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.get())
    }
}

/// An f64 attribute kept by its bits (a tolerance, a statistic), so
/// annotations stay `Eq` and `Hash` and the value comes back exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct F64Bits(pub u64);

impl F64Bits {
    pub fn new(v: f64) -> Self {
        F64Bits(v.to_bits())
    }

    pub fn get(self) -> f64 {
        f64::from_bits(self.0)
    }
}

impl std::fmt::Display for F64Bits {
    /// The shortest decimal that reads back to the same f64, with an
    /// exponent outside the usual range. (XLA prints these with six
    /// digits, and loses the rest.)
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::ir::literal::write_float(f, self.get(), self.get())
    }
}
