//! A fast hash for the compiler's own maps (instruction ids, names, value
//! keys): nothing it hashes is chosen by an attacker who could exploit
//! collisions, and SipHash showed up in every profile.

/// The Fx hash (rustc's): much faster than SipHash for these small keys,
/// and no attacker chooses what a model builder builds.
#[derive(Default)]
pub struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Whole words by fixed-size loads: a `copy_from_slice` of a
        // variable-length chunk became a `memcpy` call per word, and names
        // and op_name scopes hashed that way showed in profiles.
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let word: [u8; 8] = word.try_into().expect("chunks_exact(8)");
            self.write_u64(u64::from_le_bytes(word));
        }
        let tail = words.remainder();
        if !tail.is_empty() {
            let mut buf = [0u8; 8];
            for (b, &t) in buf.iter_mut().zip(tail) {
                *b = t;
            }
            self.write_u64(u64::from_le_bytes(buf));
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }

    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

pub type BuildFxHasher = std::hash::BuildHasherDefault<FxHasher>;

/// A `HashMap` with the Fx hash.
pub type FxHashMap<K, V> = std::collections::HashMap<K, V, BuildFxHasher>;
/// A `HashSet` with the Fx hash.
pub type FxHashSet<K> = std::collections::HashSet<K, BuildFxHasher>;
