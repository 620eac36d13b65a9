//! ACL APIs on a broker without an authorizer: like Kafka with no `authorizer.class.name`,
//! every ACL request is answered SECURITY_DISABLED (tools such as kafka-acls and Kafka's
//! ClientCompatibilityTest treat that as "supported, security off").

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_request::CreateAclsRequest;
use kafka_protocol::messages::create_acls_response::{AclCreationResult, CreateAclsResponse};
use kafka_protocol::messages::delete_acls_request::DeleteAclsRequest;
use kafka_protocol::messages::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsResponse};
use kafka_protocol::messages::describe_acls_response::DescribeAclsResponse;

use super::str_bytes;

const MESSAGE: &str = "No Authorizer is configured.";

pub fn describe() -> DescribeAclsResponse {
    // Kafka words this one differently from the create and delete answers.
    DescribeAclsResponse::default()
        .with_error_code(ResponseError::SecurityDisabled.code())
        .with_error_message(Some(str_bytes("No Authorizer is configured on the broker")))
}

pub fn create(req: CreateAclsRequest) -> CreateAclsResponse {
    let results = req
        .creations
        .iter()
        .map(|_| {
            AclCreationResult::default()
                .with_error_code(ResponseError::SecurityDisabled.code())
                .with_error_message(Some(str_bytes(MESSAGE)))
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

pub fn delete(req: DeleteAclsRequest) -> DeleteAclsResponse {
    let results = req
        .filters
        .iter()
        .map(|_| {
            DeleteAclsFilterResult::default()
                .with_error_code(ResponseError::SecurityDisabled.code())
                .with_error_message(Some(str_bytes(MESSAGE)))
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}
