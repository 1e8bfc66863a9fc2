//! Scope keys: where mounts and listeners live, so that a settlement reaches only
//! the mounts along its owner's scope chain.
//!
//! A preset (a standing composition of plugins) gets a scope; each agent that joins
//! it gets a scope of its own parented to the preset's. A mount or listener
//! registered without a scope sits in the global layer and hears every job.

use std::collections::HashMap;

/// One node of the scope tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ScopeKey(pub(crate) u64);

/// The scope tree: each scope's parent.
#[derive(Debug, Default)]
pub(crate) struct ScopeTree {
    parents: HashMap<u64, Option<u64>>,
    next: u64,
}

impl ScopeTree {
    /// A new scope under `parent`.
    pub(crate) fn create(&mut self, parent: Option<ScopeKey>) -> ScopeKey {
        self.next += 1;
        self.parents.insert(self.next, parent.map(|p| p.0));
        ScopeKey(self.next)
    }

    /// `scope` and its ancestors, farthest ancestor first.
    pub(crate) fn chain(&self, scope: Option<ScopeKey>) -> Vec<ScopeKey> {
        let mut chain = Vec::new();
        let mut at = scope.map(|s| s.0);
        while let Some(key) = at {
            // A cycle cannot be built through `create`; the bound is belt and braces.
            if chain.len() > self.parents.len() {
                break;
            }
            chain.push(ScopeKey(key));
            at = self.parents.get(&key).copied().flatten();
        }
        chain.reverse();
        chain
    }
}

/// Entries registered per layer, in registration order.
pub(crate) struct Layered<T> {
    entries: Vec<(u64, Option<ScopeKey>, T)>,
}

impl<T> Default for Layered<T> {
    fn default() -> Self {
        Layered {
            entries: Vec::new(),
        }
    }
}

impl<T: Clone> Layered<T> {
    pub(crate) fn push(&mut self, id: u64, scope: Option<ScopeKey>, value: T) {
        self.entries.push((id, scope, value));
    }

    pub(crate) fn remove(&mut self, id: u64) {
        self.entries.retain(|(i, _, _)| *i != id);
    }

    /// The global layer in registration order, then each scope of `chain` in turn.
    pub(crate) fn routed(&self, chain: &[ScopeKey]) -> Vec<T> {
        let mut out: Vec<T> = self
            .entries
            .iter()
            .filter(|(_, s, _)| s.is_none())
            .map(|(_, _, v)| v.clone())
            .collect();
        for scope in chain {
            out.extend(
                self.entries
                    .iter()
                    .filter(|(_, s, _)| *s == Some(*scope))
                    .map(|(_, _, v)| v.clone()),
            );
        }
        out
    }

    /// Whether anything in the global layer or along `chain` is registered.
    pub(crate) fn serves(&self, chain: &[ScopeKey]) -> bool {
        self.entries
            .iter()
            .any(|(_, s, _)| s.is_none_or(|s| chain.contains(&s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_goes_global_then_farthest_to_nearest() {
        let mut tree = ScopeTree::default();
        let preset = tree.create(None);
        let agent = tree.create(Some(preset));
        let other = tree.create(None);
        assert_eq!(tree.chain(Some(agent)), [preset, agent]);
        let mut layers = Layered::default();
        layers.push(1, Some(agent), "agent");
        layers.push(2, None, "global");
        layers.push(3, Some(other), "other");
        layers.push(4, Some(preset), "preset");
        let chain = tree.chain(Some(agent));
        assert_eq!(layers.routed(&chain), ["global", "preset", "agent"]);
        assert_eq!(layers.routed(&[]), ["global"]);
        layers.remove(2);
        assert!(layers.serves(&chain));
        assert!(!layers.serves(&[]));
    }
}
