//! AlterPartitionReassignments and ListPartitionReassignments on a Ketch controller (brokers
//! forward them, Kafka's `ControllerApis`): decided by `controller::reassignment` against the
//! image, the records written as one change, answered once durable.
//!
//! Not yet: ACLs on the controller (it trusts the brokers that forward; Kafka authorizes ALTER
//! and DESCRIBE on the cluster). Invariants: a refused partition writes nothing; records that
//! could not be written answer UNKNOWN_SERVER_ERROR at the top level.

use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
};

use super::controller_apis::written;
use crate::controller::quorum::QuorumController;
use crate::controller::reassignment::{alter_partition_reassignments, list_partition_reassignments};

/// AlterPartitionReassignments (v0-1): every partition of the request in one change.
pub fn alter(
    controller: &QuorumController,
    request: &AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let config = controller.settings.config;
    let decided = controller.change(|d| alter_partition_reassignments(d.image, &config, request));
    written("AlterPartitionReassignments", decided, |error| {
        AlterPartitionReassignmentsResponse::default()
            .with_allow_replication_factor_change(request.allow_replication_factor_change)
            .with_error_code(error.code())
            .with_error_message(None)
    })
}

/// ListPartitionReassignments (v0): the ongoing reassignments of the current image.
pub fn list(
    controller: &QuorumController,
    request: &ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    list_partition_reassignments(&controller.image(), request.topics.as_deref())
}
