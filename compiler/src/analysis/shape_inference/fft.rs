//! `fft`: complex-to-complex transforms keep their shape; the real ones
//! halve the last dimension on the way to complex and restore it back.

use super::{arr, array, refuse, AttributeError, ShapeError, ShapesError, TypeError};
use crate::ir::op::FftType;
use crate::ir::shape::{ArrayShape, Shape};

pub(super) fn fft(
    fft_type: FftType,
    fft_length: &[i64],
    operands: &[&Shape],
) -> Result<Shape, ShapeError> {
    let x = array(operands, 0)?;
    let rank = fft_length.len();
    if !(1..=3).contains(&rank) {
        return refuse(AttributeError::FftLength(rank));
    }
    if x.rank() < rank {
        return refuse(ShapesError::FftRank {
            fft_type,
            rank,
            operand: x.clone(),
        });
    }
    let inner = &x.dims[x.rank() - rank..];
    // The last transformed dimension of a real signal of length n holds
    // n/2 + 1 complex frequencies.
    let last = fft_length[rank - 1];
    let halved = last / 2 + 1;
    match fft_type {
        FftType::Fft | FftType::Ifft => {
            complex(fft_type, x)?;
            // XLA's inference checks only the type and rank here, but its
            // CPU transform reads the operand by fft_length: c64[3,8] with
            // fft_length={5,0} aborts the process ("array sizes are not
            // conformable"). So the two must agree unless the operand holds
            // nothing to transform (XLA's own tests run those).
            if x.element_count() != 0 {
                innermost_match(fft_type, x, inner, fft_length)?;
            }
            Ok(Shape::Array(x.clone()))
        }
        FftType::Rfft => {
            let Some(ty) = x.ty.complex_of() else {
                return refuse(TypeError::Rfft(x.ty));
            };
            innermost_match(fft_type, x, inner, fft_length)?;
            let mut dims = x.dims.clone();
            if last != 0 {
                *dims.last_mut().expect("rank checked above") = halved;
            }
            Ok(arr(ty, dims))
        }
        FftType::Irfft => {
            complex(fft_type, x)?;
            innermost_match(fft_type, x, &inner[..rank - 1], &fft_length[..rank - 1])?;
            // A zero-sized last dimension stays zero-sized, as in XLA.
            if (last != 0 || inner[rank - 1] != 0) && inner[rank - 1] != halved {
                return refuse(ShapesError::IrfftFrequencies {
                    length: last,
                    frequencies: halved,
                    operand: x.clone(),
                });
            }
            let mut dims = x.dims.clone();
            *dims.last_mut().expect("rank checked above") = last;
            let ty = x.ty.complex_component().expect("complex");
            Ok(arr(ty, dims))
        }
    }
}

/// The operand of a transform from complex values (FFT, IFFT, IRFFT).
fn complex(fft_type: FftType, x: &ArrayShape) -> Result<(), ShapeError> {
    if x.ty.is_complex() {
        Ok(())
    } else {
        refuse(TypeError::FftComplex { fft_type, ty: x.ty })
    }
}

fn innermost_match(
    fft_type: FftType,
    x: &ArrayShape,
    inner: &[i64],
    fft_length: &[i64],
) -> Result<(), ShapeError> {
    if inner == fft_length {
        Ok(())
    } else {
        refuse(ShapesError::FftLength {
            fft_type,
            fft_length: fft_length.to_vec(),
            operand: x.clone(),
        })
    }
}
