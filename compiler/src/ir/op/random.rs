//! Attributes of the random-number ops.

spelled_enum! {
    /// `rng-bit-generator`'s algorithm (`algorithm=rng_three_fry`).
    pub enum RngAlgorithm {
        Default = ("rng_default", 0),
        ThreeFry = ("rng_three_fry", 1),
        Philox = ("rng_philox", 2),
    }
}

spelled_enum! {
    /// `rng`'s distribution (`distribution=` in text, `RandomDistribution`
    /// in the proto).
    pub enum RngDistribution {
        Uniform = ("rng_uniform", 1),
        Normal = ("rng_normal", 2),
    }
}
