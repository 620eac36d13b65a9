//! Kafka's Envelope (KIP-590) as a forwarding broker writes it and a controller reads it: the
//! client's request, whole with its own header, inside an EnvelopeRequest with the client's
//! principal and address, so the controller authorizes, audits and throttles (the
//! `controller_mutation_rate` quota) the client rather than the forwarding broker.
//!
//! Wire formats (Kafka's, byte for byte):
//! - `request_data`: the inner request header (the client's API key, version, correlation id
//!   and client id; header version of the API) then its body, without a length prefix;
//! - `request_principal`: Kafka's `DefaultKafkaPrincipalBuilder` serialization, an i16 version
//!   (0) then a `DefaultPrincipalData` v0 (type, name, token_authenticated);
//! - `client_host_address`: the client's IP address, 4 or 16 raw bytes;
//! - `response_data`: the inner response header then its body, without a length prefix.
//!
//! Invariants: what is decoded here comes from another node and is checked, never trusted: a
//! principal that does not decode is an error (the controller answers
//! PRINCIPAL_DESERIALIZATION_FAILURE), an address of another length is an error, an inner
//! response passes the allocation guard (`protocol::guard::check_response`) before it is decoded
//! (else it is an error), and it must carry the inner request's correlation id.

use std::net::IpAddr;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{DefaultPrincipalData, EnvelopeRequest, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

/// Who a forwarded request is from: the client connection's header fields, principal and address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub client_id: Option<String>,
    pub correlation_id: i32,
    /// `User:<name>` (a principal type, a colon, a name; as Kafka's `KafkaPrincipal.toString`).
    pub principal: String,
    /// Whether the client logged in with a delegation token.
    pub token_authenticated: bool,
    pub address: IpAddr,
}

/// The only version of `DefaultPrincipalData` (Kafka 4.1).
const PRINCIPAL_DATA_VERSION: i16 = 0;

/// Kafka's `DefaultKafkaPrincipalBuilder.serialize` of `principal` (`Type:name`).
pub fn encode_principal(principal: &str, token_authenticated: bool) -> anyhow::Result<Bytes> {
    let (kind, name) = principal.split_once(':').unwrap_or(("User", principal));
    let data = DefaultPrincipalData::default()
        .with_type(StrBytes::from_string(kind.to_string()))
        .with_name(StrBytes::from_string(name.to_string()))
        .with_token_authenticated(token_authenticated);
    let mut out = BytesMut::with_capacity(8 + principal.len());
    out.extend_from_slice(&PRINCIPAL_DATA_VERSION.to_be_bytes());
    data.encode(&mut out, PRINCIPAL_DATA_VERSION)?;
    Ok(out.freeze())
}

/// Kafka's `DefaultKafkaPrincipalBuilder.deserialize`: the principal as `Type:name`, and whether
/// it logged in with a delegation token.
pub fn decode_principal(bytes: &[u8]) -> anyhow::Result<(String, bool)> {
    anyhow::ensure!(bytes.len() >= 2, "principal data of {} bytes", bytes.len());
    let version = i16::from_be_bytes([bytes[0], bytes[1]]);
    anyhow::ensure!(version == PRINCIPAL_DATA_VERSION, "principal data version {version}");
    let mut rest = Bytes::copy_from_slice(&bytes[2..]);
    let data = DefaultPrincipalData::decode(&mut rest, version)?;
    anyhow::ensure!(rest.is_empty(), "{} bytes after the principal data", rest.len());
    Ok((format!("{}:{}", data._type.as_str(), data.name.as_str()), data.token_authenticated))
}

/// The client's address from `client_host_address`.
pub fn decode_address(bytes: &[u8]) -> anyhow::Result<IpAddr> {
    match bytes.len() {
        4 => Ok(IpAddr::from(<[u8; 4]>::try_from(bytes)?)),
        16 => Ok(IpAddr::from(<[u8; 16]>::try_from(bytes)?)),
        n => anyhow::bail!("client address of {n} bytes"),
    }
}

/// The EnvelopeRequest carrying `request` at `version` from `origin`.
pub fn wrap<R: Request>(origin: &Origin, version: i16, request: &R) -> anyhow::Result<EnvelopeRequest> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(origin.correlation_id)
        .with_client_id(origin.client_id.clone().map(StrBytes::from_string));
    let mut inner = BytesMut::with_capacity(256);
    header.encode(&mut inner, R::header_version(version))?;
    request.encode(&mut inner, version)?;
    let address = match origin.address {
        IpAddr::V4(v4) => Bytes::copy_from_slice(&v4.octets()),
        // An IPv4 client seen through an IPv6 socket is named by its IPv4 address, as Java does.
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => Bytes::copy_from_slice(&v4.octets()),
            None => Bytes::copy_from_slice(&v6.octets()),
        },
    };
    Ok(EnvelopeRequest::default()
        .with_request_data(inner.freeze())
        .with_request_principal(Some(encode_principal(&origin.principal, origin.token_authenticated)?))
        .with_client_host_address(address))
}

/// The inner response of an EnvelopeResponse's `response_data`, answering `origin`'s request
/// of type `R` at `version`.
pub fn unwrap<R: Request>(origin: &Origin, version: i16, data: Bytes) -> anyhow::Result<R::Response> {
    // The controller's bytes: through the allocation guard before any decoder sees them.
    crate::protocol::guard::check_response(R::KEY, version, &data)
        .map_err(|e| anyhow::anyhow!("forwarded response refused before decoding: {e}"))?;
    let mut data = data;
    let header = ResponseHeader::decode(&mut data, R::Response::header_version(version))?;
    anyhow::ensure!(
        header.correlation_id == origin.correlation_id,
        "forwarded response to correlation id {}, expected {}",
        header.correlation_id,
        origin.correlation_id
    );
    R::Response::decode(&mut data, version)
}

#[cfg(test)]
#[path = "envelope_tests.rs"]
mod tests;
