//! Request handlers: one file per API, each translating a decoded request into calls on the
//! broker's state and building the response. Handlers hold no state of their own.
//!
//! Every request goes through `dispatch`, with the `RequestContext` of its connection (listener,
//! security protocol, principal, addresses). With an authorizer configured, each handler checks
//! what Kafka's `KafkaApis` checks for its API through `ctx.authz(broker)`
//! (`security::authorizer`), answering Kafka's error codes per item. `versions.rs` is the table of what is served; the protocol
//! layer above refuses anything else before decoding.

mod acls;
mod admin;
mod api_versions;
mod auto_create;
mod cluster;
mod configs;
mod consumer_groups;
mod controller_acls;
mod controller_admin;
pub mod controller_apis;
mod controller_authz;
pub(crate) mod controller_configs;
pub(crate) mod controller_describe_configs;
pub(crate) mod controller_features;
mod controller_quorum;
mod controller_quotas;
mod controller_reassign;
mod controller_scram;
pub(crate) mod controller_tokens;
mod controller_topics;
mod controller_voters;
mod create_topics;
mod delete_topics;
pub(crate) mod describe_quorum;
pub mod fetch;
mod find_coordinator;
mod forward;
mod group_configs;
mod groups;
mod list_config_resources;
mod list_offsets;
mod metadata;
mod metadata_image;
mod offsets;
pub mod produce;
mod quotas;
mod sasl;
mod tokens;
mod topic_partitions_image;
mod txn;
mod txn_broker;
pub mod txn_verify;
mod update_features;
pub mod versions;

use std::net::SocketAddr;
use std::sync::Arc;

use kafka_protocol::messages::{RequestHeader, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;

use crate::broker::Broker;
use crate::node::envelope::Origin;
use crate::node::{ControllerLink, Forwarder};
use crate::security::authorizer::Authz;

pub use api_versions::unsupported_version_response;

pub use crate::config::SecurityProtocol;

/// Per-connection facts a handler may need.
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// The listener the connection came in on (`listeners`' name, e.g. PLAINTEXT).
    pub listener: Arc<str>,
    pub security_protocol: SecurityProtocol,
    /// Who the client is: `User:<name>` once SASL authenticated, `User:<certificate subject>` on
    /// SSL with a client certificate, else `User:ANONYMOUS` (as Kafka's default principal builder).
    pub principal: String,
    /// Whether `principal` logged in with a delegation token (it may not manage tokens).
    pub token_authenticated: bool,
    /// The address the client reached us on: advertised when no advertised.listeners is set.
    pub local_addr: SocketAddr,
    pub peer_addr: SocketAddr,
}

impl RequestContext {
    /// What this request's principal may do (`security::authorizer`): allowed throughout when
    /// no authorizer is configured.
    pub fn authz<'a>(&'a self, broker: &'a Broker) -> Authz<'a> {
        Authz::new(broker.acls.as_ref(), &self.principal, self.peer_addr.ip())
    }
}

/// `link` forwarding this request for its client: in Kafka's Envelope, the controller sees the
/// client's principal, address, client id and correlation id.
pub(crate) fn forwarder<'a>(link: &'a ControllerLink, ctx: &RequestContext, header: &RequestHeader) -> Forwarder<'a> {
    link.forwarder(Origin {
        client_id: header.client_id.as_ref().map(|s| s.as_str().to_string()),
        correlation_id: header.correlation_id,
        principal: ctx.principal.clone(),
        token_authenticated: ctx.token_authenticated,
        address: ctx.peer_addr.ip(),
    })
}

/// What a handler produced: most requests have a response body to encode; a Produce is
/// appended and answered once durable (its response is completed later, so the connection can
/// append the next pipelined request meanwhile); a Fetch answer is written in parts (stored
/// batches go out with sendfile).
pub enum Reply {
    Response(ResponseKind),
    Produce(produce::Appended),
    Fetch(fetch::FetchAnswer),
    /// No response at all (unreachable requests).
    Nothing,
}

