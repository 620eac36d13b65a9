//! Which transactional ids this broker coordinates, in a cluster (Kafka's transaction state
//! partition loading): a transactional id lives on `__transaction_state` partition
//! `partition_for(id)` and is coordinated by that partition's leader. When this broker becomes
//! the leader it replays the partition (`elect`) and then completes the transactions it finds
//! prepared (their markers may be missing); when leadership moves away it drops the
//! partition's ids (`resign`). Requests for an id whose partition is not loaded here get
//! NOT_COORDINATOR, as in Kafka.
//! A single node owns every partition (`owned` is `None`) and loads all at start.
//! Invariants: the in-memory state of an id exists only while its partition is owned; the
//! coordinator epoch of a partition is the leader epoch it was loaded at, and markers written
//! for its ids carry it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;

use super::coordinator::{Cluster, Deps, TxnCoordinator, TxnMeta, TXN_TOPIC};
use super::records::{decode_key, TxnState, TxnValue};
use crate::log::Partition;
use crate::replica::manager::ReplicaManager;

impl TxnCoordinator {
    /// From now on transactional ids are coordinated only on `__transaction_state` partitions
    /// this broker leads; markers for partitions led elsewhere go out on `listener`. The
    /// coordinator's writes go through `replicas` as its `Deps` give them; it keeps only their
    /// node id.
    pub fn set_cluster_mode(
        &self,
        replicas: Arc<ReplicaManager>,
        security: Arc<crate::security::client::ClientSecurity>,
    ) {
        *self.owned() = Some(BTreeMap::new());
        self.lock().clear();
        let _ = self.cluster.set(Cluster::new(replicas.node_id(), security));
    }

    pub fn is_cluster(&self) -> bool {
        self.cluster.get().is_some()
    }

    /// Whether this broker coordinates `id` (NOT_COORDINATOR if another broker does).
    pub fn check_coordinator(&self, id: &str) -> Result<(), ResponseError> {
        let p = self.partition_for(id);
        match &*self.owned() {
            Some(owned) if !owned.contains_key(&p) => Err(ResponseError::NotCoordinator),
            _ => Ok(()),
        }
    }

    /// The coordinator epoch markers for `id` carry: the leader epoch its partition was loaded at.
    pub(super) fn coordinator_epoch(&self, id: &str) -> i32 {
        let p = self.partition_for(id);
        self.owned().as_ref().and_then(|owned| owned.get(&p).copied()).unwrap_or(0)
    }

    /// This broker became the leader of `__transaction_state` partition `partition` at
    /// `leader_epoch`: its ids are loaded and coordinated here. Returns the ids found prepared,
    /// which the caller completes (`complete_loaded`).
    pub fn elect(&self, partition: &Partition, leader_epoch: i32) -> Vec<(String, TxnMeta)> {
        let p = partition.index;
        self.drop_partition(p);
        let loaded = match replay(partition) {
            Ok(loaded) => loaded,
            Err(e) => {
                tracing::error!(partition = p, error = %e, "loading {TXN_TOPIC} failed");
                return Vec::new();
            }
        };
        let pending = prepared(&loaded);
        tracing::info!(
            partition = p,
            leader_epoch,
            transactional_ids = loaded.len(),
            completing = pending.len(),
            "transaction coordinator loaded {TXN_TOPIC}"
        );
        self.lock().extend(loaded);
        if let Some(owned) = &mut *self.owned() {
            owned.insert(p, leader_epoch);
        }
        pending
    }

    /// Completes transactions an `elect` found prepared (each at its own turn).
    pub async fn complete_loaded(&self, deps: &Deps<'_>, pending: Vec<(String, TxnMeta)>) {
        for (id, _) in pending {
            let _op = self.op(&id).await;
            let Some(meta) = self.lock().get(&id).cloned() else { continue };
            if !is_prepared(&meta) {
                continue;
            }
            if let Err(e) = self.complete(deps, &id, meta).await {
                tracing::warn!(transactional_id = %id, error = ?e, "cannot complete a transaction found prepared");
            }
        }
    }

