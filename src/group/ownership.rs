//! Which groups this broker coordinates, in a cluster (Kafka's group coordinator partition
//! loading): a group lives on offsets partition `partition_for(group)`, and is coordinated by
//! the leader of that partition. When this broker becomes its leader it replays the partition
//! (`elect`, then `run_load` off the async workers, as Kafka's coordinator loads in the
//! background); when leadership moves away it drops the partition's groups (`resign`).
//! Requests for a group whose partition is loading get COORDINATOR_LOAD_IN_PROGRESS, and for a
//! group whose partition is not led here NOT_COORDINATOR, as in Kafka.
//! A single node owns every partition (`Inner::owned` is `None`) and loads all at start.
//! Invariants: the in-memory state of a group exists only while its partition is owned; a
//! partition is replayed only after every group of it was dropped; the coordinator's lock is
//! never held while a partition is read from disk, except for what was appended to it while
//! it loaded; of several loads of one partition only the latest hands its groups over.

use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;

use super::{absorb, java_hash, GroupCoordinator, Inner, OFFSETS_TOPIC};
use crate::log::Partition;

/// One load of an offsets partition this broker was elected to lead (`elect`, `run_load`).
pub struct Load {
    partition: Arc<Partition>,
    /// Which load of the partition this is: only the latest hands its groups over.
    number: u64,
}

impl GroupCoordinator {
    /// From now on groups are coordinated only on offsets partitions this broker leads.
    pub fn set_cluster_mode(&self, replicas: std::sync::Arc<crate::replica::manager::ReplicaManager>) {
        let mut inner = self.lock();
        inner.owned = Some(BTreeSet::new());
        inner.groups.clear();
        inner.offsets.clear();
        inner.pending_txn.clear();
        inner.consumer.clear();
        inner.loading.clear();
        drop(inner);
        let _ = self.replicas.set(replicas);
    }

    /// Whether this broker coordinates `group`: NOT_COORDINATOR if another broker does,
    /// COORDINATOR_LOAD_IN_PROGRESS while its offsets partition is being loaded here.
    pub fn check_coordinator(&self, group: &str) -> Result<(), ResponseError> {
        let p = self.partition_for(group);
        let inner = self.lock();
        match &inner.owned {
            Some(owned) if !owned.contains(&p) => match inner.loading.contains_key(&p) {
                true => Err(ResponseError::CoordinatorLoadInProgress),
                false => Err(ResponseError::NotCoordinator),
            },
            _ => Ok(()),
        }
    }

    /// Whether any offsets partition is being loaded here (ListGroups then answers
    /// COORDINATOR_LOAD_IN_PROGRESS, as Kafka's does).
    pub fn is_loading(&self) -> bool {
        !self.lock().loading.is_empty()
    }

    /// This broker became the leader of offsets partition `partition`: its groups will be
    /// coordinated here once `run_load` has replayed it, and until then get
    /// COORDINATOR_LOAD_IN_PROGRESS. Takes no disk I/O: the caller runs the returned load
    /// where blocking is allowed.
    pub fn elect(&self, partition: &Arc<Partition>) -> Load {
        let p = partition.index;
        self.drop_partition(p);
        let mut inner = self.lock();
        if let Some(owned) = &mut inner.owned {
            owned.remove(&p);
        }
        inner.loads += 1;
        let number = inner.loads;
        inner.loading.insert(p, number);
        Load { partition: partition.clone(), number }
    }

    /// Replays the partition of `load` without holding the coordinator's lock, then, under it,
    /// what was appended meanwhile (transaction markers), and hands the groups over, unless
    /// the partition was resigned or elected again since (then the load is dropped).
    pub fn run_load(&self, load: Load) {
        let p = load.partition.index;
        let current = |inner: &Inner| inner.loading.get(&p) == Some(&load.number);
        let read = self.read_partition(&load.partition, Inner::default(), None);
        let mut inner = self.lock();
        if !current(&inner) {
            return;
        }
        let finished = read.and_then(|(loaded, end)| self.read_partition(&load.partition, loaded, Some(end)));
        inner.loading.remove(&p);
        match finished {
            Ok((loaded, _)) => {
                absorb(&mut inner, loaded);
                if let Some(owned) = &mut inner.owned {
                    owned.insert(p);
                }
            }
            Err(e) => tracing::error!(partition = p, error = %e, "loading {OFFSETS_TOPIC} failed"),
        }
    }

    /// Leadership of offsets partition `p` moved away: its groups are no longer coordinated here.
    pub fn resign(&self, p: i32) {
        let mut inner = self.lock();
        let was_loading = inner.loading.remove(&p).is_some();
        let was_owned = inner.owned.as_mut().is_some_and(|owned| owned.remove(&p));
        drop(inner);
        if was_owned || was_loading {
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

#[cfg(test)]
#[path = "ownership_tests.rs"]
mod tests;
