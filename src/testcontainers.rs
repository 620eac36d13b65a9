//! A [testcontainers](https://docs.rs/testcontainers) `Image` for Ketch (cargo feature
//! `testcontainers`), so a test starts a throwaway broker in one line:
//!
//! ```no_run
//! # async fn demo() -> testcontainers::core::error::Result<()> {
//! let ketch = ketch::testcontainers::Ketch::default().run().await?;
//! let bootstrap = ketch.bootstrap_servers(); // e.g. "127.0.0.1:49731", give it to any Kafka client
//! # Ok(()) }
//! ```
//!
//! Owns: the container's configuration (image `ketch:latest` built from `docker/Dockerfile`,
//! broker properties as `KETCH_*` variables, readiness = the "ketch listening on" line).
//! Invariants: the broker advertises exactly the address a client on the Docker host uses
//! (`advertised host : host port`), because Kafka clients reconnect to the advertised address;
//! so the host port is chosen before the container starts (a free port at `Ketch::default()`;
//! another process could take it in between, then start fails and can be retried) and mapped
//! explicitly, not left to Docker.

use std::borrow::Cow;
use std::collections::BTreeMap;

use ::testcontainers::core::{ContainerPort, IntoContainerPort, WaitFor};
use ::testcontainers::runners::AsyncRunner;
use ::testcontainers::{ContainerAsync, Image, ImageExt};

/// The port Ketch listens on inside the container.
pub const CONTAINER_PORT: u16 = 9092;

/// The Ketch image and its broker properties. Its `Debug` shows the names of the `KETCH_*`
/// variables, not their values (a property may be a password).
#[derive(Clone)]
pub struct Ketch {
    name: String,
    tag: String,
    host_port: u16,
    advertised_host: String,
    env: BTreeMap<String, String>,
    ports: [ContainerPort; 1],
}

impl std::fmt::Debug for Ketch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Every field, by name: a new field does not compile until it is printed here too.
        let Ketch { name, tag, host_port, advertised_host, env, ports } = self;
        f.debug_struct("Ketch")
            .field("name", name)
            .field("tag", tag)
            .field("host_port", host_port)
            .field("advertised_host", advertised_host)
            .field("env", &crate::security::redact::Keys(env))
            .field("ports", ports)
            .finish()
    }
}

impl Default for Ketch {
    /// Image `ketch:latest`, advertised at `127.0.0.1:<a free port>`.
    fn default() -> Self {
        let host_port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("no free port on 127.0.0.1");
        Ketch {
            name: "ketch".into(),
            tag: "latest".into(),
            host_port,
            advertised_host: "127.0.0.1".into(),
            env: BTreeMap::new(),
            ports: [CONTAINER_PORT.tcp()],
        }
    }
}

impl Ketch {
    /// Another image name and tag (e.g. one pushed to a registry).
    pub fn with_image(mut self, name: impl Into<String>, tag: impl Into<String>) -> Self {
        self.name = name.into();
        self.tag = tag.into();
        self
    }

    /// Sets a broker property under Kafka's name, e.g. `with_config("num.partitions", "3")`.
    pub fn with_config(mut self, property: &str, value: impl Into<String>) -> Self {
        self.env.insert(env_var_for(property), value.into());
        self
    }

    /// The host clients use to reach the Docker host's mapped port (default `127.0.0.1`; set it
    /// when the engine runs elsewhere, e.g. the host of `DOCKER_HOST`).
    pub fn with_advertised_host(mut self, host: impl Into<String>) -> Self {
        self.advertised_host = host.into();
        self
    }

    /// The port on the Docker host that is mapped to the broker.
    pub fn with_host_port(mut self, port: u16) -> Self {
        self.host_port = port;
        self
    }

    pub fn host_port(&self) -> u16 {
        self.host_port
    }

    /// `host:port` for clients' `bootstrap.servers`.
    pub fn bootstrap_servers(&self) -> String {
        format!("{}:{}", self.advertised_host, self.host_port)
    }

    /// Starts the container with its port mapped (on 127.0.0.1 when the advertised host is a
    /// loopback address, on every interface otherwise); ready once the broker listens.
    pub async fn run(self) -> ::testcontainers::core::error::Result<RunningKetch> {
        let bootstrap = self.bootstrap_servers();
        let port = self.host_port;
        // Published on the loopback interface only when clients use it (the default): the broker
        // is then not reachable from other machines.
        let loopback = self.advertised_host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
            || self.advertised_host == "localhost";
        let host_ip = if loopback { Some("127.0.0.1".to_string()) } else { None };
        let container = self
            .with_mapped_port(port, CONTAINER_PORT.tcp())
            .with_host_config_modifier(move |host_config| {
                for binding in host_config.port_bindings.iter_mut().flat_map(|b| b.values_mut()).flatten().flatten() {
                    binding.host_ip = host_ip.clone();
                }
            })
            .start()
            .await?;
        Ok(RunningKetch { container, bootstrap })
    }
}

/// A started Ketch container; dropping it stops and removes the container.
pub struct RunningKetch {
    pub container: ContainerAsync<Ketch>,
    bootstrap: String,
}

impl RunningKetch {
    /// `host:port` for clients' `bootstrap.servers`.
    pub fn bootstrap_servers(&self) -> &str {
        &self.bootstrap
    }
}

/// `num.partitions` -> `KETCH_NUM_PARTITIONS` (the mapping of `env_config.rs`, reversed).
pub fn env_var_for(property: &str) -> String {
    format!("KETCH_{}", property.replace('.', "_").to_ascii_uppercase())
}

impl Image for Ketch {
    fn name(&self) -> &str {
        &self.name
    }

    fn tag(&self) -> &str {
        &self.tag
    }

    fn ready_conditions(&self) -> Vec<WaitFor> {
        vec![WaitFor::message_on_stdout("ketch listening on")]
    }

    fn env_vars(&self) -> impl IntoIterator<Item = (impl Into<Cow<'_, str>>, impl Into<Cow<'_, str>>)> {
        let mut env = self.env.clone();
        env.insert("KETCH_LISTENERS".into(), format!("PLAINTEXT://:{CONTAINER_PORT}"));
        env.insert("KETCH_ADVERTISED_LISTENERS".into(), format!("PLAINTEXT://{}", self.bootstrap_servers()));
        env
    }

    fn expose_ports(&self) -> &[ContainerPort] {
        &self.ports
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_reaches_the_broker_as_env_config_reads_it() {
        let image = Ketch::default().with_config("log.retention.hours", "1").with_host_port(40000);
        let env: BTreeMap<String, String> =
            image.env_vars().into_iter().map(|(k, v)| (k.into().into_owned(), v.into().into_owned())).collect();
        let (props, ignored) = crate::env_config::from_env(env.clone());
        assert!(ignored.is_empty(), "{ignored:?}");
        assert_eq!(props.get("log.retention.hours").map(String::as_str), Some("1"));
        assert_eq!(props.get("advertised.listeners").map(String::as_str), Some("PLAINTEXT://127.0.0.1:40000"));
        assert_eq!(props.get("listeners").map(String::as_str), Some("PLAINTEXT://:9092"));
    }
}
