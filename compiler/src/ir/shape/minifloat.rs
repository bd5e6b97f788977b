//! The narrow float formats XLA knows (`f8e5m2`, `f8e4m3fn`, ...,
//! `f4e2m1fn`, `f8e8m0fnu`): decoding a code to its value and rounding a
//! value to the nearest code, as XLA's literals (through `ml_dtypes`) do.
//!
//! Five families differ in what their extreme codes mean:
//! - IEEE-like (`f8e5m2`, `f8e4m3`, `f8e3m4`): the all-ones exponent holds
//!   infinities and NaNs;
//! - "FN" (`f8e4m3fn`): finite, and only the all-ones code is NaN;
//! - "FNUZ" (`f8e4m3fnuz`, `f8e5m2fnuz`, `f8e4m3b11fnuz`): finite, one
//!   zero, and the code of negative zero (0x80) is NaN;
//! - `f4e2m1fn` (4 bits, the MX element type): finite, no NaN at all, and
//!   values past its largest saturate to it;
//! - `f8e8m0fnu` (the MX scale type): no sign, no zero, no mantissa: code
//!   `c` is `2^(c-127)`, 0xff is NaN, and ties round up.

use crate::ir::shape::ElementType;

/// What a format's extreme codes mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Specials {
    Ieee,
    FiniteAllOnesNan,
    FiniteNegativeZeroNan,
    /// `f4e2m1fn`: every code a finite value.
    FiniteNoNan,
    /// `f8e8m0fnu`: unsigned powers of two, the all-ones code NaN.
    UnsignedPowersOfTwo,
}

/// A narrow float: a sign bit (unless unsigned), `exponent` bits,
/// `mantissa` bits, `bits` in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    pub bits: u32,
    pub exponent: u32,
    pub mantissa: u32,
    pub bias: i32,
    pub specials: Specials,
}

impl Format {
    pub fn of(ty: ElementType) -> Option<Format> {
        use Specials::*;
        let (bits, exponent, mantissa, bias, specials) = match ty {
            ElementType::F8E5M2 => (8, 5, 2, 15, Ieee),
            ElementType::F8E4M3 => (8, 4, 3, 7, Ieee),
            ElementType::F8E3M4 => (8, 3, 4, 3, Ieee),
            ElementType::F8E4M3FN => (8, 4, 3, 7, FiniteAllOnesNan),
            ElementType::F8E4M3FNUZ => (8, 4, 3, 8, FiniteNegativeZeroNan),
            ElementType::F8E5M2FNUZ => (8, 5, 2, 16, FiniteNegativeZeroNan),
            ElementType::F8E4M3B11FNUZ => (8, 4, 3, 11, FiniteNegativeZeroNan),
            ElementType::F4E2M1FN => (4, 2, 1, 1, FiniteNoNan),
            ElementType::F8E8M0FNU => (8, 8, 0, 127, UnsignedPowersOfTwo),
            _ => return None,
        };
        Some(Format {
            bits,
            exponent,
            mantissa,
            bias,
            specials,
        })
    }

    /// The sign bit's mask; 0 for an unsigned format.
    pub fn sign_mask(self) -> u8 {
        match self.specials {
            Specials::UnsignedPowersOfTwo => 0,
            _ => 1 << (self.bits - 1),
        }
    }

    fn max_exponent_code(self) -> u32 {
        (1 << self.exponent) - 1
    }

    fn mantissa_mask(self) -> u32 {
        (1 << self.mantissa) - 1
    }

    /// The code of the largest finite value; every code from 0 up to it
    /// is finite, in increasing order of value.
    fn largest_finite_code(self) -> u8 {
        match self.specials {
            Specials::Ieee => ((self.max_exponent_code() << self.mantissa) - 1) as u8,
            Specials::FiniteAllOnesNan => 0x7e,
            Specials::FiniteNegativeZeroNan => 0x7f,
            Specials::FiniteNoNan => self.sign_mask() - 1,
            Specials::UnsignedPowersOfTwo => 0xfe,
        }
    }

    /// The code of a positive quiet NaN: the top mantissa bit under an
    /// all-ones exponent (IEEE-like), the all-ones code (FN, E8M0), or the
    /// code of negative zero (FNUZ). `f4e2m1fn` has none: what `ml_dtypes`
    /// makes of a NaN, zero of the opposite sign.
    pub fn nan(self) -> u8 {
        match self.specials {
            Specials::Ieee => {
                ((self.max_exponent_code() << self.mantissa) | (1 << (self.mantissa - 1))) as u8
            }
            Specials::FiniteAllOnesNan => 0x7f,
            Specials::FiniteNegativeZeroNan => 0x80,
            Specials::FiniteNoNan => self.sign_mask(),
            Specials::UnsignedPowersOfTwo => 0xff,
        }
    }

