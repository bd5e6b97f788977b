//! `fft`: complex-to-complex transforms keep their shape; the real ones
//! halve the last dimension on the way to complex and restore it back.

use super::{arr, array, invalid, ShapeError};
use crate::ir::op::FftType;
use crate::ir::shape::{ArrayShape, Shape};

pub(super) fn fft(
    fft_type: FftType,
    fft_length: &[i64],
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    let x = array(operands, 0)?;
    let name = fft_type.name();
    let rank = fft_length.len();
    if !(1..=3).contains(&rank) {
        return invalid(format!(
            "fft transforms 1 to 3 dimensions, fft_length has {rank}"
        ));
    }
    if x.rank() < rank {
        return invalid(format!(
            "{name} of {rank} dimensions needs an operand of rank {rank} or more, got {x}"
        ));
    }
    let inner = &x.dims[x.rank() - rank..];
    // The last transformed dimension of a real signal of length n holds
    // n/2 + 1 complex frequencies.
    let last = fft_length[rank - 1];
    let halved = last / 2 + 1;
    match fft_type {
        FftType::Fft | FftType::Ifft => {
            require(x.ty.is_complex(), || {
                format!("{name} transforms complex values, got {}", x.ty)
            })?;
            // XLA's inference checks only the type and rank here, but its
            // CPU transform reads the operand by fft_length: c64[3,8] with
            // fft_length={5,0} aborts the process ("array sizes are not
            // conformable"). So the two must agree unless the operand holds
            // nothing to transform (XLA's own tests run those).
            if x.element_count() != 0 {
                innermost_match(name, x, inner, fft_length)?;
            }
            Ok(Shape::Array(x.clone()))
        }
        FftType::Rfft => {
            let Some(ty) = x.ty.complex_of() else {
                return invalid(format!("RFFT transforms f32 or f64, got {}", x.ty));
            };
            innermost_match(name, x, inner, fft_length)?;
            let mut dims = x.dims.clone();
            if last != 0 {
                *dims.last_mut().expect("rank checked above") = halved;
            }
            Ok(arr(ty, dims))
        }
        FftType::Irfft => {
            require(x.ty.is_complex(), || {
                format!("IRFFT transforms complex values, got {}", x.ty)
            })?;
            innermost_match(name, x, &inner[..rank - 1], &fft_length[..rank - 1])?;
            // A zero-sized last dimension stays zero-sized, as in XLA.
            if (last != 0 || inner[rank - 1] != 0) && inner[rank - 1] != halved {
                return invalid(format!(
                    "IRFFT of length {last} needs {halved} frequencies in the last dimension of {x}"
                ));
            }
            let mut dims = x.dims.clone();
            *dims.last_mut().expect("rank checked above") = last;
            let ty = x.ty.complex_component().expect("complex");
            Ok(arr(ty, dims))
        }
    }
}

fn require(ok: bool, message: impl FnOnce() -> String) -> Result<(), ShapeError> {
    if ok {
        Ok(())
    } else {
        invalid(message())
    }
}

fn innermost_match(
    name: &str,
    x: &ArrayShape,
    inner: &[i64],
    fft_length: &[i64],
) -> Result<(), ShapeError> {
    require(inner == fft_length, || {
        format!("{name} with fft_length={fft_length:?} needs those innermost dimensions, got {x}")
    })
}
