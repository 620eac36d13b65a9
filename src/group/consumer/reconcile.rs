//! The reconciliation state machine of a consumer-group member (Kafka's
//! `CurrentAssignmentBuilder`): moves a member's current assignment towards the target one,
//! one epoch at a time.
//!
//! Rules: a member first gives up (revokes) what the target took from it, staying at its epoch
//! in UNREVOKED_PARTITIONS until its heartbeat no longer reports those partitions; then it moves
//! to the target epoch and gets the target's partitions that no other member still owns
//! (UNRELEASED_PARTITIONS while some are held by others), STABLE once it has them all.
//! Invariant: a partition is never added to a member while another member owns it (assigned
//! or pending revocation), so no partition is consumed by two members at once.

use std::collections::HashMap;

use uuid::Uuid;

use super::state::{Assignment, Member, MemberState};

/// Partitions a heartbeat reports as owned (None: not reported in this heartbeat).
pub type Owned<'a> = Option<&'a [(Uuid, Vec<i32>)]>;

/// The member's next state. `Err` is FENCED_MEMBER_EPOCH's message (unknown state with owned
/// partitions).
pub fn reconcile(
    member: &Member,
    target_epoch: i32,
    target: &Assignment,
    partition_epochs: &HashMap<(Uuid, i32), i32>,
    owned: Owned<'_>,
) -> Result<Member, String> {
    let next = |epoch: i32| next_assignment(member, epoch, target_epoch, target, partition_epochs, owned);
    Ok(match member.state {
        MemberState::Stable if member.member_epoch != target_epoch => next(member.member_epoch),
        MemberState::Stable => member.clone(),
        MemberState::UnrevokedPartitions => {
            if owns_any(owned, &member.pending_revocation) {
                member.clone()
            } else {
                next(member.member_epoch + 1)
            }
        }
        MemberState::UnreleasedPartitions => next(member.member_epoch),
        MemberState::Unknown => {
            if owned.is_none_or(|o| !o.is_empty()) {
                return Err("The consumer group member is in a unknown state. The member must abandon all its \
                            partitions and rejoin."
                    .into());
            }
            next(target_epoch)
        }
    })
}

/// Whether the member (still) reports any of `partitions`; not reporting counts as owning.
fn owns_any(owned: Owned<'_>, partitions: &Assignment) -> bool {
    let Some(owned) = owned else { return true };
    owned.iter().any(|(topic, parts)| partitions.get(topic).is_some_and(|set| parts.iter().any(|p| set.contains(p))))
}

