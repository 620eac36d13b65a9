//! `ketch format` and `ketch random-uuid`: Kafka's `kafka-storage format -t CLUSTER_ID -c FILE`
//! and `kafka-storage random-uuid`, for operators who format their log directories before the
//! first start (a cluster shares one id chosen up front). Without it, the first start formats
//! the directories itself with a new random cluster id, as before.
//!
//! On disk: `meta.properties` in every entry of `log.dirs` (KIP-858 format, see `log_dirs.rs`:
//! `version=1`, `cluster.id`, `node.id`, a fresh `directory.id` each), and, for `--feature`,
//! the finalized feature levels in the first directory: a single node's own
//! (`metadata::features`); on a controller node (`process.roles=controller`, or
//! `broker,controller` with a controller listener) the new cluster's bootstrap levels
//! (`controller::bootstrap`, Kafka's formatter rules: every feature's level, defaults filled
//! in), which the controller writes into its metadata log at first start; a
//! broker of a quorum checks them as Kafka does and keeps none (the controller's are the
//! cluster's, as Kafka's brokers ignore their bootstrap metadata). For `--add-scram`, the SCRAM
//! credentials there too (`security::scram_store`; a controller also writes them into its
//! metadata log at first start as `UserScramCredentialRecord`s, as Kafka's bootstrap).
//! Invariants: a directory already formatted is never rewritten (refused, or skipped with
//! `--ignore-formatted`, as Kafka does); nothing is written unless every check passed.

use crate::config::BrokerConfig;
use crate::log::partition_log::write_atomically;

use super::features::{self, Features};
use super::format_voters::{initial_voters, InitialControllers};
use super::log_dirs::{base64_url, read_meta};
use super::store::random_bytes;
use crate::controller::bootstrap;
use crate::node::Roles;

/// A new Kafka `Uuid` in its printed form (URL-safe base64, no padding), never one that starts
/// with '-' (Kafka avoids those so they cannot be taken for command-line options).
pub fn random_uuid() -> String {
    loop {
        let id = base64_url(&random_bytes());
        if !id.starts_with('-') {
            return id;
        }
    }
}

/// Whether `id` is a printed Kafka `Uuid` (22 characters of URL-safe base64 for 16 bytes).
fn is_uuid(id: &str) -> bool {
    id.len() == 22 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Formats every log directory of `config`; returns the lines to print.
pub fn format(
    config: &BrokerConfig,
    cluster_id: &str,
    ignore_formatted: bool,
    feature_levels: &[(String, i16)],
    add_scram: &[String],
    initial_controllers: &InitialControllers,
) -> anyhow::Result<Vec<String>> {
    if !is_uuid(cluster_id) {
        anyhow::bail!("Cluster ID string {cluster_id} does not appear to be a valid UUID");
    }
    let roles = crate::node::NodeConfig::from_properties(&config.properties, config.node_id)?.roles;
    // A node of a controller quorum: the cluster's levels, checked as Kafka's formatter does.
    let bootstrap = match roles {
        Roles::Combined => {
            for (name, level) in feature_levels {
                let Some((_, min, max, _)) = features::SUPPORTED.iter().find(|f| f.0 == name) else {
                    anyhow::bail!("Unsupported feature: {name}.");
                };
                if !(*min..=*max).contains(level) {
                    anyhow::bail!("No feature:{name} with feature level {level}");
                }
            }
            None
        }
        Roles::Broker | Roles::Controller | Roles::BrokerController => {
            Some(bootstrap::effective_levels(feature_levels).map_err(anyhow::Error::msg)?)
        }
    };
    let initial_voters = match roles {
        Roles::Controller | Roles::BrokerController => initial_voters(config, initial_controllers)?,
        _ if *initial_controllers != InitialControllers::Unset => {
            anyhow::bail!("--standalone, --initial-controllers and --no-initial-controllers are for controllers")
        }
        _ => None,
    };
    let scram = add_scram
        .iter()
        .map(|a| crate::security::scram_store::parse_add_scram(a).map_err(|e| anyhow::anyhow!(e)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut todo = Vec::new();
    for (i, dir) in config.log_dirs.iter().enumerate() {
        if read_meta(dir)?.is_some() {
            if !ignore_formatted {
                anyhow::bail!(
                    "Log directory {} is already formatted. Use --ignore-formatted to ignore this directory and \
                     format the others.",
                    dir.display()
                );
            }
            if i == 0 && !feature_levels.is_empty() {
                anyhow::bail!("The metadata directory {} is already formatted: its features stay", dir.display());
            }
            if i == 0 && !scram.is_empty() {
                anyhow::bail!(
                    "The metadata directory {} is already formatted: --add-scram needs it new",
                    dir.display()
                );
            }
            continue;
        }
        todo.push((i, dir));
    }
    if todo.is_empty() {
        // (Only with --ignore-formatted: without it the first formatted directory is refused.)
        // Kafka's formatter says so and succeeds.
        return Ok(vec!["All of the log directories are already formatted.".to_string()]);
    }
    let mut lines = Vec::new();
    for (i, dir) in todo {
        std::fs::create_dir_all(dir)?;
        // (A voter's metadata directory takes the directory id the voter list gives it.)
        let own = initial_voters.as_ref().and_then(|v| v.iter().find(|v| v.id == config.node_id));
        let directory_id = match own {
            Some(voter) if i == 0 => super::print_uuid(&voter.directory_id),
            _ => random_uuid(),
        };
        let text =
            format!("version=1\ncluster.id={cluster_id}\nnode.id={}\ndirectory.id={directory_id}\n", config.node_id);
        write_atomically(&dir.join("meta.properties"), text.as_bytes())?;
        if i == 0 && matches!(roles, Roles::Controller | Roles::BrokerController) {
            if let Some(levels) = &bootstrap {
                bootstrap::write(dir, levels)?;
            }
            if let Some(voters) = &initial_voters {
                let metadata_log = dir.join(crate::raft::METADATA_LOG_DIR_NAME);
                crate::raft::snapshot::write_bootstrap(&metadata_log, voters, crate::log::now_ms())?;
            }
        }
        if i == 0 && roles == Roles::Combined {
            let finalized = Features::open(dir, config.node_id)?;
            let updates: Vec<(String, i16, i8)> = feature_levels
                .iter()
                .map(|(name, level)| {
                    let now = finalized.level(name);
                    let kind = if *level >= now { features::UPGRADE } else { features::UNSAFE_DOWNGRADE };
                    (name.clone(), *level, kind)
                })
                .collect();
            finalized.update(&updates, false).map_err(|refused| anyhow::anyhow!(refused.1))?;
        }
        if i == 0 {
            let store = crate::security::scram_store::ScramStore::open(dir)?;
            for (user, mechanism, credential) in &scram {
                store.add(user, *mechanism, credential.clone())?;
            }
            lines.push(format!("Formatting metadata directory {} with cluster id {cluster_id}.", dir.display()));
        } else {
            lines.push(format!("Formatting data directory {} with cluster id {cluster_id}.", dir.display()));
        }
    }
    Ok(lines)
}
