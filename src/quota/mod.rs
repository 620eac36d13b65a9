//! Client quotas (Kafka's KIP-13 byte-rate quotas, set per user and client id through
//! AlterClientQuotas, KIP-546): `entity` decides alterations and describe filters as Kafka's
//! controller does, `store` keeps the quotas in force (a single node's file, or a cluster
//! broker's metadata image) and computes throttle times with `rate`, Kafka's sampled rate.
//!
//! Enforced: `producer_byte_rate` (Produce requests), `consumer_byte_rate` (consumer Fetch
//! responses) and `request_percentage` (the time requests take), by the connection
//! (`server::connection`): the throttle time goes into the response and the connection reads
//! nothing more from the client until it has passed, as Kafka mutes a throttled channel
//! (KIP-219). The IP `connection_creation_rate` is enforced by the listeners' connection limits
//! (`server::limits`), `controller_mutation_rate` where topics are created and deleted
//! (`mutation`: a single node's handlers, a Ketch controller's, for the client a broker forwarded for).

pub mod entity;
pub mod mutation;
pub mod rate;
pub mod store;

pub use store::{Client, Kind, QuotaStore};
