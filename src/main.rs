//! The `ketch` binary: like `kafka-server-start`, an optional properties file plus
//! `--override key=value` for any property; `KETCH_<NAME>` environment variables set
//! properties too (see `env_config.rs`): file < environment < `--override`.
//! `ketch --health-check HOST:PORT` only checks that a broker accepts connections there (for a
//! container HEALTHCHECK, where there is no shell).
//!
//! Start-up order: logging (level from `KETCH_LOG`, else `ketch.log.level`, else `info`), the
//! metrics endpoint if `ketch.metrics.listener` is set (before recovery, so `/ready` answers 503
//! meanwhile), then opening and recovering the broker, then serving.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use ketch::config::{parse_properties, split_property, BrokerConfig, Properties};
use ketch::error::ConfigError;
use ketch::metrics::{self, Metrics};

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
    let mut props = Properties::new();
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        props = parse_properties(&text)?;
    }
    let (from_env, ignored) = ketch::env_config::from_env(std::env::vars());
    props.extend(from_env);
    for entry in &args.overrides {
        let (key, value) = split_property(entry)?;
        props.insert(key, value);
    }
    init_logging(&props)?;
    if !ignored.is_empty() {
        tracing::warn!(?ignored, "KETCH_* environment variables that name no broker config are ignored");
    }
    let metrics_listener = metrics::listener_from_properties(&props)?;
    let config = BrokerConfig::from_properties(props)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let metrics = Arc::new(Metrics::new());
        if let Some((host, port)) = metrics_listener {
            let listener = metrics::http::bind(&host, port, &metrics)
                .await
                .map_err(|e| anyhow::anyhow!("cannot bind {} {host}:{port}: {e}", metrics::LISTENER_KEY))?;
            tracing::info!(addr = %listener.local_addr()?, "metrics endpoint up");
            metrics::http::spawn(listener, metrics.clone());
        }
        let broker = tokio::task::spawn_blocking(move || ketch::broker::Broker::open(config)).await??;
        ketch::server::run(broker, metrics).await
    })
}

/// `KETCH_LOG` (an `EnvFilter` directive such as `debug` or `ketch=debug,info`) wins over the
/// `ketch.log.level` property, which wins over the default `info`.
fn init_logging(props: &Properties) -> anyhow::Result<()> {
    const KEY: &str = "ketch.log.level";
    // A bad property is an error naming the key; a bad KETCH_LOG is ignored with a warning, as
    // before `ketch.log.level` existed.
    let from_config = match props.get(KEY) {
        Some(level) => Some(
            tracing_subscriber::EnvFilter::try_new(level.trim())
                .map_err(|e| ConfigError::invalid_because(KEY, level, &e.to_string()))?,
        ),
        None => None,
    };
    let env = std::env::var("KETCH_LOG").ok().filter(|v| !v.trim().is_empty());
    let (from_env, bad_env) = match env.as_deref().map(tracing_subscriber::EnvFilter::try_new) {
        Some(Ok(filter)) => (Some(filter), None),
        Some(Err(e)) => (None, Some(e.to_string())),
        None => (None, None),
    };
    let filter = from_env.or(from_config).unwrap_or_else(|| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter)
        .init();
    if let Some(error) = bad_env {
        tracing::warn!(value = ?env, %error, "ignoring invalid KETCH_LOG");
    }
    Ok(())
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
