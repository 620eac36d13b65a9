//! Ketch: a Kafka-compatible message broker.
//!
//! Layers, with dependencies pointing one way:
//! `server` (sockets, frames) -> `protocol` (kafka-protocol codecs, version table, guard) ->
//! `handlers` (one per API) -> `metadata` (topics) -> `log` (storage engine).
//! `broker` holds the shared state handlers work on; `config` and `error` are used throughout.
//! `metrics` (counters, Prometheus endpoint) is fed by `server` and reads `broker` when scraped.

pub mod broker;
pub mod config;
pub mod dynconf;
pub mod env_config;
pub mod error;
pub mod fetch_session;
pub mod group;
pub mod handlers;
pub mod log;
pub mod metadata;
pub mod metrics;
pub mod protocol;
pub mod server;
#[cfg(feature = "testcontainers")]
pub mod testcontainers;
pub mod txn;
