//! The `ketch` binary: like `kafka-server-start`, an optional properties file plus
//! `--override key=value` for any property; `KETCH_<NAME>` environment variables set
//! properties too (see `env_config.rs`): file < environment < `--override`.
//! `ketch --health-check HOST:PORT` only checks that a broker accepts connections there (for a
//! container HEALTHCHECK, where there is no shell).

use std::path::PathBuf;

use clap::Parser;
use ketch::config::{parse_properties, split_property, BrokerConfig, Properties};

#[derive(Parser, Debug)]
#[command(name = "ketch", version, about = "A Kafka-compatible message broker")]
struct Args {
    /// A Kafka `server.properties` file (optional).
    config: Option<PathBuf>,
    /// Set a property, e.g. `--override log.dirs=/var/lib/ketch` (repeatable).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// Do not start a broker: exit 0 if one accepts TCP connections at HOST:PORT within 3 s, else 1.
    #[arg(long = "health-check", value_name = "HOST:PORT")]
    health_check: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(addr) = &args.health_check {
        std::process::exit(health_check(addr));
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("KETCH_LOG").unwrap_or_else(|_| "info".into()))
        .init();
    let mut props = Properties::new();
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        props = parse_properties(&text)?;
    }
    let (from_env, ignored) = ketch::env_config::from_env(std::env::vars());
    if !ignored.is_empty() {
        tracing::warn!(?ignored, "KETCH_* environment variables that name no broker config are ignored");
    }
    props.extend(from_env);
    for entry in &args.overrides {
        let (key, value) = split_property(entry)?;
        props.insert(key, value);
    }
    let config = BrokerConfig::from_properties(props)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let broker = tokio::task::spawn_blocking(move || ketch::broker::Broker::open(config)).await??;
        ketch::server::run(broker).await
    })
}

fn health_check(addr: &str) -> i32 {
    use std::net::ToSocketAddrs;
    let timeout = std::time::Duration::from_secs(3);
    let reachable = addr
        .to_socket_addrs()
        .map(|addrs| addrs.into_iter().any(|a| std::net::TcpStream::connect_timeout(&a, timeout).is_ok()))
        .unwrap_or(false);
    if reachable {
        0
    } else {
        eprintln!("ketch: no broker accepting connections at {addr}");
        1
    }
}
