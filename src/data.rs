//! A deterministic synthetic language for training on XLA CPU: each
//! sequence starts at a random token and follows a fixed random permutation
//! of the vocabulary (token t+1 = perm[token t]). A model that reads the
//! current token can learn it; one that could see the future would have
//! nothing more to gain, which is what the causal-mask tests rely on.

use hlatc_compiler::Literal;
use hlatc_runtime::inputs::SplitMix64;

pub struct SyntheticData {
    perm: Vec<i32>,
    seed: u64,
    /// Draw every token independently instead (no structure to learn).
    iid: bool,
}

/// One batch: tokens and next-token targets, both `s32[batch, seq]`.
pub struct Batch {
    pub tokens: Literal,
    pub targets: Literal,
}

impl SyntheticData {
    pub fn permutation(vocab: i64, seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed ^ 0xDA7A);
        let mut perm: Vec<i32> = (0..vocab as i32).collect();
        for i in (1..perm.len()).rev() {
            let j = (rng.next_u64() % (i as u64 + 1)) as usize;
            perm.swap(i, j);
        }
        SyntheticData {
            perm,
            seed,
            iid: false,
        }
    }

    /// Independent uniform tokens: the best possible loss is ln(vocab).
    pub fn uniform(vocab: i64, seed: u64) -> Self {
        SyntheticData {
            iid: true,
            ..Self::permutation(vocab, seed)
        }
    }

    /// Batch number `index` (the same index always gives the same batch).
    pub fn batch(&self, index: u64, batch_size: i64, seq_len: i64) -> Batch {
        let mut rng = SplitMix64::new(self.seed.wrapping_mul(0x9E37_79B9).wrapping_add(index));
        let v = self.perm.len() as u64;
        let (mut tokens, mut targets) = (Vec::new(), Vec::new());
        for _ in 0..batch_size {
            let mut t = (rng.next_u64() % v) as i32;
            for _ in 0..seq_len {
                let next = if self.iid {
                    (rng.next_u64() % v) as i32
                } else {
                    self.perm[t as usize]
                };
                tokens.push(t);
                targets.push(next);
                t = next;
            }
        }
        let dims = vec![batch_size, seq_len];
        Batch {
            tokens: Literal::from_s32(dims.clone(), &tokens).expect("sizes match"),
            targets: Literal::from_s32(dims, &targets).expect("sizes match"),
        }
    }
}
