//! Which transactional ids this broker coordinates, in a cluster (Kafka's transaction state
//! partition loading): a transactional id lives on `__transaction_state` partition
//! `partition_for(id)` and is coordinated by that partition's leader. When this broker becomes
//! the leader it replays the partition (`elect`, then `run_load` off the async workers) and then
//! completes the transactions it finds prepared (their markers may be missing); when leadership
//! moves away it drops the partition's ids (`resign`). Requests for an id whose partition is
//! loading get COORDINATOR_LOAD_IN_PROGRESS, for one whose partition is not led here
//! NOT_COORDINATOR, as in Kafka.
//! A single node owns every partition (`owned` is `None`) and loads all at start.
//! Invariants: the in-memory state of an id exists only while its partition is owned; the
//! coordinator epoch of a partition is the leader epoch it was loaded at, and markers written
//! for its ids carry it; of several loads of one partition only the latest hands its ids over.
//! Lock order: `loading`, then `owned` or the ids.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;

use super::coordinator::{Cluster, Deps, TxnCoordinator, TxnMeta, TXN_TOPIC};
use super::records::{decode_key, TxnState, TxnValue};
use crate::log::Partition;
use crate::replica::manager::ReplicaManager;

/// One load of a `__transaction_state` partition this broker was elected to lead (`elect`,
/// `run_load`).
pub struct Load {
    partition: Arc<Partition>,
    leader_epoch: i32,
    /// Which load of the partition this is: only the latest hands its ids over.
    number: u64,
}

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

    /// Whether this broker coordinates `id`: NOT_COORDINATOR if another broker does,
    /// COORDINATOR_LOAD_IN_PROGRESS while its partition is being loaded here.
    pub fn check_coordinator(&self, id: &str) -> Result<(), ResponseError> {
        let p = self.partition_for(id);
        // `loading` before `owned`: a load marks its partition owned before it stops loading.
        if self.loading().contains_key(&p) {
            return Err(ResponseError::CoordinatorLoadInProgress);
        }
        match &*self.owned() {
            Some(owned) if !owned.contains_key(&p) => Err(ResponseError::NotCoordinator),
            _ => Ok(()),
        }
    }

    /// Whether another broker coordinates `id` (its requests go there).
    pub fn coordinated_elsewhere(&self, id: &str) -> bool {
        self.check_coordinator(id) == Err(ResponseError::NotCoordinator)
    }

    /// The coordinator epoch markers for `id` carry: the leader epoch its partition was loaded at.
    pub(super) fn coordinator_epoch(&self, id: &str) -> i32 {
        let p = self.partition_for(id);
        self.owned().as_ref().and_then(|owned| owned.get(&p).copied()).unwrap_or(0)
    }

    /// This broker became the leader of `__transaction_state` partition `partition` at
    /// `leader_epoch`: its ids will be coordinated here once `run_load` has replayed it, and
    /// until then get COORDINATOR_LOAD_IN_PROGRESS. Takes no disk I/O: the caller runs the
    /// returned load where blocking is allowed.
    pub fn elect(&self, partition: &Arc<Partition>, leader_epoch: i32) -> Load {
        let p = partition.index;
        let mut loading = self.loading();
        let number = self.loads.fetch_add(1, Ordering::Relaxed) + 1;
        loading.insert(p, number);
        if let Some(owned) = &mut *self.owned() {
            owned.remove(&p);
        }
        self.drop_partition(p);
        Load { partition: partition.clone(), leader_epoch, number }
    }

    /// Replays the partition of `load` (no lock held while it is read) and hands its ids over,
    /// unless the partition was resigned or elected again since. Returns the ids found prepared,
    /// which the caller completes (`complete_loaded`). No id of the partition is written while
    /// it loads: each gets COORDINATOR_LOAD_IN_PROGRESS.
    pub fn run_load(&self, load: Load) -> Vec<(String, TxnMeta)> {
        let p = load.partition.index;
        let read = replay(&load.partition);
        let mut loading = self.loading();
        if loading.get(&p) != Some(&load.number) {
            return Vec::new();
        }
        let loaded = match read {
            Ok(loaded) => loaded,
            Err(e) => {
                loading.remove(&p);
                tracing::error!(partition = p, error = %e, "loading {TXN_TOPIC} failed");
                return Vec::new();
            }
        };
        let pending = prepared(&loaded);
        tracing::info!(
            partition = p,
            leader_epoch = load.leader_epoch,
            transactional_ids = loaded.len(),
            completing = pending.len(),
            "transaction coordinator loaded {TXN_TOPIC}"
        );
        self.lock().extend(loaded);
        if let Some(owned) = &mut *self.owned() {
            owned.insert(p, load.leader_epoch);
        }
        loading.remove(&p);
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
        let loading = self.loading().remove(&p).is_some();
        let was_owned = self.owned().as_mut().is_some_and(|owned| owned.remove(&p).is_some());
        if was_owned || loading {
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
            (Some(cluster), Some(link)) if self.coordinated_elsewhere(id) => Some((cluster, link)),
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
