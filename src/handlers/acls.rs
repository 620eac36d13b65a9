//! CreateAcls, DescribeAcls, DeleteAcls (`kafka-acls`). Without `authorizer.class.name`, like
//! Kafka, every ACL request is answered SECURITY_DISABLED (tools such as kafka-acls and Kafka's
//! ClientCompatibilityTest treat that as "supported, security off"). With Kafka's
//! StandardAuthorizer configured, ACLs are kept by `security::acl_store`; creating and deleting
//! need ALTER on the cluster, describing DESCRIBE, as Kafka checks, for the connection's
//! principal (`User:ANONYMOUS` on PLAINTEXT, the client certificate's subject on mutual TLS).
//! On a broker of a cluster the ACLs are the metadata image's: DescribeAcls reads them there, and
//! CreateAcls / DeleteAcls, once ALTER on the cluster is checked here, are forwarded to the
//! controller, which writes them (Kafka's brokers send them to their controller).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_request::CreateAclsRequest;
use kafka_protocol::messages::create_acls_response::{AclCreationResult, CreateAclsResponse};
use kafka_protocol::messages::delete_acls_request::DeleteAclsRequest;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl, DeleteAclsResponse,
};
use kafka_protocol::messages::describe_acls_request::DescribeAclsRequest;
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource, DescribeAclsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{cluster_denied, str_bytes, RequestContext};
use crate::broker::Broker;
use crate::node::Forwarder;
use crate::security::acl::{self, AclBinding, AclFilter};
use crate::security::acl_store::AclError;

/// Kafka's SECURITY_DISABLED messages: CreateAcls and DeleteAcls, and DescribeAcls.
pub(super) const MESSAGE: &str = "No Authorizer is configured.";
pub(super) const DESCRIBE_MESSAGE: &str = "No Authorizer is configured on the broker";

/// A CreateAcls answer giving each of `req`'s creations the same error.
pub(super) fn creations_refused(req: &CreateAclsRequest, code: i16, message: Option<StrBytes>) -> CreateAclsResponse {
    let one = AclCreationResult::default().with_error_code(code).with_error_message(message);
    CreateAclsResponse::default().with_results(vec![one; req.creations.len()])
}

/// A DeleteAcls answer giving each of `req`'s filters the same error.
pub(super) fn deletions_refused(req: &DeleteAclsRequest, code: i16, message: Option<StrBytes>) -> DeleteAclsResponse {
    let one = DeleteAclsFilterResult::default().with_error_code(code).with_error_message(message);
    DeleteAclsResponse::default().with_filter_results(vec![one; req.filters.len()])
}

fn allowed(broker: &Broker, ctx: &RequestContext, operation: i8) -> bool {
    ctx.authz(broker).cluster(operation)
}

fn text(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.as_str().to_string())
}

/// DescribeAcls' and DeleteAcls' filter fields: (resource type, name, pattern type) and
/// (principal, host, operation, permission).
fn acl_filter(
    (resource_type, name, pattern_type): (i8, &Option<StrBytes>, i8),
    (principal, host, operation, permission): (&Option<StrBytes>, &Option<StrBytes>, i8, i8),
) -> AclFilter {
    AclFilter {
        resource_type,
        resource_name: text(name),
        pattern_type,
        principal: text(principal),
        host: text(host),
        operation,
        permission,
    }
}

pub fn describe(broker: &Arc<Broker>, ctx: &RequestContext, req: DescribeAclsRequest) -> DescribeAclsResponse {
    let Some(store) = &broker.acls else {
        // Kafka words this one differently from the create and delete answers.
        return DescribeAclsResponse::default()
            .with_error_code(ResponseError::SecurityDisabled.code())
            .with_error_message(Some(str_bytes(DESCRIBE_MESSAGE)));
    };
    if !allowed(broker, ctx, acl::DESCRIBE) {
        let (code, message) = cluster_denied();
        return DescribeAclsResponse::default().with_error_code(code).with_error_message(message);
    }
    match describe_filter(&req) {
        Ok(filter) => describe_answer(store.describe(&filter)),
        Err(refused) => refused,
    }
}

/// DescribeAcls' filter, or Kafka's INVALID_REQUEST answer to a bad one.
pub(super) fn describe_filter(req: &DescribeAclsRequest) -> Result<AclFilter, DescribeAclsResponse> {
    let filter = acl_filter(
        (req.resource_type_filter, &req.resource_name_filter, req.pattern_type_filter),
        (&req.principal_filter, &req.host_filter, req.operation, req.permission_type),
    );
    filter.validate().map(|()| filter).map_err(|why| {
        DescribeAclsResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(str_bytes(&why)))
    })
}

/// DescribeAcls' answer: the ACLs grouped by resource pattern, as Kafka answers.
pub(super) fn describe_answer(acls: Vec<AclBinding>) -> DescribeAclsResponse {
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    for a in acls {
        let description = AclDescription::default()
            .with_principal(str_bytes(&a.principal))
            .with_host(str_bytes(&a.host))
            .with_operation(a.operation)
            .with_permission_type(a.permission);
        let same = |r: &&mut DescribeAclsResource| {
            r.resource_type == a.resource_type
                && r.resource_name.as_str() == a.resource_name
                && r.pattern_type == a.pattern_type
        };
        match resources.iter_mut().find(same) {
            Some(r) => r.acls.push(description),
            None => resources.push(
                DescribeAclsResource::default()
                    .with_resource_type(a.resource_type)
                    .with_resource_name(str_bytes(&a.resource_name))
                    .with_pattern_type(a.pattern_type)
                    .with_acls(vec![description]),
            ),
        }
    }
    DescribeAclsResponse::default().with_resources(resources)
}

