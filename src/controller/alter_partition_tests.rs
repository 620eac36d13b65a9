//! AlterPartition: shrink and expand applied to an image, and every refusal.

use kafka_protocol::messages::alter_partition_request::TopicData;
use uuid::Uuid;

use super::*;
use crate::controller::test_cluster::{config, Cluster};
use crate::metadata::records::RegisterBrokerRecord;

const T: u128 = 1;

/// Brokers 1..=3 unfenced; topic `t` partition 0 on [1, 2, 3], partition 1 on [2, 1].
fn cluster() -> (Cluster, Uuid) {
    let mut c = Cluster::new();
    for b in 1..=3 {
        c.add_broker(b, None, false);
    }
    let t = c.add_topic("t", T, &[&[1, 2, 3], &[2, 1]]);
    (c, t)
}

fn members(c: &Cluster, isr: &[i32]) -> Vec<BrokerState> {
    isr.iter()
        .map(|&b| {
            let epoch = c.image.brokers.get(&b).map_or(-1, |x| x.epoch);
            BrokerState::default().with_broker_id(BrokerId(b)).with_broker_epoch(epoch)
        })
        .collect()
}

/// Partition `p`'s change to `isr`, at the partition's current epochs.
fn data(c: &Cluster, t: Uuid, p: i32, isr: &[i32]) -> PartitionData {
    let now = c.partition(t, p);
    PartitionData::default()
        .with_partition_index(p)
        .with_leader_epoch(now.leader_epoch)
        .with_partition_epoch(now.partition_epoch)
        .with_new_isr_with_epochs(members(c, isr))
        .with_leader_recovery_state(RECOVERED)
}

fn request(c: &Cluster, from: i32, topic: Uuid, partitions: Vec<PartitionData>) -> AlterPartitionRequest {
    AlterPartitionRequest::default()
        .with_broker_id(BrokerId(from))
        .with_broker_epoch(c.image.brokers[&from].epoch)
        .with_topics(vec![TopicData::default().with_topic_id(topic).with_partitions(partitions)])
}

/// Sends, applies the records, returns each partition's (error code, answer).
fn send(c: &mut Cluster, request: &AlterPartitionRequest) -> Vec<PartitionAnswer> {
    let (records, response) = alter_partition(&c.image, &config(), request, 3);
    assert_eq!(response.error_code, 0);
    c.apply(&records);
    assert_eq!(response.topics.len(), request.topics.len());
    response.topics.into_iter().flat_map(|t| t.partitions).collect()
}

fn error(c: &mut Cluster, request: &AlterPartitionRequest) -> ResponseError {
    let before = c.next_offset;
    let answers = send(c, request);
    assert_eq!(c.next_offset, before, "a refusal writes nothing");
    assert_eq!(answers.len(), 1);
    ResponseError::try_from_code(answers[0].error_code).expect("an error")
}

fn isr(answer: &PartitionAnswer) -> Vec<i32> {
    answer.isr.iter().map(|b| b.0).collect()
}

#[test]
fn the_leader_shrinks_and_expands_its_isr() {
    let (mut c, t) = cluster();
    let req = request(&c, 1, t, vec![data(&c, t, 0, &[1, 2])]);
    let answers = send(&mut c, &req);
    assert_eq!(answers[0].error_code, 0);
    assert_eq!((answers[0].leader_id.0, isr(&answers[0])), (1, vec![1, 2]));
    assert_eq!((answers[0].leader_epoch, answers[0].partition_epoch), (0, 1), "no leader epoch bump on shrink");
    let p0 = c.partition(t, 0);
    assert_eq!((p0.isr.clone(), p0.leader, p0.partition_epoch), (vec![1, 2], 1, 1));

    let req = request(&c, 1, t, vec![data(&c, t, 0, &[1, 2, 3])]);
    let answers = send(&mut c, &req);
    assert_eq!((isr(&answers[0]), answers[0].partition_epoch), (vec![1, 2, 3], 2));
    assert_eq!(c.partition(t, 0).isr, vec![1, 2, 3]);

    // Nothing to change: no record, the current state answered.
    let before = c.next_offset;
    let req = request(&c, 1, t, vec![data(&c, t, 0, &[1, 2, 3])]);
    let answers = send(&mut c, &req);
    assert_eq!((answers[0].error_code, answers[0].partition_epoch), (0, 2));
    assert_eq!(c.next_offset, before);

    // Version 2: the ISR without epochs.
    let mut v2 = data(&c, t, 0, &[]);
    v2.new_isr = vec![BrokerId(1), BrokerId(3)];
    let (records, response) = alter_partition(&c.image, &config(), &request(&c, 1, t, vec![v2]), 2);
    assert_eq!(records.len(), 1);
    assert_eq!(isr(&response.topics[0].partitions[0]), vec![1, 3]);
}

