//! The `ketch` binary: like `kafka-server-start`, an optional properties file plus
//! `--override key=value` for any property; `KETCH_<NAME>` environment variables set
//! properties too (see `env_config.rs`): file < environment < `--override`.
//! `ketch --health-check HOST:PORT` only checks that a broker accepts connections there (for a
//! container HEALTHCHECK, where there is no shell). `ketch format -t CLUSTER_ID [-c FILE]` and
//! `ketch random-uuid` do what `kafka-storage format` and `kafka-storage random-uuid` do
//! (`metadata::format`); with `CLUSTER_ID` in the environment a node of a controller quorum
//! formats itself at start, as Apache Kafka's container image does.
//!
//! Start-up order: logging (level from `KETCH_LOG`, else `ketch.log.level`, else `info`), the
//! metrics endpoint if `ketch.metrics.listener` is set (before recovery, so `/ready` answers 503
//! meanwhile), then opening and recovering the broker, then serving.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use ketch::config::{parse_properties, split_property, BrokerConfig, Properties};
use ketch::error::ConfigError;
use ketch::metrics::{self, Metrics};

/// The command line (no `Debug`: an `--override` or `--add-scram` may hold a password).
#[derive(Parser)]
#[command(name = "ketch", version, about = "A Kafka-compatible message broker", args_conflicts_with_subcommands = true)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// A Kafka `server.properties` file (optional).
    config: Option<PathBuf>,
    /// Set a property, e.g. `--override log.dirs=/var/lib/ketch` (repeatable).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// Do not start a broker: exit 0 if one accepts TCP connections at HOST:PORT within 3 s, else 1.
    #[arg(long = "health-check", value_name = "HOST:PORT")]
    health_check: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Format the log directories before the first start, like `kafka-storage format`.
    Format {
        /// The cluster id (`ketch random-uuid` makes one).
        #[arg(short = 't', long = "cluster-id")]
        cluster_id: String,
        /// A Kafka `server.properties` file (optional).
        #[arg(short = 'c', long = "config")]
        config: Option<PathBuf>,
        /// Set a property (repeatable).
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// Skip directories already formatted instead of failing.
        #[arg(short = 'g', long = "ignore-formatted")]
        ignore_formatted: bool,
        /// A feature level to start with, e.g. `transaction.version=1` (repeatable).
        #[arg(short = 'f', long = "feature", value_name = "NAME=LEVEL")]
        features: Vec<String>,
        /// A SCRAM credential to start with, e.g. `SCRAM-SHA-256=[name=alice,password=alice-secret]` (repeatable).
        #[arg(short = 'S', long = "add-scram", value_name = "MECHANISM=[name=..,password=..]")]
        add_scram: Vec<String>,
        /// A dynamic quorum (KIP-853) of this controller alone.
        #[arg(short = 's', long = "standalone", conflicts_with_all = ["initial_controllers", "no_initial_controllers"])]
        standalone: bool,
        /// A dynamic quorum of these voters: `id@host:port:directory-id,...`.
        #[arg(
            short = 'I',
            long = "initial-controllers",
            value_name = "VOTERS",
            conflicts_with = "no_initial_controllers"
        )]
        initial_controllers: Option<String>,
        /// A controller that joins a dynamic quorum later (`kafka-metadata-quorum add-controller`).
        #[arg(short = 'N', long = "no-initial-controllers")]
        no_initial_controllers: bool,
    },
    /// Print a new random id (for `format -t`), like `kafka-storage random-uuid`.
    RandomUuid,
}

/// Properties from the file, then `KETCH_*` variables, then overrides; and the ignored variables.
fn load_properties(config: Option<&PathBuf>, overrides: &[String]) -> anyhow::Result<(Properties, Vec<String>)> {
    let mut props = Properties::new();
    if let Some(path) = config {
        let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        props = parse_properties(&text)?;
    }
    let (from_env, ignored) = ketch::env_config::from_env(std::env::vars());
    props.extend(from_env);
    for entry in overrides {
        let (key, value) = split_property(entry)?;
        props.insert(key, value);
    }
    Ok((props, ignored))
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(addr) = &args.health_check {
        std::process::exit(health_check(addr));
    }
    match &args.command {
        Some(Command::RandomUuid) => {
            println!("{}", ketch::metadata::format::random_uuid());
            return Ok(());
        }
        Some(Command::Format {
            cluster_id,
            config,
            overrides,
            ignore_formatted,
            features,
            add_scram,
            standalone,
            initial_controllers,
            no_initial_controllers,
        }) => {
            use ketch::metadata::format_voters::InitialControllers;
            let initial = match (standalone, initial_controllers, no_initial_controllers) {
                (true, _, _) => InitialControllers::Standalone,
                (_, Some(list), _) => InitialControllers::List(list.clone()),
                (_, _, true) => InitialControllers::NoInitial,
                _ => InitialControllers::Unset,
            };
            let (props, _) = load_properties(config.as_ref(), overrides)?;
            let config = BrokerConfig::from_properties(props)?;
            let mut levels = Vec::new();
            for f in features {
                let (name, level) = split_property(f)?;
                let level = level.parse().map_err(|_| anyhow::anyhow!("bad feature level in {f:?}"))?;
                levels.push((name, level));
            }
            match ketch::metadata::format::format(&config, cluster_id, *ignore_formatted, &levels, add_scram, &initial)
            {
                Ok(lines) => lines.iter().for_each(|l| println!("{l}")),
                Err(e) => {
                    eprintln!("{e}");
                    std::process::exit(1);
                }
            }
            return Ok(());
        }
        None => {}
    }
    let (props, ignored) = load_properties(args.config.as_ref(), &args.overrides)?;
    init_logging(&props)?;
    // From here on a panic outside a client's work halts the process (`ketch::fatal`).
    ketch::fatal::install();
    if !ignored.is_empty() {
        tracing::warn!(?ignored, "KETCH_* environment variables that name no broker config are ignored");
    }
    let metrics_listener = metrics::listener_from_properties(&props)?;
    let config = BrokerConfig::from_properties(props)?;
    format_from_environment(&config)?;
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
        let mut node = ketch::node::NodeConfig::from_properties(&config.properties, config.node_id)?;
        node.resolve_bootstrap_voters(&config.properties, config.log_dir())?;
        if node.roles == ketch::node::Roles::Controller {
            return ketch::server::controller::run(config, node).await;
        }
        let broker = tokio::task::spawn_blocking(move || ketch::broker::Broker::open(config)).await??;
        ketch::server::run(broker, metrics).await
    })
}

/// As Apache Kafka's container image does with `CLUSTER_ID`: a node of a controller quorum
/// (`process.roles` set) formats its log directories for that cluster at start when they are
/// not formatted yet (`kafka-storage format --ignore-formatted`), so a container needs no
/// separate format step. Without `CLUSTER_ID`, or on a single node, nothing happens.
fn format_from_environment(config: &BrokerConfig) -> anyhow::Result<()> {
    let Some(cluster_id) = std::env::var("CLUSTER_ID").ok().filter(|v| !v.trim().is_empty()) else { return Ok(()) };
    if !config.properties.contains_key("process.roles") {
        return Ok(());
    }
    for line in ketch::metadata::format::format(config, cluster_id.trim(), true, &[], &[], &Default::default())? {
        tracing::info!("{line}");
    }
    Ok(())
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