    /// Leadership of `__transaction_state` partition `p` moved away: its ids are no longer
    /// coordinated here.
    pub fn resign(&self, p: i32) {
        let was_owned = self.owned().as_mut().is_some_and(|owned| owned.remove(&p).is_some());
        if was_owned {
            self.drop_partition(p);
            tracing::info!(partition = p, "transaction coordinator unloaded {TXN_TOPIC}");
        }
    }

    /// Whether this broker still owns `id`'s partition at the coordinator epoch it had.
    pub(super) fn still_owns(&self, id: &str, coordinator_epoch: i32) -> bool {
        let p = self.partition_for(id);
        match &*self.owned() {
            None => true,
            Some(owned) => owned.get(&p) == Some(&coordinator_epoch),
        }
    }

    /// Verifies (`verify_only`) or adds `partitions` in `id`'s ongoing transaction at
    /// `producer`, on whichever broker coordinates `id`: here directly, else with
    /// AddPartitionsToTxn to the leader of its `__transaction_state` partition (Kafka's
    /// `AddPartitionsToTxnManager`). One answer for all the partitions.
    pub async fn verify_or_add(
        &self,
        deps: &Deps<'_>,
        id: &str,
        producer: (i64, i16),
        verify_only: bool,
        partitions: Vec<(String, i32)>,
    ) -> Result<(), ResponseError> {
        let remote = match (self.cluster.get(), deps.link) {
            (Some(cluster), Some(link)) if self.check_coordinator(id).is_err() => Some((cluster, link)),
            _ => None,
        };
        let Some((cluster, link)) = remote else {
            if verify_only {
                return partitions.iter().try_for_each(|p| self.verify(Some(id), producer.0, producer.1, p));
            }
            return self.add_partitions(deps, id, producer.0, producer.1, partitions, super::transitions::TV_2).await;
        };
        let image = link.image();
        let p = self.partition_for(id);
        let leader = image.topic(TXN_TOPIC).and_then(|t| t.partitions.get(&p)).map_or(-1, |p| p.leader);
        let Some(addr) = image.endpoint_addr(leader, &cluster.listener) else {
            return Err(ResponseError::CoordinatorNotAvailable);
        };
        let answers = cluster.add_partitions_remote(leader, &addr, id, producer, verify_only, &partitions).await;
        answers.into_iter().find_map(|(_, r)| r.err()).map_or(Ok(()), Err)
    }

    fn drop_partition(&self, p: i32) {
        let partitions = self.config.partitions;
        let here = |id: &String| (crate::group::java_hash(id) & 0x7fff_ffff) % partitions == p;
        self.lock().retain(|id, _| !here(id));
    }
}

/// Whether `meta`'s transaction is prepared (PrepareCommit or PrepareAbort): its markers may be
/// missing, so the coordinator that loads it completes it.
fn is_prepared(meta: &TxnMeta) -> bool {
    matches!(meta.state, TxnState::PrepareCommit | TxnState::PrepareAbort)
}

/// The transactions of `loaded` to complete once it is loaded: those found prepared.
pub(super) fn prepared(loaded: &HashMap<String, TxnMeta>) -> Vec<(String, TxnMeta)> {
    loaded.iter().filter(|(_, m)| is_prepared(m)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// The latest state of every transactional id in one `__transaction_state` partition.
pub(super) fn replay(partition: &Partition) -> anyhow::Result<HashMap<String, TxnMeta>> {
    let mut loaded: HashMap<String, TxnMeta> = HashMap::new();
    crate::group::replay(partition, |record| {
        let Some(id) = record.key.as_deref().and_then(decode_key) else { return };
        match record.value.as_deref().and_then(TxnValue::decode) {
            Some(v) => {
                loaded.insert(id, TxnMeta::from_value(v));
            }
            None => {
                loaded.remove(&id);
            }
        }
    })?;
    Ok(loaded)
}
