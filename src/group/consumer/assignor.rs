//! Server-side assignors of consumer groups (`group.consumer.assignors`): `uniform` (the
//! default, as Kafka's UniformAssignor: balanced and sticky) and `range` (as Kafka's server-side
//! RangeAssignor: per topic, contiguous ranges over the subscribed members sorted by id).
//!
//! Pure and deterministic: the same members, subscriptions, topics and previous target give the
//! same assignment. Invariants of the result: every partition of every subscribed topic goes to
//! exactly one member subscribed to its topic; uniform keeps a member's previous partitions
//! whenever balance allows, and no two members that could both own a partition differ by more
//! than one partition.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::state::Assignment;

pub const UNIFORM: &str = "uniform";
pub const RANGE: &str = "range";

/// One member as an assignor sees it.
#[derive(Debug, Clone)]
pub struct MemberSpec {
    pub id: String,
    pub topics: BTreeSet<Uuid>,
    /// Its partitions in the previous target assignment.
    pub previous: Assignment,
}

/// Assigns the partitions of `topics` (id -> partition count) to `members`.
pub fn assign(name: &str, members: &[MemberSpec], topics: &BTreeMap<Uuid, i32>) -> BTreeMap<String, Assignment> {
    match name {
        RANGE => range(members, topics),
        _ => uniform(members, topics),
    }
}

fn range(members: &[MemberSpec], topics: &BTreeMap<Uuid, i32>) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members.iter().map(|m| (m.id.clone(), Assignment::new())).collect();
    for (topic, count) in topics {
        let mut subscribed: Vec<&MemberSpec> = members.iter().filter(|m| m.topics.contains(topic)).collect();
        if subscribed.is_empty() {
            continue;
        }
        subscribed.sort_by(|a, b| a.id.cmp(&b.id));
        let n = subscribed.len() as i32;
        let (quota, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, m) in subscribed.iter().enumerate() {
            let take = quota + i32::from((i as i32) < extra);
            if take > 0 {
                out.get_mut(&m.id).expect("member").entry(*topic).or_default().extend(next..next + take);
            }
            next += take;
        }
    }
    out
}

