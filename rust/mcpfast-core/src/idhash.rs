//! `IdHash`: the hasher of tables keyed by the server's own session ids.

use std::hash::{BuildHasherDefault, Hasher};

/// A word-at-a-time multiplicative hash (FxHash's step): the keys are the server's own random
/// session ids, put in by the server only, so a keyed hash buys nothing, and SipHash or a
/// byte-at-a-time FNV over a 43-byte id cost more than the rest of a lookup.
#[derive(Default)]
pub struct IdHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        // The table takes its bucket from the low bits and its tag from the top seven: the
        // last multiply leaves the entropy high, so fold it down.
        self.0 ^ (self.0 >> 29)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let w = u64::from_le_bytes(word.try_into().unwrap_or_default());
            h = (h.rotate_left(5) ^ w).wrapping_mul(SEED);
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            h = (h.rotate_left(5) ^ u64::from_le_bytes(last)).wrapping_mul(SEED);
        }
        self.0 = h;
    }
}

/// The `BuildHasher` of `HashMap<Vec<u8>, _, IdHash>`.
pub type IdHash = BuildHasherDefault<IdHasher>;

#[cfg(test)]
mod tests {
    use std::hash::{BuildHasher, Hasher};

    use super::IdHash;

    fn hash(key: &[u8]) -> u64 {
        let mut h = IdHash::default().build_hasher();
        h.write(key);
        h.finish()
    }

    #[test]
    fn every_byte_of_an_id_counts() {
        // A 43-byte id (what token_urlsafe(32) makes): five whole words and a remainder.
        let id = b"Xq3v9K0pLmN2bR7tYwZ5aC8dE1fG4hJ6kS0uV2xW9yA".to_vec();
        let base = hash(&id);
        for i in 0..id.len() {
            let mut other = id.clone();
            other[i] ^= 1;
            assert_ne!(hash(&other), base, "byte {i} is not hashed");
        }
        assert_ne!(hash(&id[..42]), base);
    }

    #[test]
    fn ids_spread_over_the_low_bits() {
        // The table picks a bucket from the low bits: 4,096 ids over 256 buckets, none crowded.
        let mut buckets = [0u32; 256];
        for n in 0..4096u32 {
            let id = format!("session-{n:08}-of-a-deployment-with-ordered-ids");
            buckets[(hash(id.as_bytes()) & 255) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|&c| (2..=40).contains(&c)),
            "{buckets:?}"
        );
    }
}