fn next_assignment(
    member: &Member,
    epoch: i32,
    target_epoch: i32,
    target: &Assignment,
    partition_epochs: &HashMap<(Uuid, i32), i32>,
    owned: Owned<'_>,
) -> Member {
    let mut unreleased = false;
    let mut assigned = Assignment::new();
    let mut revoking = Assignment::new();
    let mut to_assign = Assignment::new();
    let topics: std::collections::BTreeSet<Uuid> = target.keys().chain(member.assigned.keys()).copied().collect();
    let empty = Default::default();
    for topic in topics {
        let wanted = target.get(&topic).unwrap_or(&empty);
        let current = member.assigned.get(&topic).unwrap_or(&empty);
        let kept: std::collections::BTreeSet<i32> = current.intersection(wanted).copied().collect();
        let revoke: std::collections::BTreeSet<i32> = current.difference(&kept).copied().collect();
        let mut pending: std::collections::BTreeSet<i32> = wanted.difference(&kept).copied().collect();
        let before = pending.len();
        pending.retain(|p| partition_epochs.get(&(topic, *p)).is_none_or(|e| *e == -1));
        unreleased |= pending.len() != before;
        if !kept.is_empty() {
            assigned.insert(topic, kept);
        }
        if !revoke.is_empty() {
            revoking.insert(topic, revoke);
        }
        if !pending.is_empty() {
            to_assign.insert(topic, pending);
        }
    }
    let mut m = member.clone();
    let set_epoch = |m: &mut Member, e: i32| {
        if m.member_epoch != e {
            m.previous_member_epoch = m.member_epoch;
            m.member_epoch = e;
        }
    };
    if !revoking.is_empty() && owns_any(owned, &revoking) {
        m.state = MemberState::UnrevokedPartitions;
        set_epoch(&mut m, epoch);
        m.assigned = assigned;
        m.pending_revocation = revoking;
        return m;
    }
    for (topic, parts) in to_assign {
        assigned.entry(topic).or_default().extend(parts);
    }
    m.state = if unreleased { MemberState::UnreleasedPartitions } else { MemberState::Stable };
    set_epoch(&mut m, target_epoch);
    m.assigned = assigned;
    m.pending_revocation = Assignment::new();
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn t() -> Uuid {
        Uuid::from_bytes([7; 16])
    }

    fn parts(ps: &[i32]) -> Assignment {
        if ps.is_empty() {
            return Assignment::new();
        }
        Assignment::from([(t(), ps.iter().copied().collect::<BTreeSet<i32>>())])
    }

    fn member(epoch: i32, assigned: &[i32]) -> Member {
        let mut m = Member::new("m");
        m.member_epoch = epoch;
        m.previous_member_epoch = epoch - 1;
        m.assigned = parts(assigned);
        m
    }

    fn owned(ps: &[i32]) -> Vec<(Uuid, Vec<i32>)> {
        vec![(t(), ps.to_vec())]
    }

    #[test]
    fn new_member_gets_free_partitions_at_the_target_epoch() {
        let m = member(0, &[]);
        let next = reconcile(&m, 3, &parts(&[0, 1]), &HashMap::new(), Some(&[])).unwrap();
        assert_eq!((next.state, next.member_epoch, next.previous_member_epoch), (MemberState::Stable, 3, 0));
        assert_eq!(next.assigned, parts(&[0, 1]));
    }

    #[test]
    fn revocation_first_then_the_next_epoch() {
        // Owns 0,1,2; the target keeps 0,1 and takes 2 away.
        let m = member(3, &[0, 1, 2]);
        let epochs = HashMap::from([((t(), 0), 3), ((t(), 1), 3), ((t(), 2), 3)]);
        let revoking = reconcile(&m, 4, &parts(&[0, 1]), &epochs, Some(&owned(&[0, 1, 2]))).unwrap();
        assert_eq!(revoking.state, MemberState::UnrevokedPartitions);
        assert_eq!(revoking.member_epoch, 3, "stays at its epoch while revoking");
        assert_eq!(revoking.assigned, parts(&[0, 1]));
        assert_eq!(revoking.pending_revocation, parts(&[2]));
        // Still reporting 2: no progress. Not reporting at all: no progress either.
        let same = reconcile(&revoking, 4, &parts(&[0, 1]), &epochs, Some(&owned(&[0, 1, 2]))).unwrap();
        assert_eq!(same, revoking);
        assert_eq!(reconcile(&revoking, 4, &parts(&[0, 1]), &epochs, None).unwrap(), revoking);
        // Revoked: epoch 4, stable.
        let done = reconcile(&revoking, 4, &parts(&[0, 1]), &epochs, Some(&owned(&[0, 1]))).unwrap();
        assert_eq!((done.state, done.member_epoch, done.previous_member_epoch), (MemberState::Stable, 4, 3));
        assert!(done.pending_revocation.is_empty());
    }

    #[test]
    fn partitions_owned_elsewhere_wait_until_released() {
        let m = member(4, &[0]);
        // Partition 1 is still owned by another member at epoch 4.
        let epochs = HashMap::from([((t(), 0), 4), ((t(), 1), 4)]);
        let waiting = reconcile(&m, 5, &parts(&[0, 1]), &epochs, Some(&owned(&[0]))).unwrap();
        assert_eq!((waiting.state, waiting.member_epoch), (MemberState::UnreleasedPartitions, 5));
        assert_eq!(waiting.assigned, parts(&[0]), "never handed a partition its owner still holds");
        // Released: it gets it.
        let epochs = HashMap::from([((t(), 0), 5)]);
        let done = reconcile(&waiting, 5, &parts(&[0, 1]), &epochs, Some(&owned(&[0]))).unwrap();
        assert_eq!((done.state, done.member_epoch), (MemberState::Stable, 5));
        assert_eq!(done.assigned, parts(&[0, 1]));
    }

    #[test]
    fn revocation_not_needed_when_the_member_already_dropped_them() {
        let m = member(2, &[0, 1]);
        let next = reconcile(&m, 3, &parts(&[0]), &HashMap::new(), Some(&owned(&[0]))).unwrap();
        assert_eq!((next.state, next.member_epoch), (MemberState::Stable, 3));
        assert_eq!(next.assigned, parts(&[0]));
    }

    #[test]
    fn reconciled_member_is_unchanged_and_unknown_state_fences() {
        let m = member(3, &[0]);
        assert_eq!(reconcile(&m, 3, &parts(&[0]), &HashMap::new(), None).unwrap(), m);
        let mut u = member(3, &[0]);
        u.state = MemberState::Unknown;
        assert!(reconcile(&u, 3, &parts(&[0]), &HashMap::new(), Some(&owned(&[0]))).is_err());
        let next = reconcile(&u, 3, &parts(&[0]), &HashMap::new(), Some(&[])).unwrap();
        assert_eq!(next.state, MemberState::Stable);
    }
}