/// Runs the handler for a request.
pub async fn dispatch(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    header: &RequestHeader,
    version: i16,
    body: RequestKind,
) -> Reply {
    let client_id = header.client_id.as_ref().map(|s| s.as_str().to_string()).unwrap_or_default();
    // A single node's controller mutation quota, strict from the version `strict_since` on.
    let mutation = |strict_since: i16| {
        broker
            .quotas
            .mutation_quota(&crate::quota::Client::of(&ctx.principal, Some(&client_id)), version >= strict_since)
    };
    Reply::Response(match body {
        RequestKind::ApiVersions(_) => ResponseKind::ApiVersions(match broker.controller.get() {
            // A broker of a controller quorum: the finalized features of the quorum's image.
            Some(link) => api_versions::from_image(version, &link.image()),
            None => api_versions::handle(version, &broker.features),
        }),
        RequestKind::Metadata(req) => match broker.controller.get() {
            // A broker of a controller quorum answers from the quorum's metadata image.
            Some(link) => ResponseKind::Metadata(metadata_image::handle(broker, ctx, req, version, &link.image())),
            None => ResponseKind::Metadata(metadata::handle(broker, ctx, req, version)),
        },
        RequestKind::Produce(req) => {
            // Transaction protocol 2 adds partitions to transactions before appending.
            let auth = produce::ProduceAuth::check(broker, ctx, &req, version);
            let added = txn_verify::produce_implicit_adds(broker, &req, version, &auth).await;
            return Reply::Produce(produce::append(broker, req, version, &added, &auth));
        }
        RequestKind::Fetch(req) => return Reply::Fetch(fetch::handle(broker, ctx, req, version).await),
        RequestKind::ListOffsets(req) => ResponseKind::ListOffsets(list_offsets::handle(broker, ctx, req, version)),
        RequestKind::CreateTopics(req) => match broker.controller.get() {
            // A broker of a controller quorum: the controller creates topics (and checks them).
            Some(link) => ResponseKind::CreateTopics(
                forward::create_topics(&forwarder(link, ctx, header), &ctx.authz(broker), req, version).await,
            ),
            None => ResponseKind::CreateTopics(create_topics::handle(broker, ctx, req, version, mutation(6))),
        },
        RequestKind::FindCoordinator(req) => {
            ResponseKind::FindCoordinator(find_coordinator::handle(broker, ctx, req, version))
        }
        RequestKind::JoinGroup(req) => {
            ResponseKind::JoinGroup(groups::join(broker, ctx, req, version, &client_id).await)
        }
        RequestKind::SyncGroup(req) => ResponseKind::SyncGroup(groups::sync(broker, ctx, req, version).await),
        RequestKind::Heartbeat(req) => ResponseKind::Heartbeat(groups::heartbeat(broker, ctx, req)),
        RequestKind::LeaveGroup(req) => ResponseKind::LeaveGroup(groups::leave(broker, ctx, req, version).await),
        RequestKind::ListGroups(req) => ResponseKind::ListGroups(groups::list(broker, ctx, req, version)),
        RequestKind::DescribeGroups(req) => ResponseKind::DescribeGroups(groups::describe(broker, ctx, req, version)),
        RequestKind::DeleteGroups(req) => ResponseKind::DeleteGroups(groups::delete(broker, ctx, req).await),
        RequestKind::ConsumerGroupHeartbeat(req) => ResponseKind::ConsumerGroupHeartbeat(
            consumer_groups::heartbeat(broker, ctx, req, version, &client_id).await,
        ),
        RequestKind::ConsumerGroupDescribe(req) => {
            ResponseKind::ConsumerGroupDescribe(consumer_groups::describe(broker, ctx, req, version))
        }
        RequestKind::OffsetCommit(req) => ResponseKind::OffsetCommit(offsets::commit(broker, ctx, req, version).await),
        RequestKind::OffsetFetch(req) => ResponseKind::OffsetFetch(offsets::fetch(broker, ctx, req, version)),
        RequestKind::OffsetDelete(req) => ResponseKind::OffsetDelete(offsets::delete(broker, ctx, req).await),
        RequestKind::DescribeAcls(req) => ResponseKind::DescribeAcls(acls::describe(broker, ctx, req)),
        // A broker of a cluster with an authorizer: ACLs are cluster metadata the controller writes.
        RequestKind::CreateAcls(req) => match broker.controller.get().filter(|_| acls_from_image(broker)) {
            Some(link) => ResponseKind::CreateAcls(
                acls::create_forwarded(broker, ctx, &forwarder(link, ctx, header), req, version).await,
            ),
            None => ResponseKind::CreateAcls(acls::create(broker, ctx, req)),
        },
        RequestKind::DeleteAcls(req) => match broker.controller.get().filter(|_| acls_from_image(broker)) {
            Some(link) => ResponseKind::DeleteAcls(
                acls::delete_forwarded(broker, ctx, &forwarder(link, ctx, header), req, version).await,
            ),
            None => ResponseKind::DeleteAcls(acls::delete(broker, ctx, req)),
        },
        RequestKind::AlterReplicaLogDirs(req) => {
            ResponseKind::AlterReplicaLogDirs(cluster::alter_replica_log_dirs(broker, ctx, req))
        }
        RequestKind::DescribeLogDirs(req) => {
            ResponseKind::DescribeLogDirs(cluster::describe_log_dirs(broker, ctx, req, version))
        }
        RequestKind::DescribeTopicPartitions(req) => match broker.controller.get() {
            // A broker of a controller quorum answers from the quorum's metadata image.
            Some(link) => {
                ResponseKind::DescribeTopicPartitions(topic_partitions_image::handle(broker, ctx, req, &link.image()))
            }
            None => ResponseKind::DescribeTopicPartitions(cluster::describe_topic_partitions(broker, ctx, req)),
        },
        RequestKind::OffsetForLeaderEpoch(req) => {
            ResponseKind::OffsetForLeaderEpoch(cluster::offset_for_leader_epoch(broker, ctx, req))
        }
        RequestKind::ElectLeaders(req) => match broker.controller.get() {
            Some(link) => ResponseKind::ElectLeaders(
                forward::elect_leaders(&forwarder(link, ctx, header), &ctx.authz(broker), req, version).await,
            ),
            None => ResponseKind::ElectLeaders(cluster::elect_leaders(broker, ctx, req)),
        },
        RequestKind::AlterPartitionReassignments(req) => match broker.controller.get() {
            Some(link) => ResponseKind::AlterPartitionReassignments(
                forward::alter_partition_reassignments(&forwarder(link, ctx, header), &ctx.authz(broker), req, version)
                    .await,
            ),
            None => ResponseKind::AlterPartitionReassignments(cluster::alter_partition_reassignments(broker, ctx, req)),
        },
        RequestKind::ListPartitionReassignments(req) => match broker.controller.get() {
            Some(link) => ResponseKind::ListPartitionReassignments(
                forward::list_partition_reassignments(&forwarder(link, ctx, header), &ctx.authz(broker), req, version)
                    .await,
            ),
            None => ResponseKind::ListPartitionReassignments(cluster::list_partition_reassignments(broker, ctx, req)),
        },
        RequestKind::DescribeConfigs(req) => {
            ResponseKind::DescribeConfigs(configs::describe_configs(broker, ctx, req, version))
        }
        RequestKind::AlterConfigs(req) => match broker.controller.get() {
            // A broker of a controller quorum: the controller writes config changes.
            Some(link) => {
                let checks = configs::alter_configs_preprocess(broker, ctx, &req);
                ResponseKind::AlterConfigs(
                    forward::alter_configs(&forwarder(link, ctx, header), checks, req, version).await,
                )
            }
            None => ResponseKind::AlterConfigs(configs::alter_configs(broker, ctx, req)),
        },
        RequestKind::IncrementalAlterConfigs(req) => match broker.controller.get() {
            Some(link) => {
                let checks = configs::incremental_alter_configs_preprocess(broker, ctx, &req);
                ResponseKind::IncrementalAlterConfigs(
                    forward::incremental_alter_configs(&forwarder(link, ctx, header), checks, req, version).await,
                )
            }
            None => ResponseKind::IncrementalAlterConfigs(configs::incremental_alter_configs(broker, ctx, req)),
        },
        RequestKind::DeleteRecords(req) => ResponseKind::DeleteRecords(admin::delete_records(broker, ctx, req)),
        RequestKind::CreatePartitions(req) => match broker.controller.get() {
            Some(link) => ResponseKind::CreatePartitions(
                forward::create_partitions(&forwarder(link, ctx, header), &ctx.authz(broker), req, version).await,
            ),
            None => ResponseKind::CreatePartitions(admin::create_partitions(broker, ctx, req, mutation(3))),
        },
        RequestKind::DescribeCluster(req) => {
            ResponseKind::DescribeCluster(admin::describe_cluster(broker, ctx, req, version))
        }
        RequestKind::InitProducerId(req) => {
            ResponseKind::InitProducerId(txn::init_producer_id(broker, ctx, req, version).await)
        }
        RequestKind::AddPartitionsToTxn(req) if version >= 4 => {
            ResponseKind::AddPartitionsToTxn(txn_broker::add_partitions_batched(broker, ctx, req, version).await)
        }
        RequestKind::AddPartitionsToTxn(req) => {
            ResponseKind::AddPartitionsToTxn(txn::add_partitions(broker, ctx, req, version).await)
        }
        RequestKind::WriteTxnMarkers(req) => {
            ResponseKind::WriteTxnMarkers(txn_broker::write_txn_markers(broker, ctx, req).await)
        }
        RequestKind::AddOffsetsToTxn(req) => {
            ResponseKind::AddOffsetsToTxn(txn::add_offsets(broker, ctx, req, version).await)
        }
        RequestKind::EndTxn(req) => ResponseKind::EndTxn(txn::end_txn(broker, ctx, req, version).await),
        RequestKind::TxnOffsetCommit(req) => {
            ResponseKind::TxnOffsetCommit(txn::txn_offset_commit(broker, ctx, req, version).await)
        }
        RequestKind::DescribeTransactions(req) => {
            ResponseKind::DescribeTransactions(txn::describe_transactions(broker, ctx, req))
        }
        RequestKind::ListTransactions(req) => ResponseKind::ListTransactions(txn::list_transactions(broker, ctx, req)),
        RequestKind::DescribeProducers(req) => {
            ResponseKind::DescribeProducers(txn::describe_producers(broker, ctx, req))
        }
        RequestKind::DeleteTopics(req) => match broker.controller.get() {
            Some(link) => ResponseKind::DeleteTopics(
                forward::delete_topics(&forwarder(link, ctx, header), &ctx.authz(broker), req, version).await,
            ),
            None => ResponseKind::DeleteTopics(delete_topics::handle(broker, ctx, req, version, mutation(5))),
        },
        RequestKind::UpdateFeatures(req) => match broker.controller.get() {
            // A broker of a controller quorum: the controller finalizes features.
            Some(link) => ResponseKind::UpdateFeatures(
                forward::update_features(&forwarder(link, ctx, header), &ctx.authz(broker), req, version).await,
            ),
            None => ResponseKind::UpdateFeatures(update_features::handle(broker, ctx, req, version)),
        },
        RequestKind::DescribeQuorum(req) => {
            ResponseKind::DescribeQuorum(describe_quorum::handle(broker, ctx, header, req, version).await)
        }
        RequestKind::ListConfigResources(req) => {
            ResponseKind::ListConfigResources(list_config_resources::handle(broker, ctx, req, version))
        }
        RequestKind::DescribeClientQuotas(req) => {
            ResponseKind::DescribeClientQuotas(quotas::describe(broker, ctx, req))
        }
        RequestKind::AlterClientQuotas(req) => match broker.controller.get() {
            // A broker of a controller quorum: quotas are cluster metadata the controller writes.
            Some(link) => ResponseKind::AlterClientQuotas(
                forward::alter_client_quotas(&forwarder(link, ctx, header), &ctx.authz(broker), req, version).await,
            ),
            None => ResponseKind::AlterClientQuotas(quotas::alter(broker, ctx, req)),
        },
        RequestKind::DescribeUserScramCredentials(req) => {
            ResponseKind::DescribeUserScramCredentials(sasl::describe(broker, ctx, req))
        }
        RequestKind::AlterUserScramCredentials(req) => match broker.controller.get() {
            // A broker of a controller quorum: credentials are cluster metadata the controller writes.
            Some(link) => ResponseKind::AlterUserScramCredentials(
                forward::alter_user_scram_credentials(&forwarder(link, ctx, header), &ctx.authz(broker), req, version)
                    .await,
            ),
            None => ResponseKind::AlterUserScramCredentials(sasl::alter(broker, ctx, req)),
        },
        RequestKind::CreateDelegationToken(req) => {
            ResponseKind::CreateDelegationToken(tokens::create(broker, ctx, header, req, version).await)
        }
        RequestKind::RenewDelegationToken(req) => {
            ResponseKind::RenewDelegationToken(tokens::renew(broker, ctx, header, req, version).await)
        }
        RequestKind::ExpireDelegationToken(req) => {
            ResponseKind::ExpireDelegationToken(tokens::expire(broker, ctx, header, req, version).await)
        }
        RequestKind::DescribeDelegationToken(req) => {
            ResponseKind::DescribeDelegationToken(tokens::describe(broker, ctx, req, version))
        }
        // Authentication is the connection's (security::sasl); these arrive only where none is going on.
        RequestKind::SaslHandshake(_) => ResponseKind::SaslHandshake(sasl::handshake_after_authentication()),
        RequestKind::SaslAuthenticate(_) => ResponseKind::SaslAuthenticate(sasl::authenticate_after_authentication()),
        other => {
            // Unreachable in practice: versions::is_served filters unserved APIs before decoding.
            tracing::warn!(request = ?std::mem::discriminant(&other), "no handler for request");
            return Reply::Nothing;
        }
    })
}

