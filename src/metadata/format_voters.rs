//! The dynamic quorum options of `ketch format` (KIP-853), as Kafka 4.1's `kafka-storage format`
//! takes them: `--standalone` (this controller alone, on its controller listener, with a new
//! directory id), `--initial-controllers id@host:port:directory-id,...` and
//! `--no-initial-controllers`. With one of the first two the metadata directory gets the
//! bootstrap checkpoint (`raft::snapshot::write_bootstrap`: kraft.version 1 and the voters), and
//! a voter's metadata directory takes the directory id the list gives it.
//!
//! Invariants: nothing is decided here that Kafka's formatter would refuse (its messages);
//! a voter list names each id once, each with a directory id.

use crate::config::BrokerConfig;
use crate::raft::voters_record::VoterInfo;

/// Which dynamic quorum option was given.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum InitialControllers {
    #[default]
    Unset,
    Standalone,
    List(String),
    NoInitial,
}

/// The initial voters to write into the bootstrap checkpoint (None: none to write), for a node
/// configured by `config` (reached on the first of its `controller.listener.names`).
pub fn initial_voters(config: &BrokerConfig, choice: &InitialControllers) -> anyhow::Result<Option<Vec<VoterInfo>>> {
    let props = &config.properties;
    let static_voters = props.get("controller.quorum.voters").is_some_and(|v| !v.trim().is_empty());
    if static_voters && matches!(choice, InitialControllers::Standalone | InitialControllers::List(_)) {
        anyhow::bail!(
            "You cannot specify controller.quorum.voters and format the node with --initial-controllers or \
             --standalone. If you want to use dynamic quorum, please remove controller.quorum.voters and specify \
             controller.quorum.bootstrap.servers instead."
        );
    }
    if matches!(choice, InitialControllers::Unset | InitialControllers::NoInitial) {
        return Ok(None);
    }
    let listener = props
        .get("controller.listener.names")
        .and_then(|names| names.split(',').map(str::trim).find(|n| !n.is_empty()).map(str::to_string));
    let Some(listener) = listener else {
        anyhow::bail!("You must specify the name of the initial controller listener.");
    };
    if let InitialControllers::List(text) = choice {
        return parse_initial_controllers(text, &listener).map(Some);
    }
    let (host, port) = controller_endpoint(config, &listener)?;
    let directory_id = uuid::Uuid::from_bytes(crate::metadata::random_bytes());
    Ok(Some(vec![VoterInfo { id: config.node_id, directory_id, endpoints: vec![(listener, host, port)] }]))
}

/// The advertised host and port of `listener` (`advertised.listeners`, else `listeners`; an
/// empty host is the machine's name, as Kafka advertises it).
fn controller_endpoint(config: &BrokerConfig, listener: &str) -> anyhow::Result<(String, u16)> {
    for key in ["advertised.listeners", "listeners"] {
        let Some(value) = config.properties.get(key) else { continue };
        let all = crate::config::Listener::parse_list(key, value)?;
        if let Some(l) = all.iter().find(|l| l.name == listener) {
            let host = if l.host.is_empty() { "localhost".to_string() } else { l.host.clone() };
            anyhow::ensure!(l.port != 0, "the controller listener {listener} needs a fixed port to be a voter");
            return Ok((host, l.port));
        }
    }
    anyhow::bail!("Cannot find the controller listener {listener} in listeners or advertised.listeners")
}

/// Kafka's `DynamicVoters.parse`: `id@host:port:directory-id`, comma-separated (a host may be
/// `[ipv6]`).
pub fn parse_initial_controllers(text: &str, listener: &str) -> anyhow::Result<Vec<VoterInfo>> {
    let mut voters: Vec<VoterInfo> = Vec::new();
    for item in text.split(',').map(str::trim) {
        let bad = |why: &str| anyhow::anyhow!("Unable to parse {item:?}: {why}");
        let (id, rest) = item.split_once('@').ok_or_else(|| bad("no @ found"))?;
        let id: i32 = id.parse().map_err(|_| bad("the node id is not a number"))?;
        anyhow::ensure!(id >= 0, bad("the node id is negative"));
        let (addr, directory) = rest.rsplit_once(':').ok_or_else(|| bad("no directory id"))?;
        let (host, port) = addr.rsplit_once(':').ok_or_else(|| bad("no port"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        anyhow::ensure!(!host.is_empty(), bad("no host"));
        let port: u16 = port.parse().map_err(|_| bad("bad port"))?;
        let directory_id = crate::metadata::parse_uuid(directory).ok_or_else(|| bad("bad directory id"))?;
        anyhow::ensure!(!voters.iter().any(|v| v.id == id), "Node id {id} was specified more than once.");
        voters.push(VoterInfo { id, directory_id, endpoints: vec![(listener.to_string(), host.to_string(), port)] });
    }
    anyhow::ensure!(!voters.is_empty(), "No voters given.");
    Ok(voters)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_controllers_parse_as_kafka_writes_them() {
        let voters = parse_initial_controllers(
            "1@127.0.0.1:9093:MvDxzVmcRsaTz33bUuRU6A,2@[::1]:9094:07R5amHmR32VDA6jHkGbTA",
            "CONTROLLER",
        )
        .unwrap();
        assert_eq!(voters.len(), 2);
        assert_eq!(voters[1].endpoints, vec![("CONTROLLER".to_string(), "::1".to_string(), 9094)]);
        assert!(parse_initial_controllers("1@h:1:MvDxzVmcRsaTz33bUuRU6A,1@h:2:07R5amHmR32VDA6jHkGbTA", "C").is_err());
        assert!(parse_initial_controllers("1@h:1", "C").is_err());
        assert!(parse_initial_controllers("x@h:1:MvDxzVmcRsaTz33bUuRU6A", "C").is_err());
    }
}