#[test]
fn a_stale_requester_is_refused_whole() {
    let (mut c, t) = cluster();
    let mut r = request(&c, 1, t, vec![data(&c, t, 0, &[1, 2])]);
    r.broker_epoch -= 1;
    let (records, response) = alter_partition(&c.image, &config(), &r, 3);
    assert!(records.is_empty() && response.topics.is_empty());
    assert_eq!(response.error_code, ResponseError::StaleBrokerEpoch.code());
    let r = request(&c, 1, t, vec![]).with_broker_id(BrokerId(9));
    assert_eq!(alter_partition(&c.image, &config(), &r, 3).1.error_code, ResponseError::StaleBrokerEpoch.code());
    c.apply(&records);
}

#[test]
fn unknown_topics_and_partitions() {
    let (mut c, t) = cluster();
    let d = data(&c, t, 0, &[1, 2]);
    let req = request(&c, 1, Uuid::from_u128(77), vec![d.clone()]);
    assert_eq!(error(&mut c, &req), ResponseError::UnknownTopicId);
    let req = request(&c, 1, Uuid::nil(), vec![d.clone()]);
    assert_eq!(error(&mut c, &req), ResponseError::UnknownTopicId);
    let d9 = d.with_partition_index(9);
    let req = request(&c, 1, t, vec![d9]);
    assert_eq!(error(&mut c, &req), ResponseError::UnknownTopicOrPartition);
}

#[test]
fn epochs_and_leadership_are_checked_in_kafkas_order() {
    let (mut c, t) = cluster();
    let d = data(&c, t, 0, &[1, 2]);
    let r = |d: PartitionData| request(&c, 1, t, vec![d]);
    let (le, pe) = (d.leader_epoch, d.partition_epoch);
    let cases = [
        (d.clone().with_leader_epoch(le + 1), ResponseError::NotController),
        (d.clone().with_partition_epoch(pe + 1), ResponseError::NotController),
        (d.clone().with_leader_epoch(le - 1), ResponseError::FencedLeaderEpoch),
        (d.clone().with_partition_epoch(pe - 1), ResponseError::InvalidUpdateVersion),
    ];
    let requests: Vec<_> = cases.iter().map(|(d, e)| (r(d.clone()), *e)).collect();
    for (request, expected) in requests {
        assert_eq!(error(&mut c, &request), expected);
    }
    // Broker 2 is not partition 0's leader.
    let from2 = request(&c, 2, t, vec![data(&c, t, 0, &[1, 2])]);
    assert_eq!(error(&mut c, &from2), ResponseError::InvalidRequest);
}

#[test]
fn bad_isrs_are_invalid_requests() {
    let (mut c, t) = cluster();
    let mut four = data(&c, t, 0, &[1, 2]);
    four.new_isr_with_epochs.push(BrokerState::default().with_broker_id(BrokerId(4)).with_broker_epoch(-1));
    let twice = data(&c, t, 0, &[1, 2, 2]);
    let no_leader = data(&c, t, 0, &[2, 3]);
    let recovering_many = data(&c, t, 0, &[1, 2]).with_leader_recovery_state(RECOVERING);
    let recovering_again = data(&c, t, 0, &[1]).with_leader_recovery_state(RECOVERING);
    for d in [four, twice, no_leader, recovering_many, recovering_again] {
        let r = request(&c, 1, t, vec![d]);
        assert_eq!(error(&mut c, &r), ResponseError::InvalidRequest);
    }
}

