//! ISR changes sent to the active controller (Kafka's `AlterPartitionManager`): the replica
//! manager's proposals, batched into AlterPartition v3 (topic ids, each new ISR member with
//! the broker epoch it last fetched with, KIP-903), and the controller's answers handed back
//! to each partition's leader state.
//! Invariants: a proposal is answered exactly once (committed, or dropped so the leader may
//! propose again); nothing is sent before this broker has a broker epoch.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::alter_partition_request::{BrokerState, PartitionData, TopicData};
use kafka_protocol::messages::{AlterPartitionRequest, BrokerId};
use tokio::sync::watch;
use uuid::Uuid;

use super::lifecycle::State;
use super::ControllerLink;
use crate::log::now_ms;
use crate::replica::manager::ReplicaManager;
use crate::replica::state::IsrProposal;

const ALTER_PARTITION_VERSION: i16 = 3;
/// Before proposing again after the controller could not be reached.
const RETRY_BACKOFF: Duration = Duration::from_millis(500);

pub async fn run(
    manager: Arc<ReplicaManager>,
    link: ControllerLink,
    state: watch::Receiver<State>,
    mut stop: watch::Receiver<bool>,
) {
    while !*stop.borrow() {
        tokio::select! {
            _ = manager.proposed.notified() => {}
            _ = stop.changed() => continue,
        }
        let proposals = manager.take_proposals();
        if proposals.is_empty() {
            continue;
        }
        let broker_epoch = match *state.borrow() {
            State::Fenced(e) | State::Running(e) => e,
            _ => -1,
        };
        let answered = match send(&manager, &link, broker_epoch, &proposals).await {
            Ok(answered) => answered,
            Err(e) => {
                tracing::warn!(error = %e, "AlterPartition failed; the leaders will propose again");
                tokio::time::sleep(RETRY_BACKOFF).await;
                BTreeMap::new()
            }
        };
        for (topic_id, p, proposal) in proposals {
            let Some(replica) = manager.by_id(topic_id, p) else { continue };
            let committed = answered.get(&(topic_id, p)).cloned().flatten();
            tracing::info!(topic = %replica.partition.topic, partition = p, proposed = ?proposal.isr, committed = ?committed, "ISR change answered");
            replica.on_isr_committed(proposal.leader_epoch, committed, now_ms());
        }
        manager.notify_appended();
    }
}

/// Per partition: the committed (ISR, partition epoch), or `None` when refused.
type Answers = BTreeMap<(Uuid, i32), Option<(Vec<i32>, i32)>>;

async fn send(
    manager: &ReplicaManager,
    link: &ControllerLink,
    broker_epoch: i64,
    proposals: &[(Uuid, i32, IsrProposal)],
) -> anyhow::Result<Answers> {
    anyhow::ensure!(broker_epoch >= 0, "not registered yet");
    let mut topics: BTreeMap<Uuid, Vec<PartitionData>> = BTreeMap::new();
    for (topic_id, p, proposal) in proposals {
        let members = proposal
            .isr
            .iter()
            .map(|&b| {
                // -1: the controller skips the epoch check (a member this leader has not
                // heard from since it became leader).
                let epoch = if b == manager.node_id() { broker_epoch } else { manager.follower_epoch(b) };
                BrokerState::default().with_broker_id(BrokerId(b)).with_broker_epoch(epoch)
            })
            .collect();
        topics.entry(*topic_id).or_default().push(
            PartitionData::default()
                .with_partition_index(*p)
                .with_leader_epoch(proposal.leader_epoch)
                .with_new_isr_with_epochs(members)
                .with_leader_recovery_state(0)
                .with_partition_epoch(proposal.partition_epoch),
        );
    }
    let request = AlterPartitionRequest::default()
        .with_broker_id(BrokerId(manager.node_id()))
        .with_broker_epoch(broker_epoch)
        .with_topics(
            topics.into_iter().map(|(id, ps)| TopicData::default().with_topic_id(id).with_partitions(ps)).collect(),
        );
    let response = link.forward(ALTER_PARTITION_VERSION, &request).await?;
    anyhow::ensure!(response.error_code == 0, "AlterPartition refused with error {}", response.error_code);
    let mut answers = Answers::new();
    for topic in &response.topics {
        for p in &topic.partitions {
            let committed = (p.error_code == 0).then(|| (p.isr.iter().map(|b| b.0).collect(), p.partition_epoch));
            if p.error_code != 0 {
                tracing::info!(partition = p.partition_index, code = p.error_code, "AlterPartition refused a change");
            }
            answers.insert((topic.topic_id, p.partition_index), committed);
        }
    }
    Ok(answers)
}
