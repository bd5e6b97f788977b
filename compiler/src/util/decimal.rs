//! Integers in decimal without the formatting machinery: replica groups
//! of thousands of ranks and the names passes make by the hundred are
//! written this way, and `write!` showed in their profiles.

/// The most digits a `u64` has.
const MAX_DIGITS: usize = 20;

/// Appends the decimal digits of `n` to `out`.
pub fn push_digits_str(out: &mut String, n: u64) {
    let mut digits = [0u8; MAX_DIGITS];
    // Digits are ASCII, so always UTF-8.
    out.push_str(std::str::from_utf8(digits_of(n, &mut digits)).unwrap_or_default());
}

/// `n`'s digits, most significant first, written at the end of `buf`.
fn digits_of(mut n: u64, buf: &mut [u8; MAX_DIGITS]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[at..]
}
