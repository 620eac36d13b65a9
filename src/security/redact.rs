//! Secrets out of `Debug`: what the hand-written `Debug` of a type holding a secret prints in
//! its place (`[hidden]`, as Kafka prints a `Password` config), and how a set of config values
//! is printed with the sensitive ones hidden.
//!
//! The types that hold a password, a key, a token, a SCRAM salt or stored / server key, JAAS
//! options, a delegation token secret or a set of config values implement `Debug` by hand (or
//! have none), so that a panic, an assertion message or a `?value` log field cannot show the
//! secret: `scram::Credential`, `tokens::TokenSettings`, `sasl::ListenerSasl`,
//! `jaas::LoginModule`, `oauth::InitialResponse`, `client::Login` / `ClientSecurity`,
//! `config::BrokerConfig`, `ControllerSettings`, `config_changes::{ConfigContext, Op, Change}`,
//! `metadata::image::{MetadataImage, ScramCredentialImage}` and the `ConfigRecord` /
//! `UserScramCredentialRecord` metadata records (`metadata/records/redacted.rs`). Types that only
//! contain those (e.g. `TokenLogin`, `MetadataRecord`) derive `Debug` over them. The table test
//! (`redact/tests.rs`) formats each and looks for the secret.
//!
//! Invariant: a config's value is shown only when its name is a known config that is not a
//! password: a broker config of Kafka's or Ketch's table (directly or through its synonyms, so
//! `listener.name.<l>.ssl.keystore.password` is a password) or a topic config. Any other name's
//! value is hidden, as Kafka's DescribeConfigs and `RecordRedactor` take an unknown name for a
//! sensitive one.

use std::collections::BTreeMap;
use std::fmt;

use crate::dynconf::defs::{config_type, Type};

/// What stands in for a secret.
pub const HIDDEN: &str = "[hidden]";

/// A value that `Debug`-prints as `[hidden]`.
pub struct Hidden;

impl fmt::Debug for Hidden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(HIDDEN)
    }
}

/// `value` of the config `name` as a log line or a `Debug` output may show it: itself for a
/// known config that is not a password, else `[hidden]`.
pub fn config_value<'a>(name: &str, value: &'a str) -> &'a str {
    let topic_config = crate::config::TOPIC_CONFIG_KEYS.iter().any(|(topic_key, _)| *topic_key == name);
    match config_type(name) {
        Some(kind) if kind != Type::Password => value,
        None if topic_config => value,
        _ => HIDDEN,
    }
}

/// `Debug` of config values by name (`Properties`, a resource's configs), each shown as
/// [`config_value`] shows it.
pub struct Configs<'a>(pub &'a BTreeMap<String, String>);

impl fmt::Debug for Configs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.0.iter().map(|(k, v)| (k, config_value(k, v)))).finish()
    }
}

/// `Debug` of an optional config value (`None`: deleted) of the config `name`.
pub struct ConfigValue<'a>(pub &'a str, pub Option<&'a str>);

impl fmt::Debug for ConfigValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.1.map(|v| config_value(self.0, v)), f)
    }
}

/// `Debug` of a map whose keys may be shown and whose values are secrets (PLAIN users and their
/// passwords, JAAS options): the keys, each with `[hidden]`.
pub struct Keys<'a, V>(pub &'a BTreeMap<String, V>);

impl<V> fmt::Debug for Keys<'_, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.0.keys().map(|k| (k, Hidden))).finish()
    }
}

#[cfg(test)]
mod tests;
