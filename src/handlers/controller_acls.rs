//! CreateAcls, DeleteAcls and DescribeAcls on a Ketch controller (Kafka's `ControllerApis`): the
//! ACLs are the metadata image's, changed by records the controller writes
//! (`controller::acls`); brokers forward CreateAcls / DeleteAcls here after their own cluster
//! ALTER check. Without `authorizer.class.name` (Kafka's StandardAuthorizer) on the controller,
//! SECURITY_DISABLED, as Kafka's controller answers.
//! The caller is authorized before (`controller_authz`: ALTER on the cluster to change ACLs,
//! DESCRIBE to list them).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest,
    DescribeAclsResponse,
};

use super::acls::{
    bindings_of, creation_answer, creations_refused, delete_filters, deletion_answer, deletions_refused,
    describe_answer, describe_filter, DESCRIBE_MESSAGE, MESSAGE,
};
use super::controller_apis::written;
use super::str_bytes;
use crate::controller::acls;
use crate::controller::quorum::QuorumController;
use crate::security::acl_store::{authorizer_class, AclError, STANDARD_AUTHORIZER};

fn enabled(controller: &QuorumController) -> bool {
    authorizer_class(&controller.settings.static_props) == Some(STANDARD_AUTHORIZER)
}

pub fn create(controller: &QuorumController, req: CreateAclsRequest) -> CreateAclsResponse {
    if !enabled(controller) {
        return creations_refused(&req, ResponseError::SecurityDisabled.code(), Some(str_bytes(MESSAGE)));
    }
    let bindings = bindings_of(&req);
    let decided = controller.change(|d| acls::create(d.image, bindings));
    match decided {
        Ok(results) => creation_answer(results.into_iter().map(|r| r.map_err(AclError::Invalid)).collect()),
        Err(e) => written("CreateAcls", Err(e), |error| creations_refused(&req, error.code(), None)),
    }
}

pub fn delete(controller: &QuorumController, req: DeleteAclsRequest) -> DeleteAclsResponse {
    if !enabled(controller) {
        return deletions_refused(&req, ResponseError::SecurityDisabled.code(), Some(str_bytes(MESSAGE)));
    }
    let filters = match delete_filters(&req) {
        Ok(filters) => filters,
        Err(why) => return deletions_refused(&req, ResponseError::InvalidRequest.code(), Some(str_bytes(&why))),
    };
    match controller.change(|d| acls::delete(d.image, &filters)) {
        Ok(removed) => deletion_answer(removed),
        Err(e) => written("DeleteAcls", Err(e), |error| deletions_refused(&req, error.code(), None)),
    }
}

pub fn describe(controller: &QuorumController, req: DescribeAclsRequest) -> DescribeAclsResponse {
    if !enabled(controller) {
        return DescribeAclsResponse::default()
            .with_error_code(ResponseError::SecurityDisabled.code())
            .with_error_message(Some(str_bytes(DESCRIBE_MESSAGE)));
    }
    match describe_filter(&req) {
        Ok(filter) => describe_answer(acls::describe(&controller.image(), &filter)),
        Err(refused) => refused,
    }
}
