//! The `ketch` binary: like `kafka-server-start`, an optional properties file plus
//! `--override key=value` for any property.

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
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
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
