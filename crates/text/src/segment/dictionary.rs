//! Validation of a term dictionary's automaton before anything else walks it.
//!
//! The `fst` crate trusts an automaton's bytes: decoding a node from damaged bytes can panic (an
//! arithmetic overflow, an index past a slice), and a damaged automaton may hold a cycle, which a
//! stream of its keys would follow forever, or more paths than its header counts. Its CRC-32C
//! ([`fst::raw::Fst::verify`]) catches damage, but not damage whose checksum was made to match
//! (the `text_segment` fuzz target finds such inputs). So a segment's dictionary is walked once
//! when the segment opens: every node reachable from the root is decoded, with every transition,
//! its final output and a lookup of the smallest and the largest input byte (which bound every
//! byte a lookup reads: a node's transitions table or its 256-entry index), under
//! [`catch_unwind`]; a cycle is refused and the keys are counted against the header. A node's
//! decoding depends on its address only, so later lookups and streams decode only nodes that
//! decoded cleanly here. Cost: one pass over the dictionary's nodes, small beside the postings.

use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};

use fst::raw::{CompiledAddr, Fst};

use crate::error::TextError;

/// Checks `fst` as the module says: `Err(TextError::Corrupt)` when a node does not decode, a
/// cycle is reachable, or the automaton's keys are not the `fst.len()` its header states.
pub(super) fn validate_automaton(fst: &Fst<&[u8]>) -> Result<(), TextError> {
    let corrupt = |what: String| Err(TextError::Corrupt(format!("term dictionary: {what}")));
    match catch_unwind(AssertUnwindSafe(|| count_keys(fst))) {
        Ok(Some(keys)) if keys == fst.len() as u64 => Ok(()),
        Ok(Some(keys)) => corrupt(format!("the automaton holds {keys} keys, its header {}", fst.len())),
        Ok(None) => corrupt("the automaton has a cycle".into()),
        Err(_) => corrupt("a node of the automaton does not decode".into()),
    }
}

/// One step of the depth-first walk.
enum Visit {
    /// Decode the node and walk its targets.
    Enter(CompiledAddr),
    /// Its targets are counted: count the node (its address, its targets, whether it is final).
    Leave(CompiledAddr, Vec<CompiledAddr>, bool),
}

/// The automaton's keys (paths from the root to final nodes, saturating), or `None` when a cycle
/// is reachable. Panics where `fst` panics on a node.
fn count_keys(fst: &Fst<&[u8]>) -> Option<u64> {
    let mut keys: HashMap<CompiledAddr, u64> = HashMap::new();
    // Nodes entered and not left: the current path. Reaching one again is a cycle (an `Enter`
    // above a node's `Leave` on the stack was pushed by one of its descendants).
    let mut open: HashSet<CompiledAddr> = HashSet::new();
    let root = fst.root().addr();
    let mut stack = vec![Visit::Enter(root)];
    while let Some(visit) = stack.pop() {
        match visit {
            Visit::Enter(addr) => {
                if keys.contains_key(&addr) {
                    continue;
                }
                if !open.insert(addr) {
                    return None;
                }
                let node = fst.node(addr);
                let _ = (node.find_input(u8::MIN), node.find_input(u8::MAX), node.final_output());
                let targets: Vec<CompiledAddr> = node.transitions().map(|t| t.addr).collect();
                stack.extend(targets.iter().map(|&target| Visit::Enter(target)));
                // Below its targets' entries: the node is counted once they all are.
                stack.insert(stack.len() - targets.len(), Visit::Leave(addr, targets, node.is_final()));
            }
            Visit::Leave(addr, targets, is_final) => {
                let below = targets.iter().fold(0u64, |sum, target| sum.saturating_add(keys[target]));
                keys.insert(addr, below.saturating_add(u64::from(is_final)));
                open.remove(&addr);
            }
        }
    }
    Some(keys[&root])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn automaton(keys: &[&str]) -> Vec<u8> {
        let mut builder = fst::MapBuilder::memory();
        for (i, key) in keys.iter().enumerate() {
            builder.insert(key, i as u64).unwrap();
        }
        builder.into_inner().unwrap()
    }

    #[test]
    fn built_dictionaries_pass_and_count_their_keys() {
        let many: Vec<String> = (0..3_000).map(|i| format!("lexeme{i:05}")).collect();
        let mut sorted: Vec<&str> = many.iter().map(String::as_str).collect();
        // A node with more than 32 transitions (an indexed node) among them.
        let wide: Vec<String> = (b'!'..=b'~').map(|b| format!("w{}", b as char)).collect();
        sorted.extend(wide.iter().map(String::as_str));
        sorted.sort_unstable();
        for keys in [&[][..], &["a"][..], &["", "a", "ab", "b"][..], &sorted[..]] {
            let bytes = automaton(keys);
            let fst = Fst::new(bytes.as_slice()).unwrap();
            assert_eq!(count_keys(&fst), Some(keys.len() as u64));
            validate_automaton(&fst).unwrap();
        }
    }

    /// Every single-byte change of a real dictionary (its checksum is not checked here: the
    /// validation must hold where the checksum was made to match) either validates — and then
    /// streams all its keys without a panic — or is refused with a typed error; never a panic.
    #[test]
    fn damaged_dictionaries_are_refused_or_safe_to_walk() {
        let keys: Vec<String> = (0..200).map(|i| format!("t{}{}", i % 7, i * 31 % 97)).collect();
        let mut sorted: Vec<&str> = keys.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        sorted.dedup();
        let bytes = automaton(&sorted);
        let (mut refused, mut accepted) = (0, 0);
        for at in 0..bytes.len() - 4 {
            for delta in [1u8, 0x80, 0xFF] {
                let mut damaged = bytes.clone();
                damaged[at] = damaged[at].wrapping_add(delta);
                let Ok(fst) = Fst::new(damaged.as_slice()) else { continue };
                match validate_automaton(&fst) {
                    Ok(()) => {
                        accepted += 1;
                        let map = fst::Map::from(fst);
                        let mut stream = fst::IntoStreamer::into_stream(&map);
                        let mut n = 0;
                        while fst::Streamer::next(&mut stream).is_some() {
                            n += 1;
                        }
                        assert_eq!(n, map.len(), "byte {at} + {delta}");
                    }
                    Err(TextError::Corrupt(_)) => refused += 1,
                    Err(other) => panic!("byte {at}: {other}"),
                }
            }
        }
        assert!(refused > 0 && accepted > 0, "refused {refused}, accepted {accepted}");
    }
}
