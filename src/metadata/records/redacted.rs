//! Hand-written (not generated): the `Debug` of the metadata records that hold secrets, which
//! derive none (`HAND_WRITTEN_DEBUG` in scripts/gen-metadata-records), as Kafka's
//! `RecordRedactor` prints them: a `UserScramCredentialRecord` without its salt and keys, a
//! `ConfigRecord` without the value of a config that is a password or that Ketch does not know
//! (`security::redact::config_value`). Every field is printed by name, so a field added to a
//! record does not compile until it is printed here too.

use std::fmt;

use super::{ConfigRecord, UserScramCredentialRecord};
use crate::security::redact::{ConfigValue, Hidden};

impl fmt::Debug for ConfigRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ConfigRecord { resource_type, resource_name, name, value, unknown_tagged_fields } = self;
        f.debug_struct("ConfigRecord")
            .field("resource_type", resource_type)
            .field("resource_name", resource_name)
            .field("name", name)
            .field("value", &ConfigValue(name, value.as_deref()))
            .field("unknown_tagged_fields", unknown_tagged_fields)
            .finish()
    }
}

impl fmt::Debug for UserScramCredentialRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let UserScramCredentialRecord {
            name,
            mechanism,
            salt: _,
            stored_key: _,
            server_key: _,
            iterations,
            unknown_tagged_fields,
        } = self;
        f.debug_struct("UserScramCredentialRecord")
            .field("name", name)
            .field("mechanism", mechanism)
            .field("salt", &Hidden)
            .field("stored_key", &Hidden)
            .field("server_key", &Hidden)
            .field("iterations", iterations)
            .field("unknown_tagged_fields", unknown_tagged_fields)
            .finish()
    }
}
