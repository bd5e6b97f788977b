//! SplitMix64, the one pseudo-random stream every layer draws from: the
//! parameters' initialization, a run's synthetic data and the runtime's
//! test inputs. The same seed gives the same stream on every platform, so
//! a seed names the same weights and batches everywhere.

/// SplitMix64: tiny, fast and good enough for test inputs; the same seed
/// always gives the same stream on every platform.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The generator's whole state: `SplitMix64::new(g.state())` goes on
    /// where `g` is (what a checkpoint keeps).
    pub fn state(&self) -> u64 {
        self.0
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}
