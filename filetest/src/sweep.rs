//! Sampled sweeps. A test whose set is exhaustive (XLA's 4,147 test
//! modules, thousands of generated ones) walks a sample of it by default,
//! drawn from a seed that changes every day, so that the runs of a week
//! cover far more than any one run while each stays short. What was
//! sampled, and the seed, is printed (nextest shows a test's output when
//! it fails): `HLATC_SWEEP_SEED=N` draws that sample again, and
//! `HLATC_FULL_SWEEP=1` (`scripts/test.sh --full`) walks the whole set.

use std::time::{SystemTime, UNIX_EPOCH};

/// Set (to anything but `0`), every sweep walks its whole set.
pub const FULL_ENV: &str = "HLATC_FULL_SWEEP";
/// The seed of every sweep's sample; unset, the day's (days since 1970,
/// UTC), the same in every process of a run.
pub const SEED_ENV: &str = "HLATC_SWEEP_SEED";

/// One test's sweep: its name (which makes its sample its own), the seed
/// and whether it walks everything.
#[derive(Clone, Debug)]
pub struct Sweep {
    name: String,
    seed: u64,
    full: bool,
}

impl Sweep {
    /// The sweep `name` as the environment asks for it. A seed that is not
    /// an unsigned integer fails the test: a replay must draw what it says.
    pub fn from_env(name: &str) -> Sweep {
        let full = std::env::var(FULL_ENV).is_ok_and(|v| !v.is_empty() && v != "0");
        let seed = match std::env::var(SEED_ENV) {
            Ok(v) => v
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("{SEED_ENV}={v:?} is not an unsigned integer")),
            Err(_) => day(),
        };
        Sweep::new(name, seed, full)
    }

    pub fn new(name: &str, seed: u64, full: bool) -> Sweep {
        Sweep {
            name: name.to_string(),
            seed,
            full,
        }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn is_full(&self) -> bool {
        self.full
    }

    /// Which of `total` items to walk, in increasing order: all of them in
    /// a full sweep (or when `sampled` is not fewer), else `sampled`
    /// distinct ones drawn from the seed and the sweep's name. Printed.
    pub fn sample(&self, total: usize, sampled: usize, what: &str) -> Vec<usize> {
        let picked: Vec<usize> = if self.full || sampled >= total {
            (0..total).collect()
        } else {
            // The first `sampled` places of a Fisher-Yates shuffle.
            let mut order: Vec<usize> = (0..total).collect();
            let mut rng = SplitMix64(self.seed ^ fnv1a(self.name.as_bytes()));
            for i in 0..sampled {
                let j = i + (rng.next() % (total - i) as u64) as usize;
                order.swap(i, j);
            }
            order.truncate(sampled);
            order.sort_unstable();
            order
        };
        self.report(picked.len() as u64, total as u64, what);
        picked
    }

    /// The seeds of a generator's items (the fuzzer's modules): `0..full`
    /// in a full sweep, else `sampled` consecutive ones starting at
    /// `seed * sampled`, so that each day's run generates new items.
    /// Printed.
    pub fn seeds(&self, sampled: u64, full: u64, what: &str) -> std::ops::Range<u64> {
        let range = if self.full {
            0..full
        } else {
            let first = self.seed.saturating_mul(sampled);
            first..first.saturating_add(sampled)
        };
        eprintln!(
            "{}: {what} seeds {}..{} ({} of a full sweep's {full}); {}",
            self.name,
            range.start,
            range.end,
            range.end - range.start,
            self.replay()
        );
        range
    }

    fn report(&self, picked: u64, total: u64, what: &str) {
        eprintln!(
            "{}: {picked} of {total} {what}; {}",
            self.name,
            self.replay()
        );
    }

    /// How to draw this sample again, and how to walk everything.
    fn replay(&self) -> String {
        if self.full {
            format!("the full sweep ({FULL_ENV} is set)")
        } else {
            format!(
                "seed {} (again: {SEED_ENV}={}; everything: {FULL_ENV}=1)",
                self.seed, self.seed
            )
        }
    }
}

/// Days since 1970-01-01, UTC.
fn day() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400)
}

/// A sweep's name as a number, so that two sweeps of one seed draw apart.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// SplitMix64: the draw needs no quality beyond spreading the sample.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_is_distinct_sorted_and_the_seeds() {
        let s = Sweep::new("conformance", 20_419, false);
        let a = s.sample(4147, 1000, "modules");
        assert_eq!(a.len(), 1000);
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert!(*a.last().unwrap() < 4147);
        assert_eq!(
            a,
            Sweep::new("conformance", 20_419, false).sample(4147, 1000, "modules")
        );
        assert_ne!(
            a,
            Sweep::new("conformance", 20_420, false).sample(4147, 1000, "modules")
        );
        assert_ne!(
            a,
            Sweep::new("other", 20_419, false).sample(4147, 1000, "modules")
        );
    }

    #[test]
    fn a_full_sweep_walks_everything() {
        let full = Sweep::new("fuzz", 5, true);
        assert_eq!(full.sample(7, 2, "items"), (0..7).collect::<Vec<_>>());
        assert_eq!(full.seeds(300, 1500, "module"), 0..1500);
        let day = Sweep::new("fuzz", 5, false);
        assert_eq!(day.seeds(300, 1500, "module"), 1500..1800);
        assert_eq!(day.sample(3, 10, "items"), vec![0, 1, 2]);
    }
}
