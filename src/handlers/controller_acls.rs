//! CreateAcls, DeleteAcls and DescribeAcls on a Ketch controller (Kafka's `ControllerApis`): the
//! ACLs are the metadata image's, changed by records the controller writes
//! (`controller::acls`); brokers forward CreateAcls / DeleteAcls here after their own cluster
//! ALTER check. Without `authorizer.class.name` (Kafka's StandardAuthorizer) on the controller,
//! SECURITY_DISABLED, as Kafka's controller answers.
//! Not yet: the controller's own authorization of the caller (the broker checked it; a client
//! with `--bootstrap-controller` is not checked here).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest,
    DescribeAclsResponse,
};

use super::acls::{bindings_of, creation_answer, delete_filters, deletion_answer, describe_answer, describe_filter};
use super::controller_apis::written;
use super::str_bytes;
use crate::controller::acls;
use crate::controller::quorum::QuorumController;
use crate::security::acl_store::{AclError, STANDARD_AUTHORIZER};

const DISABLED: &str = "No Authorizer is configured.";

fn enabled(controller: &QuorumController) -> bool {
    controller.settings.static_props.get("authorizer.class.name").is_some_and(|c| c.trim() == STANDARD_AUTHORIZER)
}

pub fn create(controller: &QuorumController, req: CreateAclsRequest) -> CreateAclsResponse {
    let all = |code: i16, message: Option<&str>| {
        let one = AclCreationResult::default().with_error_code(code).with_error_message(message.map(str_bytes));
        CreateAclsResponse::default().with_results(vec![one; req.creations.len()])
    };
    if !enabled(controller) {
        return all(ResponseError::SecurityDisabled.code(), Some(DISABLED));
    }
    let bindings = bindings_of(&req);
    let decided = controller.change(|d| acls::create(d.image, bindings));
    match decided {
        Ok(results) => creation_answer(results.into_iter().map(|r| r.map_err(AclError::Invalid)).collect()),
        Err(e) => written("CreateAcls", Err(e), |error| all(error.code(), None)),
    }
}

pub fn delete(controller: &QuorumController, req: DeleteAclsRequest) -> DeleteAclsResponse {
    let all = |code: i16, message: Option<&str>| {
        let one = DeleteAclsFilterResult::default().with_error_code(code).with_error_message(message.map(str_bytes));
        DeleteAclsResponse::default().with_filter_results(vec![one; req.filters.len()])
    };
    if !enabled(controller) {
        return all(ResponseError::SecurityDisabled.code(), Some(DISABLED));
    }
    let filters = match delete_filters(&req) {
        Ok(filters) => filters,
        Err(why) => return all(ResponseError::InvalidRequest.code(), Some(&why)),
    };
    match controller.change(|d| acls::delete(d.image, &filters)) {
        Ok(removed) => deletion_answer(removed),
        Err(e) => written("DeleteAcls", Err(e), |error| all(error.code(), None)),
    }
}

pub fn describe(controller: &QuorumController, req: DescribeAclsRequest) -> DescribeAclsResponse {
    if !enabled(controller) {
        return DescribeAclsResponse::default()
            .with_error_code(ResponseError::SecurityDisabled.code())
            .with_error_message(Some(str_bytes("No Authorizer is configured on the broker")));
    }
    match describe_filter(&req) {
        Ok(filter) => describe_answer(acls::describe(&controller.image(), &filter)),
        Err(refused) => refused,
    }
}