    /// The value of `code`.
    pub fn decode(self, code: u8) -> f64 {
        if self.specials == Specials::UnsignedPowersOfTwo {
            return if code == 0xff {
                f64::NAN
            } else {
                2f64.powi(i32::from(code) - self.bias)
            };
        }
        let negative = code & self.sign_mask() != 0;
        let e = (u32::from(code) >> self.mantissa) & self.max_exponent_code();
        let m = u32::from(code) & self.mantissa_mask();
        let magnitude = match self.specials {
            Specials::FiniteNegativeZeroNan if code == 0x80 => return f64::NAN,
            Specials::FiniteAllOnesNan
                if e == self.max_exponent_code() && m == self.mantissa_mask() =>
            {
                f64::NAN
            }
            Specials::Ieee if e == self.max_exponent_code() => {
                if m == 0 {
                    f64::INFINITY
                } else {
                    f64::NAN
                }
            }
            _ => {
                let (significand, exp) = if e == 0 {
                    (f64::from(m), 1 - self.bias - self.mantissa as i32)
                } else {
                    (
                        f64::from(m | (1 << self.mantissa)),
                        e as i32 - self.bias - self.mantissa as i32,
                    )
                };
                significand * 2f64.powi(exp)
            }
        };
        if negative {
            -magnitude
        } else {
            magnitude
        }
    }

    /// The largest finite value.
    pub fn max(self) -> f64 {
        self.decode(self.largest_finite_code())
    }

    /// `v` rounded to the nearest code, ties to even (`f8e8m0fnu`: see
    /// `encode_power_of_two`). `None` when a finite `v` has no code: it rounds beyond
    /// the largest finite value, or is zero or negative in `f8e8m0fnu`
    /// (XLA refuses such a literal). An infinity becomes NaN in a format
    /// without infinities; `f4e2m1fn` saturates instead.
    pub fn encode(self, v: f64) -> Option<u8> {
        let sign = if v.is_sign_negative() {
            self.sign_mask()
        } else {
            0
        };
        if v.is_nan() {
            return Some(match self.specials {
                Specials::FiniteNegativeZeroNan | Specials::UnsignedPowersOfTwo => self.nan(),
                Specials::FiniteNoNan => sign ^ self.nan(),
                _ => sign | self.nan(),
            });
        }
        if v.is_infinite() {
            return Some(match self.specials {
                Specials::Ieee => sign | ((self.max_exponent_code() << self.mantissa) as u8),
                Specials::FiniteAllOnesNan => sign | self.nan(),
                Specials::FiniteNegativeZeroNan | Specials::UnsignedPowersOfTwo => self.nan(),
                Specials::FiniteNoNan => sign | self.largest_finite_code(),
            });
        }
        if self.specials == Specials::UnsignedPowersOfTwo {
            return encode_power_of_two(v);
        }
        let a = v.abs();
        // The codes 0..=top rise with their value: find the last one at or
        // below `a` by bisection, then round between it and the next.
        let top = self.largest_finite_code();
        let (mut below, mut past) = (0u8, top + 1);
        while past - below > 1 {
            let mid = below + (past - below) / 2;
            if self.decode(mid) <= a {
                below = mid;
            } else {
                past = mid;
            }
        }
        let lo = self.decode(below);
        let code = if lo == a {
            below
        } else {
            // Past the largest finite value, the next step up is one ulp
            // further, and rounding to it overflows (or saturates).
            let (hi, up) = if below < top {
                (self.decode(below + 1), Some(below + 1))
            } else {
                (lo + (lo - self.decode(below - 1)), None)
            };
            let round_up = match (a - lo).partial_cmp(&(hi - a)) {
                Some(std::cmp::Ordering::Less) => false,
                Some(std::cmp::Ordering::Greater) => true,
                _ => !below.is_multiple_of(2),
            };
            match (round_up, up) {
                (false, _) => below,
                (true, Some(up)) => up,
                (true, None) if self.specials == Specials::FiniteNoNan => top,
                (true, None) => return None,
            }
        };
        if code == 0 && self.specials == Specials::FiniteNegativeZeroNan {
            return Some(0);
        }
        Some(sign | code)
    }
}

/// `v` as `f8e8m0fnu`, as XLA's text reader converts a double (measured
/// through jaxlib): from 2^-126 up, the exponent is the code, one up where
/// the mantissa is at least half (ties up); below it, 2^-127 (code 0) for
/// anything up to 2^-127 and 2^-126 for anything above. Zero, a negative
/// value, or one that rounds past the largest (2^127) has no code: `None`.
/// (`ml_dtypes` through numpy rounds to f32 first, which differs only for
/// values within an f32 rounding of 2^-127.)
fn encode_power_of_two(v: f64) -> Option<u8> {
    if v <= 0.0 || v.is_sign_negative() {
        return None;
    }
    if v < 2f64.powi(-126) {
        return Some(u8::from(v > 2f64.powi(-127)));
    }
    let bits = v.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let half = 1u64 << 51;
    let code = exponent + 127 + i64::from(bits & ((1 << 52) - 1) >= half);
    u8::try_from(code).ok().filter(|&c| c != 0xff)
}