pub fn create(broker: &Arc<Broker>, ctx: &RequestContext, req: CreateAclsRequest) -> CreateAclsResponse {
    let Some(store) = &broker.acls else {
        return creations_refused(&req, ResponseError::SecurityDisabled.code(), Some(str_bytes(MESSAGE)));
    };
    if !allowed(broker, ctx, acl::ALTER) {
        let (code, message) = cluster_denied();
        return creations_refused(&req, code, message);
    }
    creation_answer(store.create(bindings_of(&req)))
}

/// CreateAcls' bindings (ids assigned when stored).
pub(super) fn bindings_of(req: &CreateAclsRequest) -> Vec<AclBinding> {
    req.creations
        .iter()
        .map(|c| AclBinding {
            id: uuid::Uuid::nil(),
            resource_type: c.resource_type,
            resource_name: c.resource_name.as_str().to_string(),
            pattern_type: c.resource_pattern_type,
            principal: c.principal.as_str().to_string(),
            host: c.host.as_str().to_string(),
            operation: c.operation,
            permission: c.permission_type,
        })
        .collect()
}

/// CreateAcls' answer: a result per creation.
pub(super) fn creation_answer(results: Vec<Result<(), AclError>>) -> CreateAclsResponse {
    let result = |code: i16, message: Option<StrBytes>| {
        AclCreationResult::default().with_error_code(code).with_error_message(message)
    };
    let results = results
        .into_iter()
        .map(|r| match r {
            Ok(()) => result(0, None),
            Err(AclError::Invalid(why)) => result(ResponseError::InvalidRequest.code(), Some(str_bytes(&why))),
            Err(AclError::Storage(why)) => result(ResponseError::UnknownServerError.code(), Some(str_bytes(&why))),
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

/// CreateAcls on a broker of a cluster: ALTER on the cluster here, then the controller's answer.
pub async fn create_forwarded(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    link: &Forwarder<'_>,
    req: CreateAclsRequest,
    version: i16,
) -> CreateAclsResponse {
    if !allowed(broker, ctx, acl::ALTER) {
        let (code, message) = cluster_denied();
        return creations_refused(&req, code, message);
    }
    let failed = |error: ResponseError| creations_refused(&req, error.code(), None);
    super::forward::forward_whole(link, version, &req, failed).await
}

/// DeleteAcls on a broker of a cluster: ALTER on the cluster here, then the controller's answer.
pub async fn delete_forwarded(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    link: &Forwarder<'_>,
    req: DeleteAclsRequest,
    version: i16,
) -> DeleteAclsResponse {
    if !allowed(broker, ctx, acl::ALTER) {
        let (code, message) = cluster_denied();
        return deletions_refused(&req, code, message);
    }
    let failed = |error: ResponseError| deletions_refused(&req, error.code(), None);
    super::forward::forward_whole(link, version, &req, failed).await
}

pub fn delete(broker: &Arc<Broker>, ctx: &RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse {
    let failed = |code: i16, message: Option<StrBytes>| deletions_refused(&req, code, message);
    let Some(store) = &broker.acls else {
        return failed(ResponseError::SecurityDisabled.code(), Some(str_bytes(MESSAGE)));
    };
    if !allowed(broker, ctx, acl::ALTER) {
        let (code, message) = cluster_denied();
        return failed(code, message);
    }
    let filters = match delete_filters(&req) {
        Ok(filters) => filters,
        Err(why) => return failed(ResponseError::InvalidRequest.code(), Some(str_bytes(&why))),
    };
    match store.delete(&filters) {
        Ok(removed) => deletion_answer(removed),
        Err(AclError::Storage(why) | AclError::Invalid(why)) => {
            failed(ResponseError::UnknownServerError.code(), Some(str_bytes(&why)))
        }
    }
}

/// DeleteAcls' filters, or the message of the first invalid one (Kafka's INVALID_REQUEST).
pub(super) fn delete_filters(req: &DeleteAclsRequest) -> Result<Vec<AclFilter>, String> {
    let filters: Vec<AclFilter> = req
        .filters
        .iter()
        .map(|f| {
            acl_filter(
                (f.resource_type_filter, &f.resource_name_filter, f.pattern_type_filter),
                (&f.principal_filter, &f.host_filter, f.operation, f.permission_type),
            )
        })
        .collect();
    match filters.iter().find_map(|f| f.validate().err()) {
        Some(why) => Err(why),
        None => Ok(filters),
    }
}

/// DeleteAcls' answer: per filter, the ACLs it removed.
pub(super) fn deletion_answer(removed: Vec<Vec<AclBinding>>) -> DeleteAclsResponse {
    let results = removed
        .into_iter()
        .map(|acls| {
            let matching = acls
                .into_iter()
                .map(|a| {
                    DeleteAclsMatchingAcl::default()
                        .with_resource_type(a.resource_type)
                        .with_resource_name(str_bytes(&a.resource_name))
                        .with_pattern_type(a.pattern_type)
                        .with_principal(str_bytes(&a.principal))
                        .with_host(str_bytes(&a.host))
                        .with_operation(a.operation)
                        .with_permission_type(a.permission)
                })
                .collect();
            DeleteAclsFilterResult::default().with_matching_acls(matching)
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}
