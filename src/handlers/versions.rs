//! The API versions Ketch serves: the table ApiVersions advertises and requests are checked
//! against. An API appears here only once it fully works (clients change protocol on what they
//! see advertised, e.g. franz-go switches to KIP-848 when ConsumerGroupHeartbeat appears).

use kafka_protocol::messages::ApiKey;

/// (API, lowest version advertised, highest version served). Ranges follow Apache Kafka 4.1.
pub const SERVED: &[(ApiKey, i16, i16)] = &[
    // Kafka 4.x advertises Produce from v0 but rejects v0-2 (librdkafka turns compression off
    // when v0 is missing: KAFKA-18659). Requests below PRODUCE_MIN_ACCEPTED are refused.
    (ApiKey::Produce, 0, 13),
    (ApiKey::Fetch, 4, 18),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::ListConfigResources, 0, 1),
    // KRaft's quorum (`kafka-metadata-quorum --bootstrap-server`): forwarded to the controller
    // in a cluster, answered by a single node for its own metadata log.
    (ApiKey::DescribeQuorum, 0, 2),
    // SASL (security::sasl): Kafka 4.1 still serves SaslHandshake v0 (raw tokens after it).
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    // SCRAM credentials (KIP-554).
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    // Delegation tokens (KIP-48, KIP-373; handlers::tokens), at Kafka 4.1's versions.
    (ApiKey::CreateDelegationToken, 1, 3),
    (ApiKey::RenewDelegationToken, 1, 2),
    (ApiKey::ExpireDelegationToken, 1, 2),
    (ApiKey::DescribeDelegationToken, 1, 3),
    // Client quotas (KIP-546; quota::).
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
    // No authorizer: answered SECURITY_DISABLED, as Kafka does without one.
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::AlterReplicaLogDirs, 1, 2),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    // Consumer groups: classic protocol, and KIP-848's consumer protocol (ConsumerGroupHeartbeat,
    // ConsumerGroupDescribe; OffsetCommit / OffsetFetch v9 carry its member epochs).
    // OffsetCommit v10 / OffsetFetch v10 (topic ids) are not served (the codec stops at v9).
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    // Idempotence and transactions, protocol versions 1 and 2 (`transaction.version` is
    // finalized at 2 in ApiVersions; EndTxn v5, TxnOffsetCommit v5 and Produce v12+ are
    // protocol 2 and must be served together with it). InitProducerId v6 is KIP-939 two-phase
    // commit. AddPartitionsToTxn v4+ and WriteTxnMarkers are broker-to-broker (a partition
    // leader asks a coordinator; a coordinator writes markers on partition leaders).
    (ApiKey::InitProducerId, 0, 5),
    // Finalized features (`transaction.version`): single node, so this broker is the controller.
    (ApiKey::UpdateFeatures, 0, 2),
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::WriteTxnMarkers, 1, 1),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 5),
    (ApiKey::TxnOffsetCommit, 0, 5),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 2),
];

pub const PRODUCE_MIN_ACCEPTED: i16 = 3;

/// Whether a request at `version` reaches a handler.
pub fn is_served(api_key: ApiKey, version: i16) -> bool {
    SERVED.iter().any(|(key, min, max)| {
        let min = if *key == ApiKey::Produce { PRODUCE_MIN_ACCEPTED } else { *min };
        *key == api_key && version >= min && version <= *max
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_ranges_are_decodable_by_the_codec_crate() {
        for (key, _, max) in SERVED {
            let range = key.valid_versions();
            assert!(*max <= range.max, "{key:?} v{max} is beyond what kafka-protocol decodes");
        }
    }

    #[test]
    fn produce_v0_to_v2_are_advertised_but_refused() {
        assert!(!is_served(ApiKey::Produce, 2));
        assert!(is_served(ApiKey::Produce, 3));
    }
}
