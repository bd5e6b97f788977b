//! A deterministic synthetic language for training on XLA CPU: each
//! sequence starts at a random token and follows a fixed random permutation
//! of the vocabulary (token t+1 = perm[token t]). A model that reads the
//! current token can learn it; one that could see the future would have
//! nothing more to gain, which is what the causal-mask tests rely on.

use crate::train_step::Role;
use hlatc_compiler::util::split_mix::SplitMix64;
use hlatc_compiler::Literal;

pub struct SyntheticData {
    perm: Vec<i32>,
    seed: u64,
    /// Draw every token independently instead (no structure to learn).
    iid: bool,
    /// Per thousand tokens, how many are drawn uniformly instead of
    /// following the permutation: the language's entropy, which no model
    /// learns away.
    noise_per_mille: u64,
}

/// One batch: tokens and next-token targets, both `s32[batch, seq]`, and
/// for packed rows the document of each token.
pub struct Batch {
    pub tokens: Literal,
    pub targets: Literal,
    pub segment_ids: Option<Literal>,
}

impl Batch {
    /// The step's batch inputs in their order: tokens, targets, and the
    /// segment ids of packed rows.
    pub fn inputs(&self) -> impl Iterator<Item = Literal> + '_ {
        [&self.tokens, &self.targets]
            .into_iter()
            .chain(&self.segment_ids)
            .cloned()
    }

    /// The batch tensor an input with `role` takes; `None` for a role that
    /// is not part of a batch (or segment ids of unpacked rows).
    /// How many of its targets count in the loss (not the ignore index),
    /// as the `token_count` input (`s32[]`) a micro step of gradient
    /// accumulation takes: of the whole optimizer step's batch.
    pub fn token_count(&self) -> Literal {
        let counted = self
            .targets
            .to_i64_vec()
            .iter()
            .filter(|&&t| t != hlatc_models::IGNORE_INDEX)
            .count();
        let counted = i32::try_from(counted).unwrap_or(i32::MAX);
        Literal::from_s32(vec![], &[counted]).expect("one s32")
    }

    pub fn for_role(&self, role: Role) -> Option<&Literal> {
        match role {
            Role::Tokens => Some(&self.tokens),
            Role::Targets => Some(&self.targets),
            Role::SegmentIds => self.segment_ids.as_ref(),
            _ => None,
        }
    }
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
            noise_per_mille: 0,
        }
    }

    /// The permutation language with `per_mille` of every thousand next
    /// tokens drawn uniformly: its loss cannot fall below the entropy of
    /// that mixture, so two runs are compared where both have learned
    /// what can be learned, not at a loss near zero.
    pub fn noisy_permutation(vocab: i64, seed: u64, per_mille: u64) -> Self {
        SyntheticData {
            noise_per_mille: per_mille.min(1000),
            ..Self::permutation(vocab, seed)
        }
    }

    /// The token after `t`: the permutation's, or a uniform draw (every
    /// one under [`SyntheticData::uniform`], a share of them under
    /// [`SyntheticData::noisy_permutation`]).
    fn next_token(&self, rng: &mut SplitMix64, t: i64) -> i64 {
        let v = self.perm.len() as u64;
        let uniform =
            self.iid || (self.noise_per_mille > 0 && rng.next_u64() % 1000 < self.noise_per_mille);
        if uniform {
            (rng.next_u64() % v) as i64
        } else {
            i64::from(self.perm[t as usize])
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
                let next = self.next_token(&mut rng, i64::from(t)) as i32;
                tokens.push(t);
                targets.push(next);
                t = next;
            }
        }
        let dims = vec![batch_size, seq_len];
        Batch {
            tokens: Literal::from_s32(dims.clone(), &tokens).expect("sizes match"),
            targets: Literal::from_s32(dims, &targets).expect("sizes match"),
            segment_ids: None,
        }
    }

    /// Batch number `index`, packed into documents when `packed`.
    pub fn step_batch(&self, packed: bool, index: u64, batch_size: i64, seq_len: i64) -> Batch {
        if packed {
            self.packed_batch(index, batch_size, seq_len)
        } else {
            self.batch(index, batch_size, seq_len)
        }
    }

    /// Batch number `index` packed: each row holds documents of random
    /// lengths (at least 2 tokens), each following the language from a
    /// fresh random start. A document's last target would be the next
    /// document's unpredictable first token, so it is the ignore index.
    pub fn packed_batch(&self, index: u64, batch_size: i64, seq_len: i64) -> Batch {
        let mut rng = SplitMix64::new(self.seed.wrapping_mul(0x51ED_270B).wrapping_add(index));
        let n = (batch_size * seq_len) as usize;
        let (mut tokens, mut targets) = (vec![0i64; n], vec![0i64; n]);
        let mut segments = Vec::with_capacity(n);
        let v = self.perm.len() as u64;
        for row in 0..batch_size as usize {
            let (mut doc, mut left) = (0i64, 0i64);
            for i in 0..seq_len as usize {
                let at = row * seq_len as usize + i;
                if left == 0 {
                    doc += 1;
                    left = 2 + (rng.next_u64() % seq_len.max(2) as u64) as i64;
                    let t = (rng.next_u64() % v) as i64;
                    tokens[at] = t;
                } else {
                    tokens[at] = targets[at - 1];
                }
                targets[at] = self.next_token(&mut rng, tokens[at]);
                left -= 1;
                if left == 0 || i + 1 == seq_len as usize {
                    targets[at] = hlatc_models::IGNORE_INDEX;
                }
                segments.push(doc as i32);
            }
        }
        let to_i32 = |v: Vec<i64>| -> Vec<i32> { v.into_iter().map(|x| x as i32).collect() };
        let dims = vec![batch_size, seq_len];
        Batch {
            tokens: Literal::from_s32(dims.clone(), &to_i32(tokens)).expect("sizes match"),
            targets: Literal::from_s32(dims.clone(), &to_i32(targets)).expect("sizes match"),
            segment_ids: Some(Literal::from_s32(dims, &segments).expect("sizes match")),
        }
    }
}
