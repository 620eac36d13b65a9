//! Ketch: a Kafka-compatible message broker.
//!
//! Layers, with dependencies pointing one way:
//! `server` (sockets, frames, request context) -> `protocol` (kafka-protocol codecs, guard) ->
//! `handlers` (one per API, one dispatch, the served-versions table) -> `replica` (leader
//! appends, high watermark) and the coordinators (`group`, `txn`) -> `metadata` (topics, log
//! directories, features) -> `log` (storage engine).
//! `broker` holds the shared state handlers work on; `config` and `error` are used throughout.
//! `metrics` (counters, Prometheus endpoint) is fed by `server` and reads `broker` when scraped.
//! `fatal` (the panic hook, `halt`) is below everything: any part may stop the process with it.

pub mod broker;
pub mod config;
pub mod controller;
pub mod dynconf;
pub mod env_config;
pub mod error;
pub mod fatal;
pub mod fetch_session;
pub mod group;
pub mod handlers;
pub mod log;
pub mod metadata;
pub mod metrics;
pub mod node;
pub mod protocol;
pub mod quota;
pub mod raft;
pub mod replica;
pub mod security;
pub mod server;
#[cfg(feature = "testcontainers")]
pub mod testcontainers;
pub mod txn;
