//! Request handlers: one file per API, each translating a decoded request into calls on the
//! broker's state and building the response. Handlers hold no state of their own.

mod api_versions;
mod create_topics;
mod delete_topics;
mod fetch;
mod init_producer_id;
mod list_offsets;
mod metadata;
mod produce;

use std::net::SocketAddr;
use std::sync::Arc;

use kafka_protocol::messages::{RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;

use crate::broker::Broker;
use crate::protocol::DecodedRequest;

pub use api_versions::unsupported_version_response;

/// Per-connection facts a handler may need.
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// The address the client reached us on: advertised when no advertised.listeners is set.
    pub local_addr: SocketAddr,
    pub peer_addr: SocketAddr,
}

/// Runs the handler for `request`. `None` means no response is sent (Produce with acks=0).
pub async fn dispatch(broker: &Arc<Broker>, ctx: &RequestContext, request: DecodedRequest) -> Option<ResponseKind> {
    let version = request.version;
    Some(match request.body {
        RequestKind::ApiVersions(_) => ResponseKind::ApiVersions(api_versions::handle(version)),
        RequestKind::Metadata(req) => ResponseKind::Metadata(metadata::handle(broker, ctx, req, version)),
        RequestKind::Produce(req) => return produce::handle(broker, req, version).await.map(ResponseKind::Produce),
        RequestKind::Fetch(req) => ResponseKind::Fetch(fetch::handle(broker, req, version).await),
        RequestKind::ListOffsets(req) => ResponseKind::ListOffsets(list_offsets::handle(broker, req, version)),
        RequestKind::CreateTopics(req) => ResponseKind::CreateTopics(create_topics::handle(broker, req, version)),
        RequestKind::InitProducerId(req) => ResponseKind::InitProducerId(init_producer_id::handle(broker, req)),
        RequestKind::DeleteTopics(req) => ResponseKind::DeleteTopics(delete_topics::handle(broker, req, version)),
        other => {
            // Unreachable in practice: versions::is_served filters unserved APIs before decoding.
            tracing::warn!(request = ?std::mem::discriminant(&other), "no handler for request");
            return None;
        }
    })
}

pub(crate) fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}
