//! Prints a DescribeConfigs (v4) response of any Kafka-compatible broker as one line per entry,
//! so the answers of Ketch and Apache Kafka can be diffed field by field (source, read-only,
//! sensitive, type, synonyms, documentation), which the Kafka tools do not all show.
//!
//!     cargo run --release --example describe_configs -- 127.0.0.1:9092 broker 1 [--doc] [key...]
//!     cargo run --release --example describe_configs -- 127.0.0.1:9092 topic my-topic
//!
//! Resource types: `topic` (2), `broker` (4, name = node id or "" for the cluster default),
//! `broker-logger` (8).

use std::io::{Read, Write};
use std::net::TcpStream;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::describe_configs_request::{DescribeConfigsRequest, DescribeConfigsResource};
use kafka_protocol::messages::{ApiKey, DescribeConfigsResponse, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        anyhow::bail!("usage: describe_configs HOST:PORT topic|broker|broker-logger NAME [--doc] [key...]");
    }
    let resource_type = match args[1].as_str() {
        "topic" => 2,
        "broker" => 4,
        "broker-logger" => 8,
        other => anyhow::bail!("unknown resource type {other}"),
    };
    let doc = args[3..].iter().any(|a| a == "--doc");
    let keys: Vec<StrBytes> =
        args[3..].iter().filter(|a| *a != "--doc").map(|k| StrBytes::from_string(k.clone())).collect();
    let version = 4;
    let request = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_include_documentation(doc)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from_string(args[2].clone()))
            .with_configuration_keys(if keys.is_empty() { None } else { Some(keys) })]);
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::DescribeConfigs as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("describe-configs-probe")));
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header.encode(&mut buf, ApiKey::DescribeConfigs.request_header_version(version))?;
    request.encode(&mut buf, version)?;
    let len = (buf.len() - 4) as i32;
    buf[0..4].copy_from_slice(&len.to_be_bytes());
    let mut stream = TcpStream::connect(&args[0])?;
    stream.write_all(&buf)?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut body)?;
    let mut body = Bytes::from(body);
    ResponseHeader::decode(&mut body, ApiKey::DescribeConfigs.response_header_version(version))?;
    let response = DescribeConfigsResponse::decode(&mut body, version)?;
    for result in response.results {
        println!(
            "resource type={} name={:?} error={} message={:?}",
            result.resource_type,
            result.resource_name.as_str(),
            result.error_code,
            result.error_message.as_ref().map(|m| m.as_str())
        );
        let mut configs = result.configs;
        configs.sort_by(|a, b| a.name.cmp(&b.name));
        for c in configs {
            let synonyms: Vec<String> = c
                .synonyms
                .iter()
                .map(|s| {
                    format!("{}:{}={}", s.source, s.name.as_str(), s.value.as_ref().map_or("null", |v| v.as_str()))
                })
                .collect();
            println!(
                "{}={} source={} read_only={} sensitive={} type={} synonyms=[{}]{}",
                c.name.as_str(),
                c.value.as_ref().map_or("null", |v| v.as_str()),
                c.config_source,
                c.read_only,
                c.is_sensitive,
                c.config_type,
                synonyms.join(", "),
                c.documentation.as_ref().map_or(String::new(), |d| format!(" doc={:?}", d.as_str()))
            );
        }
    }
    Ok(())
}