fn uniform(members: &[MemberSpec], topics: &BTreeMap<Uuid, i32>) -> BTreeMap<String, Assignment> {
    let mut owner: BTreeMap<(Uuid, i32), usize> = BTreeMap::new();
    let mut counts = vec![0usize; members.len()];
    // Keep what is still valid from the previous target.
    for (i, m) in members.iter().enumerate() {
        for (topic, parts) in &m.previous {
            let Some(&count) = topics.get(topic) else { continue };
            if !m.topics.contains(topic) {
                continue;
            }
            for &p in parts {
                if p < count && !owner.contains_key(&(*topic, p)) {
                    owner.insert((*topic, p), i);
                    counts[i] += 1;
                }
            }
        }
    }
    // Give every unowned partition to the least loaded member subscribed to its topic.
    for (topic, &count) in topics {
        for p in 0..count {
            if owner.contains_key(&(*topic, p)) {
                continue;
            }
            let best = (0..members.len())
                .filter(|&i| members[i].topics.contains(topic))
                .min_by(|&a, &b| counts[a].cmp(&counts[b]).then(members[a].id.cmp(&members[b].id)));
            if let Some(i) = best {
                owner.insert((*topic, p), i);
                counts[i] += 1;
            }
        }
    }
    // Balance: move a partition from a member to an eligible one holding at least two fewer,
    // from the most loaded first, until no such move exists (each move lowers the sum of
    // squared counts, so this ends).
    loop {
        let mut moved = false;
        let mut order: Vec<usize> = (0..members.len()).collect();
        order.sort_by(|&a, &b| counts[b].cmp(&counts[a]).then(members[a].id.cmp(&members[b].id)));
        'outer: for &from in &order {
            // Newest partitions first: keeps lower-numbered ones sticky.
            let owned: Vec<(Uuid, i32)> = owner.iter().filter(|(_, &o)| o == from).map(|(k, _)| *k).rev().collect();
            for (topic, p) in owned {
                let to = (0..members.len())
                    .filter(|&i| i != from && members[i].topics.contains(&topic) && counts[i] + 1 < counts[from])
                    .min_by(|&a, &b| counts[a].cmp(&counts[b]).then(members[a].id.cmp(&members[b].id)));
                if let Some(to) = to {
                    owner.insert((topic, p), to);
                    counts[from] -= 1;
                    counts[to] += 1;
                    moved = true;
                    break 'outer;
                }
            }
        }
        if !moved {
            break;
        }
    }
    let mut out: BTreeMap<String, Assignment> = members.iter().map(|m| (m.id.clone(), Assignment::new())).collect();
    for ((topic, p), i) in owner {
        out.get_mut(&members[i].id).expect("member").entry(topic).or_default().insert(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u8) -> Uuid {
        Uuid::from_bytes([n; 16])
    }

    fn member(id: &str, topics: &[Uuid], previous: Assignment) -> MemberSpec {
        MemberSpec { id: id.into(), topics: topics.iter().copied().collect(), previous }
    }

    fn count(a: &Assignment) -> usize {
        a.values().map(|p| p.len()).sum()
    }

    fn all_once(out: &BTreeMap<String, Assignment>, topics: &BTreeMap<Uuid, i32>) {
        let mut seen = BTreeSet::new();
        for a in out.values() {
            for (topic, parts) in a {
                for p in parts {
                    assert!(seen.insert((*topic, *p)), "{topic}-{p} assigned twice");
                }
            }
        }
        let expected: usize = topics.values().map(|c| *c as usize).sum();
        assert_eq!(seen.len(), expected, "every partition assigned");
    }

    #[test]
    fn uniform_balances_and_is_sticky() {
        let topics = BTreeMap::from([(t(1), 6)]);
        let two = vec![member("a", &[t(1)], Assignment::new()), member("b", &[t(1)], Assignment::new())];
        let first = assign(UNIFORM, &two, &topics);
        all_once(&first, &topics);
        assert_eq!(count(&first["a"]), 3);
        assert_eq!(count(&first["b"]), 3);
        // A third member: each keeps two of its three, the newcomer gets one from each.
        let three = vec![
            member("a", &[t(1)], first["a"].clone()),
            member("b", &[t(1)], first["b"].clone()),
            member("c", &[t(1)], Assignment::new()),
        ];
        let second = assign(UNIFORM, &three, &topics);
        all_once(&second, &topics);
        for id in ["a", "b", "c"] {
            assert_eq!(count(&second[id]), 2, "{id}: {second:?}");
        }
        for id in ["a", "b"] {
            assert!(second[id][&t(1)].is_subset(&first[id][&t(1)]), "{id} kept its partitions");
        }
        // Same input, same output.
        assert_eq!(assign(UNIFORM, &three, &topics), second);
        // b leaves: a and c keep theirs and share b's.
        let after = assign(
            UNIFORM,
            &[member("a", &[t(1)], second["a"].clone()), member("c", &[t(1)], second["c"].clone())],
            &topics,
        );
        all_once(&after, &topics);
        assert!(second["a"][&t(1)].is_subset(&after["a"][&t(1)]));
        assert!(second["c"][&t(1)].is_subset(&after["c"][&t(1)]));
    }

    #[test]
    fn uniform_heterogeneous_subscriptions() {
        let topics = BTreeMap::from([(t(1), 4), (t(2), 2)]);
        let out = assign(
            UNIFORM,
            &[member("a", &[t(1)], Assignment::new()), member("b", &[t(1), t(2)], Assignment::new())],
            &topics,
        );
        all_once(&out, &topics);
        assert!(!out["a"].contains_key(&t(2)), "a is not subscribed to t2");
        assert_eq!(count(&out["a"]), 3);
        assert_eq!(count(&out["b"]), 3);
    }

    #[test]
    fn uniform_drops_partitions_of_unsubscribed_or_gone_topics() {
        let topics = BTreeMap::from([(t(1), 2)]);
        let previous = Assignment::from([(t(1), BTreeSet::from([0, 1, 5])), (t(9), BTreeSet::from([0]))]);
        let out = assign(UNIFORM, &[member("a", &[t(1)], previous)], &topics);
        assert_eq!(out["a"], Assignment::from([(t(1), BTreeSet::from([0, 1]))]));
    }

    #[test]
    fn range_gives_contiguous_ranges_by_member_id() {
        let topics = BTreeMap::from([(t(1), 7), (t(2), 2)]);
        let members = [member("b", &[t(1), t(2)], Assignment::new()), member("a", &[t(1), t(2)], Assignment::new())];
        let out = assign(RANGE, &members, &topics);
        all_once(&out, &topics);
        assert_eq!(out["a"][&t(1)], BTreeSet::from([0, 1, 2, 3]));
        assert_eq!(out["b"][&t(1)], BTreeSet::from([4, 5, 6]));
        assert_eq!(out["a"][&t(2)], BTreeSet::from([0]));
        assert_eq!(out["b"][&t(2)], BTreeSet::from([1]));
    }

    #[test]
    fn no_members_or_no_topics() {
        assert!(assign(UNIFORM, &[], &BTreeMap::from([(t(1), 3)])).is_empty());
        let out = assign(RANGE, &[member("a", &[t(1)], Assignment::new())], &BTreeMap::new());
        assert!(out["a"].is_empty());
    }
}
