//! Deterministic pseudo-random inputs for running a module without data.

use hlatc_compiler::{ArrayShape, ElementType, Literal, Scalar};

pub use hlatc_compiler::util::split_mix::SplitMix64;

/// The seed of replica `rank`'s inputs in a run seeded with `seed`: `seed`
/// itself for rank 0 (a one-device run's inputs), and for the others
/// `seed` mixed with the rank through SplitMix64's finalizer, so no two
/// ranks draw overlapping streams (`seed + rank` would give shifted copies
/// of one stream).
pub fn rank_seed(seed: u64, rank: u64) -> u64 {
    let mut z = rank;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    seed ^ z ^ (z >> 31)
}

/// Values for one parameter: floats (and both parts of a complex value)
/// uniform in [-1, 1), signed and unsigned
/// integers in [0, 16) and within their type (valid as small indices),
/// random booleans; 32- and
/// 64-bit unsigned integers use their full range (RNG states).
pub fn random_literal(shape: &ArrayShape, rng: &mut SplitMix64) -> Literal {
    let n = shape.element_count().max(0) as usize;
    let values = (0..n).map(|_| match shape.ty {
        // Unsigned powers of two, zero not among them: 2^-8..=2^8.
        ElementType::F8E8M0FNU => Scalar::Float(2f64.powi((rng.next_u64() % 17) as i32 - 8)),
        t if t.is_float() => Scalar::Float(rng.next_f64() * 2.0 - 1.0),
        t if t.is_complex() => {
            let re = rng.next_f64() * 2.0 - 1.0;
            Scalar::Complex(re, rng.next_f64() * 2.0 - 1.0)
        }
        ElementType::Pred => Scalar::Bool(rng.next_u64() & 1 == 1),
        ElementType::U32 => Scalar::UInt(rng.next_u64() >> 32),
        ElementType::U64 => Scalar::UInt(rng.next_u64()),
        // Below 16 and within the type: `s4` holds 0..=7, `u2` 0..=3.
        t => {
            let (_, hi) = t.integer_range().expect("every other type is an integer");
            Scalar::Int((rng.next_u64() % (hi.min(15) as u64 + 1)) as i64)
        }
    });
    Literal::from_scalar_iter(shape.ty, shape.dims.clone(), values)
        .expect("generated values fit their element type")
}
