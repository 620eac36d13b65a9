//! Eligible leader replicas (KIP-966 part 1, Kafka 4.1's `PartitionChangeBuilder` with ELR on):
//! which replicas that left the ISR may still lead, and the last known leader of a partition
//! whose ISR emptied.
//!
//! ELR is on when `eligible.leader.replicas.version` >= 1 and `metadata.version` >= 4.0-IV1
//! (Kafka's `isElrSupported`). The effective min ISR of a topic is its `min.insync.replicas`,
//! else the cluster default (a Kafka 4.1 cluster with ELR always has one: written at format
//! time and when ELR is enabled, and it cannot be removed while ELR is on), else Kafka's default
//! 1, capped at the replication factor (Kafka's `getTopicEffectiveMinIsr`).
//!
//! Rules (`target_elr`): while the ISR is at or above the min ISR, the ELR is empty. Below it,
//! the ELR is the current ELR and ISR minus the new ISR and minus a broker that shut down
//! uncleanly. Kafka keeps it in a hash set; here it is in ascending order, the order Kafka's
//! small-integer hash sets iterate in. A leader elected from the ELR leaves it and becomes the
//! ISR alone; an unclean election empties the ELR.
//!
//! The last known leader (Kafka's `useLastKnownLeaderInBalancedRecovery`, on in Kafka 4.1): the
//! first change that empties the ISR records the leader as the last known ELR, alone; it is kept
//! while the partition has no leader and cleared once it has one again. When the ISR and the ELR
//! are both empty, that replica may be elected, uncleanly, if it is an acceptable leader
//! (KAFKA-19522: never a fenced one).
//!
//! Invariants: the ISR and the ELR never overlap; ELR members are replicas.

use crate::metadata::image::{MetadataImage, PartitionImage, BROKER_RESOURCE, TOPIC_RESOURCE};

/// The feature that turns ELR on.
pub const ELR_FEATURE: &str = "eligible.leader.replicas.version";
/// `MetadataVersion.IBP_4_0_IV1`, the first level supporting ELR.
pub const ELR_METADATA_VERSION: i16 = 23;
const MIN_ISR: &str = "min.insync.replicas";

/// Whether the controller tracks ELR (Kafka's `ReplicationControlManager.isElrEnabled`).
pub fn enabled(image: &MetadataImage) -> bool {
    image.features.get(ELR_FEATURE).is_some_and(|l| *l >= 1) && image.metadata_version_at_least(ELR_METADATA_VERSION)
}

/// Kafka's `getTopicEffectiveMinIsr`: the topic's min ISR, at most its replication factor.
pub fn effective_min_isr(image: &MetadataImage, topic: &str, partition: &PartitionImage) -> usize {
    let lookup = |resource: (i8, String)| {
        image.configs.get(&resource).and_then(|c| c.get(MIN_ISR)).and_then(|v| v.trim().parse::<i64>().ok())
    };
    let configured = lookup((TOPIC_RESOURCE, topic.to_string()))
        .or_else(|| lookup((BROKER_RESOURCE, String::new())))
        .unwrap_or(1)
        .max(1);
    (configured as usize).min(partition.replicas.len().max(1))
}

/// The min ISR to build a change with when ELR is on, `None` when it is off.
pub fn min_isr_if_enabled(image: &MetadataImage, topic: &str, partition: &PartitionImage) -> Option<usize> {
    enabled(image).then(|| effective_min_isr(image, topic, partition))
}

/// Kafka's `maybePopulateTargetElr`: the ELR for `target_isr`, starting from the partition's,
/// without the replicas of `unclean_shutdown`. (Kafka also computes a last known ELR there, but
/// with the last known leader in use it never writes it: the last known ELR holds the leader.)
pub fn target_elr(
    partition: &PartitionImage,
    target_isr: &[i32],
    min_isr: usize,
    unclean_shutdown: &[i32],
) -> Vec<i32> {
    if target_isr.len() >= min_isr {
        return Vec::new();
    }
    let mut elr: Vec<i32> = partition.eligible_leader_replicas.iter().chain(&partition.isr).copied().collect();
    elr.sort_unstable();
    elr.dedup();
    elr.retain(|r| !target_isr.contains(r) && !unclean_shutdown.contains(r));
    elr
}

#[cfg(test)]
#[path = "elr_tests.rs"]
mod elr_tests;