/// CLUSTER_AUTHORIZATION_FAILED with Kafka's default message, for requests refused whole.
pub(crate) fn cluster_denied() -> (i16, Option<StrBytes>) {
    let e = kafka_protocol::error::ResponseError::ClusterAuthorizationFailed;
    (e.code(), Some(str_bytes(&crate::error::default_message(e))))
}

/// Kafka's `Topic.isInternal`, by name (the topic may not exist).
pub(crate) fn is_internal_topic(name: &str) -> bool {
    name == crate::group::OFFSETS_TOPIC || name == crate::txn::coordinator::TXN_TOPIC
}

/// The per-resource answers of IncrementalAlterConfigs or AlterConfigs (two generated types with
/// the same fields) from (resource type, name, error code, message).
macro_rules! config_resource_responses {
    ($type:ty, $answers:expr) => {
        $answers
            .into_iter()
            .map(|(resource_type, name, code, message)| {
                <$type>::default()
                    .with_resource_type(resource_type)
                    .with_resource_name(name)
                    .with_error_code(code)
                    .with_error_message(message)
            })
            .collect()
    };
}
pub(crate) use config_resource_responses;

pub(crate) fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Whether this broker's ACLs are its metadata image's (a cluster broker with an authorizer).
fn acls_from_image(broker: &Broker) -> bool {
    broker.acls.as_ref().is_some_and(|a| a.is_from_image())
}