#[test]
fn ineligible_replicas_are_refused() {
    let (mut c, t) = cluster();
    let mut stale = data(&c, t, 0, &[1, 2, 3]);
    stale.new_isr_with_epochs[2].broker_epoch -= 1;
    let r = request(&c, 1, t, vec![stale]);
    assert_eq!(error(&mut c, &r), ResponseError::IneligibleReplica);
    let mut unchecked = data(&c, t, 0, &[1, 2]);
    unchecked.new_isr_with_epochs[1].broker_epoch = -1;
    let r = request(&c, 1, t, vec![unchecked]);
    assert_eq!(send(&mut c, &r)[0].error_code, 0, "-1 skips the epoch check");

    c.set_broker(3, 1, 0);
    let r = request(&c, 1, t, vec![data(&c, t, 0, &[1, 2, 3])]);
    assert_eq!(error(&mut c, &r), ResponseError::IneligibleReplica, "fenced");
    c.set_broker(3, -1, 1);
    let r = request(&c, 1, t, vec![data(&c, t, 0, &[1, 2, 3])]);
    assert_eq!(error(&mut c, &r), ResponseError::IneligibleReplica, "in controlled shutdown");

    let u = c.add_topic("u", 2, &[&[1, 4]]);
    let r = request(&c, 1, u, vec![data(&c, u, 0, &[1, 4])]);
    assert_eq!(error(&mut c, &r), ResponseError::IneligibleReplica, "4 is not registered");
}

#[test]
fn a_recovering_leader_reports_it_recovered() {
    let (mut c, t) = cluster();
    let change = crate::metadata::records::PartitionChangeRecord {
        topic_id: t,
        partition_id: 1,
        isr: Some(vec![2]),
        leader_recovery_state: RECOVERING,
        ..Default::default()
    };
    c.apply(&[MetadataRecord::PartitionChange(change)]);
    let r = request(&c, 2, t, vec![data(&c, t, 1, &[2]).with_leader_recovery_state(RECOVERING)]);
    let answers = send(&mut c, &r);
    assert_eq!((answers[0].error_code, answers[0].leader_recovery_state), (0, RECOVERING), "no change");
    let r = request(&c, 2, t, vec![data(&c, t, 1, &[2, 1])]);
    let answers = send(&mut c, &r);
    assert_eq!((answers[0].leader_recovery_state, isr(&answers[0])), (RECOVERED, vec![2, 1]));
    assert_eq!(c.partition(t, 1).leader_recovery_state, RECOVERED);
}

#[test]
fn a_change_that_moves_leadership_answers_new_leader_elected() {
    let (mut c, t) = cluster();
    // Broker 1's copy of partition 0 is in a directory it no longer has online.
    let b1 = c.image.brokers[&1].clone();
    let record = RegisterBrokerRecord {
        broker_id: 1,
        broker_epoch: b1.epoch,
        incarnation_id: b1.incarnation_id,
        fenced: false,
        log_dirs: vec![Uuid::from_u128(999)],
        ..Default::default()
    };
    c.apply(&[MetadataRecord::RegisterBroker(record)]);
    let r = request(&c, 1, t, vec![data(&c, t, 0, &[1, 2])]);
    let (records, response) = alter_partition(&c.image, &config(), &r, 3);
    assert_eq!(records.len(), 1, "the change is still written");
    assert_eq!(response.topics[0].partitions[0].error_code, ResponseError::NewLeaderElected.code());
    c.apply(&records);
    let p0 = c.partition(t, 0);
    assert_eq!((p0.leader, p0.isr, p0.leader_epoch), (2, vec![1, 2], 1));
}

#[test]
fn one_request_answers_each_partition_on_its_own() {
    let (mut c, t) = cluster();
    let ok = data(&c, t, 0, &[1, 3]);
    let not_leader = data(&c, t, 1, &[2]);
    let req = request(&c, 1, t, vec![ok, not_leader]);
    let answers = send(&mut c, &req);
    assert_eq!(answers.len(), 2);
    assert_eq!((answers[0].partition_index, answers[0].error_code), (0, 0));
    assert_eq!((answers[1].partition_index, answers[1].error_code), (1, ResponseError::InvalidRequest.code()));
    assert_eq!(c.partition(t, 0).isr, vec![1, 3]);
    assert_eq!(c.partition(t, 1).isr, vec![2, 1]);
}
