//! Channel graph checks, as operator-registry's model validation makes them (contracts §7.1).
//!
//! Graph nodes are bundle names. An edge is a `replaces` or a `skips` that names another entry
//! of the same channel; edges to names outside the channel dangle harmlessly (the tail of a
//! channel usually replaces a bundle pruned long ago). `skipRange` is not an edge.
//!
//! Per package, as `opm validate` (operator-registry's `ConvertToModel` and model validation):
//! a `defaultChannel` naming one of its channels, every bundle in some channel, and
//! deprecations naming existing bundles and channels. A package without bundles is let through
//! (see [`channel`]).

use std::collections::BTreeSet;

use super::error::FbcError;
use super::model::{Channel, Origin, Package};

/// Checks one channel: its entries name bundles of the package, `replaces` never loops, and
/// exactly one entry (the head) has no incoming edge.
///
/// Entries naming missing bundles are only refused when the package has bundles at all: a
/// catalog that lists a package and its channels but ships the bundles elsewhere (real catalogs
/// do, e.g. ODF's `index.yaml`) is incomplete rather than contradictory, and resolution will say
/// there is nothing to install.
pub(crate) fn channel(
    package: &Package,
    channel: &Channel,
    origin: &Origin,
) -> Result<(), FbcError> {
    let entries = &channel.entries;
    if entries.is_empty() {
        return Ok(());
    }
    if !package.bundles.is_empty()
        && let Some(missing) = entries
            .iter()
            .find(|e| !package.bundles.contains_key(&e.name))
    {
        return Err(FbcError::UnknownBundle {
            origin: origin.clone(),
            package: package.name.clone(),
            channel: channel.name.clone(),
            entry: missing.name.clone(),
        });
    }
    // Entries are sorted by name, so a name's index is a binary search away.
    let index_of = |name: &str| entries.binary_search_by(|e| e.name.as_str().cmp(name)).ok();
    let replaces: Vec<Option<usize>> = entries
        .iter()
        .map(|e| e.replaces.as_deref().and_then(index_of))
        .collect();

    if let Some(cycle) = find_cycle(&replaces) {
        let mut names: Vec<String> = cycle.iter().map(|&i| entries[i].name.clone()).collect();
        names.push(names.first().cloned().unwrap_or_default());
        return Err(FbcError::ReplacesCycle {
            origin: origin.clone(),
            package: package.name.clone(),
            channel: channel.name.clone(),
            cycle: names,
        });
    }

    let mut incoming = vec![false; entries.len()];
    for (entry, target) in entries.iter().zip(&replaces) {
        if let Some(target) = target {
            incoming[*target] = true;
        }
        for skipped in entry.skips.iter().filter_map(|s| index_of(s)) {
            incoming[skipped] = true;
        }
    }
    let heads: Vec<String> = entries
        .iter()
        .zip(&incoming)
        .filter(|(_, has_incoming)| !**has_incoming)
        .map(|(entry, _)| entry.name.clone())
        .collect();
    if heads.len() != 1 {
        return Err(FbcError::ChannelHeads {
            origin: origin.clone(),
            package: package.name.clone(),
            channel: channel.name.clone(),
            heads,
        });
    }
    Ok(())
}

/// Checks one package as a whole (its channels were checked one by one with [`channel`]).
pub(crate) fn package(
    package: &Package,
    origin: &Origin,
    deprecations_origin: Option<&Origin>,
) -> Result<(), FbcError> {
    if package.bundles.is_empty() {
        return Ok(());
    }
    let default_ok = package
        .default_channel
        .as_ref()
        .is_some_and(|name| package.channels.contains_key(name));
    if !default_ok {
        return Err(FbcError::DefaultChannel {
            origin: origin.clone(),
            package: package.name.clone(),
            default_channel: package.default_channel.clone(),
            channels: package.channels.keys().cloned().collect(),
        });
    }
    let listed: BTreeSet<&str> = package
        .channels
        .values()
        .flat_map(|c| c.entries.iter().map(|e| e.name.as_str()))
        .collect();
    if let Some(bundle) = package
        .bundles
        .values()
        .find(|b| !listed.contains(b.name.as_str()))
    {
        return Err(FbcError::BundleInNoChannel {
            origin: bundle.origin.clone(),
            package: package.name.clone(),
            bundle: bundle.name.clone(),
        });
    }
    let deprecations = &package.deprecations;
    let unknown = deprecations
        .bundles
        .keys()
        .find(|b| !package.bundles.contains_key(*b))
        .map(|b| format!("cannot deprecate bundle {b:?}: the package has no such bundle"))
        .or_else(|| {
            deprecations
                .channels
                .keys()
                .find(|c| !package.channels.contains_key(*c))
                .map(|c| format!("cannot deprecate channel {c:?}: the package has no such channel"))
        });
    if let Some(reason) = unknown {
        return Err(FbcError::InvalidDeprecation {
            origin: deprecations_origin
                .cloned()
                .unwrap_or_else(|| origin.clone()),
            package: package.name.clone(),
            reason,
        });
    }
    Ok(())
}

/// The first cycle of the functional graph `next` (each node has at most one successor), as
/// node indices starting from the cycle's smallest index, or `None`.
fn find_cycle(next: &[Option<usize>]) -> Option<Vec<usize>> {
    const UNSEEN: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![UNSEEN; next.len()];
    for start in 0..next.len() {
        let mut path = Vec::new();
        let mut current = Some(start);
        while let Some(node) = current {
            match state.get(node).copied() {
                Some(UNSEEN) => {
                    state[node] = ON_PATH;
                    path.push(node);
                    current = next.get(node).copied().flatten();
                }
                Some(ON_PATH) => {
                    let from = path.iter().position(|&n| n == node).unwrap_or(0);
                    let mut cycle = path.split_off(from);
                    let smallest = cycle
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, n)| **n)
                        .map_or(0, |(i, _)| i);
                    cycle.rotate_left(smallest);
                    return Some(cycle);
                }
                _ => break,
            }
        }
        for node in path {
            state[node] = DONE;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_cycles_in_functional_graphs() {
        assert_eq!(find_cycle(&[Some(1), None]), None);
        assert_eq!(find_cycle(&[Some(0)]), Some(vec![0]));
        assert_eq!(
            find_cycle(&[None, Some(2), Some(3), Some(1)]),
            Some(vec![1, 2, 3])
        );
        assert_eq!(
            find_cycle(&[Some(2), Some(0), Some(1)]),
            Some(vec![0, 2, 1])
        );
    }
}
