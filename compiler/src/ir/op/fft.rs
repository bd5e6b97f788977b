//! Attributes of `fft`: which transform.

spelled_enum! {
    /// Which transform `fft` computes (`fft_type=`, XLA's `FftType`).
    pub enum FftType {
        /// Complex to complex, forward.
        Fft = ("FFT", 0),
        /// Complex to complex, inverse.
        Ifft = ("IFFT", 1),
        /// Real to complex: the non-negative frequencies only.
        Rfft = ("RFFT", 2),
        /// Complex (non-negative frequencies) to real.
        Irfft = ("IRFFT", 3),
    }
}
