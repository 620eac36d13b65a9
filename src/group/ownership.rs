//! Which groups this broker coordinates, in a cluster (Kafka's group coordinator partition
//! loading): a group lives on offsets partition `partition_for(group)`, and is coordinated by
//! the leader of that partition. When this broker becomes its leader it replays the partition
//! (`elect`); when leadership moves away it drops the partition's groups (`resign`). Requests
//! for a group whose partition is not loaded here get NOT_COORDINATOR, as in Kafka.
//! A single node owns every partition (`Inner::owned` is `None`) and loads all at start.
//! Invariants: the in-memory state of a group exists only while its partition is owned; a
//! partition is replayed only after every group of it was dropped.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;

use super::{java_hash, GroupCoordinator, OFFSETS_TOPIC};
use crate::log::Partition;

impl GroupCoordinator {
    /// From now on groups are coordinated only on offsets partitions this broker leads.
    pub fn set_cluster_mode(&self, replicas: std::sync::Arc<crate::replica::manager::ReplicaManager>) {
        let mut inner = self.lock();
        inner.owned = Some(BTreeSet::new());
        inner.groups.clear();
        inner.offsets.clear();
        inner.pending_txn.clear();
        inner.consumer.clear();
        drop(inner);
        let _ = self.replicas.set(replicas);
    }

    /// Whether this broker coordinates `group` (NOT_COORDINATOR if another broker does).
    pub fn check_coordinator(&self, group: &str) -> Result<(), ResponseError> {
        let p = self.partition_for(group);
        match &self.lock().owned {
            Some(owned) if !owned.contains(&p) => Err(ResponseError::NotCoordinator),
            _ => Ok(()),
        }
    }

    /// This broker became the leader of offsets partition `partition`: its groups are loaded
    /// and coordinated here.
    pub fn elect(&self, partition: &Partition) {
        let p = partition.index;
        self.drop_partition(p);
        if let Err(e) = self.load_partition(partition) {
            tracing::error!(partition = p, error = %e, "loading {OFFSETS_TOPIC} failed");
            return;
        }
        if let Some(owned) = &mut self.lock().owned {
            owned.insert(p);
        }
    }

    /// Leadership of offsets partition `p` moved away: its groups are no longer coordinated here.
    pub fn resign(&self, p: i32) {
        let was_owned = self.lock().owned.as_mut().is_some_and(|owned| owned.remove(&p));
        if was_owned {
            self.drop_partition(p);
            tracing::info!(partition = p, "group coordinator unloaded {OFFSETS_TOPIC}");
        }
    }

    /// Drops the in-memory state of every group of offsets partition `p`. Members waiting on a
    /// rebalance are answered by their dropped channels.
    fn drop_partition(&self, p: i32) {
        let partitions = self.config.offsets_topic_partitions;
        let here = |g: &String| (java_hash(g) & 0x7fff_ffff) % partitions == p;
        let mut inner = self.lock();
        inner.groups.retain(|g, _| !here(g));
        inner.offsets.retain(|g, _| !here(g));
        inner.consumer.retain(|g, _| !here(g));
        for groups in inner.pending_txn.values_mut() {
            groups.retain(|g, _| !here(g));
        }
        inner.pending_txn.retain(|_, groups| !groups.is_empty());
    }
}
