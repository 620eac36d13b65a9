//! Listener-scoped settings, as Kafka reads them: the per-listener form of a config
//! (`listener.name.<l>.<name>`, and per SASL mechanism), each listener's security protocol, and
//! which listener is the inter-broker one. Pure reads of the properties; nothing is stored.

use super::Properties;

/// `listener.name.<listener, lower case>.<name>`: Kafka's per-listener form of a broker config.
pub fn listener_key(listener: &str, name: &str) -> String {
    format!("listener.name.{}.{name}", listener.to_lowercase())
}

/// A listener's setting: its own `listener.name.<l>.<name>` value, else the broker-wide `<name>`
/// (Kafka's rule for per-listener overrides), with the key that held it (for error messages).
pub fn listener_value<'a>(props: &'a Properties, listener: &str, name: &str) -> Option<(String, &'a str)> {
    let own = listener_key(listener, name);
    match props.get(&own) {
        Some(v) => Some((own, v.as_str())),
        None => props.get(name).map(|v| (name.to_string(), v.as_str())),
    }
}

/// Kafka's security protocols (`listener.security.protocol.map`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

/// The security protocol of a listener: `listener.security.protocol.map`, else the listener's
/// own name when it is a protocol's (Kafka's default map), else PLAINTEXT.
pub fn security_protocol(properties: &Properties, listener: &str) -> SecurityProtocol {
    let mapped = properties.get("listener.security.protocol.map").and_then(|map| {
        map.split(',')
            .filter_map(|pair| pair.split_once(':'))
            .find(|(l, _)| l.trim() == listener)
            .map(|(_, p)| p.trim())
    });
    match mapped.unwrap_or(listener) {
        "SSL" => SecurityProtocol::Ssl,
        "SASL_PLAINTEXT" => SecurityProtocol::SaslPlaintext,
        "SASL_SSL" => SecurityProtocol::SaslSsl,
        _ => SecurityProtocol::Plaintext,
    }
}

/// The inter-broker listener: `inter.broker.listener.name`, else the listener named after
/// `security.inter.broker.protocol` (PLAINTEXT by default), as Kafka's `interBrokerListenerName`.
pub fn inter_broker_listener(properties: &Properties) -> String {
    properties
        .get("inter.broker.listener.name")
        .or_else(|| properties.get("security.inter.broker.protocol"))
        .map_or_else(|| "PLAINTEXT".to_string(), |name| name.trim().to_string())
}

/// A SASL mechanism's setting on a listener: `listener.name.<l>.<mechanism, lower case>.<name>`,
/// else [`listener_value`] (Kafka's lookup for `sasl.jaas.config`, `connections.max.reauth.ms`, ...).
pub fn mechanism_value<'a>(
    props: &'a Properties,
    listener: &str,
    mechanism: &str,
    name: &str,
) -> Option<(String, &'a str)> {
    let own = listener_key(listener, &format!("{}.{name}", mechanism.to_lowercase()));
    match props.get(&own) {
        Some(v) => Some((own, v.as_str())),
        None => listener_value(props, listener, name),
    }
}
