//! The names in use in a module, and fresh ones: what every rewrite that
//! adds an instruction asks. The context hands one index from pass to
//! pass; the rewriter adds through it.

use hlatc_compiler::util::decimal::push_digits_str;
use hlatc_compiler::util::fx::{BuildFxHasher, FxHashMap, FxHashSet};
use hlatc_compiler::Module;
use std::hash::BuildHasher;

/// Instruction and computation names in use anywhere in a module. XLA
/// requires instruction names to be unique across the whole module, not
/// just within a computation.
///
/// Names are kept as hashes, not strings: every pass makes one of these,
/// and copying every name of a 30k-instruction module each time showed in
/// profiles. Two names sharing a hash only make `fresh` skip a name that
/// was in fact free; a name in use is never handed out.
#[derive(Clone, Debug, Default)]
pub struct Names {
    used: FxHashSet<u64>,
    next: FxHashMap<u64, usize>,
}

impl Names {
    pub fn of_module(m: &Module) -> Self {
        let mut used = FxHashSet::default();
        used.reserve(m.instruction_count() + m.computations.len());
        for c in &m.computations {
            used.insert(name_hash(&c.name));
            for id in c.ids() {
                used.insert(name_hash(&c.instr(id).name));
            }
        }
        Names {
            used,
            next: FxHashMap::default(),
        }
    }

    /// `stem` itself when it is free, otherwise `stem.N` for the first free N.
    pub fn fresh(&mut self, stem: &str) -> String {
        let stem_hash = name_hash(stem);
        if self.used.insert(stem_hash) {
            return stem.to_string();
        }
        // Counters are keyed by the stem's hash, found once: two stems
        // sharing one only skip numbers, and `used` still decides.
        let n = self.next.entry(stem_hash).or_insert(0);
        let mut name = String::with_capacity(stem.len() + 8);
        name.push_str(stem);
        name.push('.');
        loop {
            *n += 1;
            name.truncate(stem.len() + 1);
            push_digits_str(&mut name, *n as u64);
            if self.used.insert(name_hash(&name)) {
                return name;
            }
        }
    }
}

fn name_hash(name: &str) -> u64 {
    BuildFxHasher::default().hash_one(name)
}
