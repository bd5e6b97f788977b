//! The 8-bit float formats XLA knows (`f8e5m2`, `f8e4m3fn`, ...): decoding
//! a byte to its value and rounding a value to the nearest byte, ties to
//! even, as XLA's literals (through `ml_dtypes`) do.
//!
//! Three families differ in what their extreme codes mean:
//! - IEEE-like (`f8e5m2`, `f8e4m3`, `f8e3m4`): the all-ones exponent holds
//!   infinities and NaNs;
//! - "FN" (`f8e4m3fn`): finite, and only the all-ones code is NaN;
//! - "FNUZ" (`f8e4m3fnuz`, `f8e5m2fnuz`, `f8e4m3b11fnuz`): finite, one
//!   zero, and the code of negative zero (0x80) is NaN.

use crate::types::ElementType;

/// What a format's extreme codes mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Specials {
    Ieee,
    FiniteAllOnesNan,
    FiniteNegativeZeroNan,
}

/// An 8-bit float: one sign bit, `exponent` bits, `mantissa` bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    pub exponent: u32,
    pub mantissa: u32,
    pub bias: i32,
    pub specials: Specials,
}

impl Format {
    pub fn of(ty: ElementType) -> Option<Format> {
        use Specials::*;
        let (exponent, mantissa, bias, specials) = match ty {
            ElementType::F8E5M2 => (5, 2, 15, Ieee),
            ElementType::F8E4M3 => (4, 3, 7, Ieee),
            ElementType::F8E3M4 => (3, 4, 3, Ieee),
            ElementType::F8E4M3FN => (4, 3, 7, FiniteAllOnesNan),
            ElementType::F8E4M3FNUZ => (4, 3, 8, FiniteNegativeZeroNan),
            ElementType::F8E5M2FNUZ => (5, 2, 16, FiniteNegativeZeroNan),
            ElementType::F8E4M3B11FNUZ => (4, 3, 11, FiniteNegativeZeroNan),
            _ => return None,
        };
        Some(Format {
            exponent,
            mantissa,
            bias,
            specials,
        })
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
        }
    }

    /// The code of a positive quiet NaN: the top mantissa bit under an
    /// all-ones exponent (IEEE-like), the all-ones code (FN), or the code
    /// of negative zero (FNUZ).
    pub fn nan(self) -> u8 {
        match self.specials {
            Specials::Ieee => {
                ((self.max_exponent_code() << self.mantissa) | (1 << (self.mantissa - 1))) as u8
            }
            Specials::FiniteAllOnesNan => 0x7f,
            Specials::FiniteNegativeZeroNan => 0x80,
        }
    }

    /// The value of `code`.
    pub fn decode(self, code: u8) -> f64 {
        let negative = code & 0x80 != 0;
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

    /// `v` rounded to the nearest code, ties to even. `None` when a finite
    /// `v` rounds beyond the largest finite value (XLA refuses such a
    /// literal); an infinity becomes NaN in a format without infinities.
    pub fn encode(self, v: f64) -> Option<u8> {
        let sign = if v.is_sign_negative() { 0x80u8 } else { 0 };
        if v.is_nan() {
            return Some(match self.specials {
                Specials::FiniteNegativeZeroNan => self.nan(),
                _ => sign | self.nan(),
            });
        }
        if v.is_infinite() {
            return Some(match self.specials {
                Specials::Ieee => sign | ((self.max_exponent_code() << self.mantissa) as u8),
                Specials::FiniteAllOnesNan => sign | self.nan(),
                Specials::FiniteNegativeZeroNan => self.nan(),
            });
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
            // further, and rounding to it overflows.
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
            if round_up {
                up?
            } else {
                below
            }
        };
        if code == 0 && self.specials == Specials::FiniteNegativeZeroNan {
            return Some(0);
        }
        Some(sign | code)
    }
}
