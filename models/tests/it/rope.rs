//! Rotary embeddings' frequencies under Llama 3's scaling.

use hlatc_models::rope::inverse_frequencies;
use hlatc_models::RopeScaling;

#[test]
fn llama3_keeps_short_wavelengths_and_stretches_long_ones() {
    let s = RopeScaling::Llama3 {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: 8192,
    };
    let plain = inverse_frequencies(500000.0, 128, None);
    let scaled = inverse_frequencies(500000.0, 128, Some(&s));
    assert_eq!(scaled[0], plain[0], "the fastest rotation is kept");
    assert!(
        (scaled[63] - plain[63] / 8.0).abs() < 1e-12,
        "the slowest is divided by 8"
    );
    assert!(scaled.iter().zip(&plain).all(|(s, p)| s <= p));
}
