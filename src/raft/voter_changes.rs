//! The driver's side of dynamic voters (KIP-853): what it knows of every voter (id, directory
//! id, endpoints: from `controller.quorum.voters` or the bootstrap checkpoint, then from every
//! VotersRecord it appends or restores), connections to voters it learns of from the log, and
//! the leader's AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter (Kafka's `AddVoterHandler`,
//! `RemoveVoterHandler`, `UpdateVoterHandler`): checked with Kafka's errors and messages, written
//! as a VotersRecord, answered once it is committed.
//!
//! Invariants: a change is refused unless the core allows it (`core_voters.rs`: one voter at a
//! time, the leader's epoch and the previous change committed, an added voter caught up); every
//! VotersRecord written names each voter with the directory id and endpoints it was last known
//! by; a voter's endpoint is taken from the newest record naming it.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::*;
use crate::raft::core_voters::ChangeRefusal;
use crate::raft::voters_record::{self, VoterInfo};

/// Changes of voters waiting for the controller to finish a write, at most.
const MAX_DEFERRED_CHANGES: usize = 64;

/// A change of voters asked of the leader.
#[derive(Debug, Clone)]
pub enum VoterChange {
    Add(VoterInfo),
    Remove {
        id: NodeId,
        directory_id: uuid::Uuid,
    },
    /// A voter's new endpoints (UpdateRaftVoter, sent by the voter itself).
    Update(VoterInfo),
}

/// A change's outcome: done (committed), or Kafka's error with its message.
pub type ChangeOutcome = Result<(), (ResponseError, String)>;

/// The endpoint of `voter` on `listener` (else its first): the one a voter connects to.
pub fn endpoint_on(voter: &VoterInfo, listener: &str) -> Option<Endpoint> {
    let (name, host, port) = voter.endpoints.iter().find(|(name, ..)| name == listener).or(voter.endpoints.first())?;
    Some(Endpoint { listener: name.clone(), host: host.clone(), port: *port })
}

/// What a voter knows of the voters at start: the configured ones (with the bootstrap
/// checkpoint's directory ids when formatted with them), the newest snapshot's, then the
/// VotersRecords kept in the log.
pub(super) fn known_at_start(
    settings: &VoterSettings,
    snapshot: Option<&[VoterInfo]>,
    entries: &[crate::raft::core::Entry<Batch>],
) -> BTreeMap<NodeId, VoterInfo> {
    let mut known: BTreeMap<NodeId, VoterInfo> = settings
        .voters
        .iter()
        .map(|(id, e)| {
            let endpoints = vec![(e.listener.clone(), e.host.clone(), e.port)];
            (*id, VoterInfo { id: *id, directory_id: uuid::Uuid::nil(), endpoints })
        })
        .collect();
    for voter in settings.initial_voters.iter().flatten().chain(snapshot.into_iter().flatten()) {
        known.insert(voter.id, voter.clone());
    }
    for voters in entries.iter().filter_map(|e| e.value.as_ref()?.voters.as_ref()) {
        known.extend(voters.iter().map(|v| (v.id, v.clone())));
    }
    known
}

impl Driver {
    /// A VotersRecord's voters (appended or restored): their endpoints become the ones used.
    pub(super) fn learn_voters(&mut self, voters: &[VoterInfo]) {
        self.kraft_version = 1;
        for voter in voters {
            self.known.insert(voter.id, voter.clone());
        }
        self.publish_known();
    }

    /// Hands what is known of the voters to the handle.
    pub(super) fn publish_known(&self) {
        *self.known_shared.write().unwrap_or_else(|p| p.into_inner()) = self.known.clone();
    }

    /// The endpoint a fetch answer gave for leader `id`, used while nothing else is known of it.
    pub(super) fn learn_endpoint(&mut self, id: NodeId, endpoint: Endpoint) {
        if id < 0 || self.known.contains_key(&id) {
            return;
        }
        let endpoints = vec![(endpoint.listener, endpoint.host, endpoint.port)];
        self.known.insert(id, VoterInfo { id, directory_id: uuid::Uuid::nil(), endpoints });
        self.publish_known();
    }

    /// A follower voter whose endpoint in the log is not the one it listens on (restarted on
    /// another port, say) tells the leader with UpdateRaftVoter, as Kafka's voter does, again
    /// every fetch timeout until the log has it: otherwise the voters could not reach it.
    pub(super) fn maybe_update_own_endpoint(&mut self) {
        let me = self.settings.node_id;
        let Some(own) = self.settings.voters.get(&me).cloned() else { return };
        let Role::Follower { leader } = *self.core.role() else { return };
        let in_log = self.known.get(&me).and_then(|v| endpoint_on(v, &own.listener));
        let due = self.update_sent_ms.is_none_or(|at| self.now_ms() - at >= self.settings.fetch_timeout_ms);
        if self.kraft_version < 1 || !self.core.am_voter() || in_log.as_ref() == Some(&own) || !due {
            return;
        }
        let Some(to) = self.known.get(&leader).and_then(|v| endpoint_on(v, &own.listener)) else { return };
        self.update_sent_ms = Some(self.now_ms());
        use kafka_protocol::messages::update_raft_voter_request::{KRaftVersionFeature, Listener};
        let feature = KRaftVersionFeature::default()
            .with_min_supported_version(voters_record::SUPPORTED_KRAFT_VERSIONS.0)
            .with_max_supported_version(voters_record::SUPPORTED_KRAFT_VERSIONS.1);
        let request = kafka_protocol::messages::UpdateRaftVoterRequest::default()
            .with_cluster_id(Some(kafka_protocol::protocol::StrBytes::from_string(self.settings.cluster_id.clone())))
            .with_current_leader_epoch(self.core.election_state().epoch)
            .with_voter_id(me)
            .with_voter_directory_id(self.settings.directory_id)
            .with_listeners(vec![Listener::default()
                .with_name(own.listener.clone().into())
                .with_host(own.host.clone().into())
                .with_port(own.port)])
            .with_k_raft_version_feature(feature);
        tracing::info!(leader, ?in_log, ?own, "telling the leader this voter's endpoint (UpdateRaftVoter)");
        let settings = self.settings.clone();
        self.runtime.spawn(async move {
            let addr = format!("{}:{}", to.host, to.port);
            let timeout = std::time::Duration::from_millis(settings.request_timeout_ms.max(1) as u64);
            let answer = match Connection::connect(&addr, "raft-client", timeout, &settings.security).await {
                Ok(mut c) => c.send(0, &request, std::time::Duration::ZERO).await.map(|a| a.error_code),
                Err(e) => Err(e),
            };
            tracing::debug!(?answer, "UpdateRaftVoter answered");
        });
    }

    /// The connections to voter `to`, opened on first use from the endpoint known for it.
    pub(super) fn peer(&mut self, to: NodeId) -> Option<&Peer> {
        if !self.peers.contains_key(&to) && to != self.settings.node_id {
            let endpoint = endpoint_on(self.known.get(&to)?, self.settings.listener())?;
            let addr = format!("{}:{}", endpoint.host, endpoint.port);
            let control = spawn_peer(&self.runtime, &self.settings, to, addr.clone(), self.events_tx.clone());
            let fetch = spawn_peer(&self.runtime, &self.settings, to, addr, self.events_tx.clone());
            self.peers.insert(to, Peer { control, fetch });
        }
        self.peers.get(&to)
    }

    /// The voter set in force as a VotersRecord names it.
    fn current_infos(&self) -> Vec<VoterInfo> {
        self.infos(self.core.voters())
    }

    /// Voters `ids` as a VotersRecord names them (as last known).
    pub(super) fn infos(&self, ids: &[NodeId]) -> Vec<VoterInfo> {
        let id_only = |id: NodeId| VoterInfo { id, directory_id: uuid::Uuid::nil(), endpoints: Vec::new() };
        ids.iter().map(|id| self.known.get(id).cloned().unwrap_or_else(|| id_only(*id))).collect()
    }

    /// Checks `change` as Kafka's leader does, then writes it; `reply` hears the outcome once the
    /// record is committed (or leadership is lost first: NOT_LEADER_OR_FOLLOWER).
    pub(super) fn change_voters(
        &mut self,
        change: VoterChange,
        reply: oneshot::Sender<ChangeOutcome>,
    ) -> anyhow::Result<()> {
        // (Not while the controller writes: its records' offsets are decided at the log's end.)
        let gate = self.settings.writer_gate.clone();
        let Some(_writing) = super::take_gate(&gate) else {
            if self.deferred_changes.len() < MAX_DEFERRED_CHANGES {
                self.deferred_changes.push((change, reply));
            } else {
                let busy = "Request timed out waiting for leader to handle previous voter change request";
                let _ = reply.send(Err((ResponseError::RequestTimedOut, busy.into())));
            }
            return Ok(());
        };
        let new = match self.checked_change(&change, false) {
            Ok(new) => new,
            Err(refused) => {
                let _ = reply.send(Err(refused));
                return Ok(());
            }
        };
        let ids: Vec<NodeId> = new.iter().map(|v| v.id).collect();
        tracing::info!(?change, voters = ?ids, "writing a change of the metadata quorum's voters");
        let bytes = voters_record::voters_only_batch(&new, crate::log::now_ms());
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(id, Bytes::from(bytes));
        let end = self.core.log().end() + 1;
        self.waiting.push((
            end,
            Box::new(move |outcome: anyhow::Result<u64>| {
                let outcome = outcome.map(|_| ()).map_err(|_| (ResponseError::NotLeaderOrFollower, String::new()));
                let _ = reply.send(outcome);
            }),
        ));
        self.step(Input::Propose(Batch { records: 1, id, voters: Some(new.into()) }), None)?;
        Ok(())
    }

    /// The voter set `change` makes, or why Kafka's leader would refuse it now (with
    /// `lag_allowed`, not for a voter to add lagging: Kafka checks that after its probe).
    pub(super) fn checked_change(
        &self,
        change: &VoterChange,
        lag_allowed: bool,
    ) -> Result<Vec<VoterInfo>, (ResponseError, String)> {
        use ChangeRefusal as R;
        let timed_out = |message: String| (ResponseError::RequestTimedOut, message);
        if !self.core.is_leader() {
            return Err((ResponseError::NotLeaderOrFollower, String::new()));
        }
        if !self.status.borrow().active {
            return Err(timed_out(
                "Request timed out waiting for leader to establish HWM and fence previous voter changes".into(),
            ));
        }
        if self.kraft_version < 1 {
            let what = match change {
                VoterChange::Add(_) => "adding",
                VoterChange::Remove { .. } => "removing",
                VoterChange::Update(_) => "updating",
            };
            return Err((
                ResponseError::UnsupportedVersion,
                format!("Cluster doesn't support {what} voter because the kraft.version feature is 0"),
            ));
        }
        let mut new = self.current_infos();
        let current = keys(&new);
        match change {
            VoterChange::Add(voter) => {
                if new.iter().any(|v| v.id == voter.id) {
                    return Err((
                        ResponseError::DuplicateVoter,
                        format!(
                            "The voter id for {} is already part of the set of voters [{}].",
                            key(voter.id, voter.directory_id),
                            current
                        ),
                    ));
                }
                new.push(voter.clone());
            }
            VoterChange::Remove { id, directory_id } => {
                let Some(at) = new.iter().position(|v| v.id == *id && v.directory_id == *directory_id) else {
                    return Err((
                        ResponseError::VoterNotFound,
                        format!("Cannot remove voter {} from the set of voters [{}]", key(*id, *directory_id), current),
                    ));
                };
                new.remove(at);
            }
            VoterChange::Update(voter) => {
                let Some(at) = new.iter().position(|v| v.id == voter.id && v.directory_id == voter.directory_id) else {
                    return Err((
                        ResponseError::VoterNotFound,
                        format!("Voter {} is not a voter", key(voter.id, voter.directory_id)),
                    ));
                };
                new[at] = voter.clone();
            }
        }
        new.sort_by_key(|v| v.id);
        let ids: Vec<NodeId> = new.iter().map(|v| v.id).collect();
        let checked = match change {
            // (The same voters with new endpoints: only the pending-change rules apply.)
            VoterChange::Update(_) => {
                self.core.check_voter_change(&ids).or_else(|r| if r == R::NoChange { Ok(()) } else { Err(r) })
            }
            _ => self.core.check_voter_change(&ids),
        };
        let checked = checked.or_else(|r| if lag_allowed && matches!(r, R::Lagging(_)) { Ok(()) } else { Err(r) });
        let lagging =
            |id: NodeId| new.iter().find(|v| v.id == id).map_or(id.to_string(), |v| key(v.id, v.directory_id));
        checked.map_err(|refusal| match refusal {
            R::NotLeader => (ResponseError::NotLeaderOrFollower, String::new()),
            R::EpochNotCommitted => timed_out(
                "Request timed out waiting for leader to establish HWM and fence previous voter changes".into(),
            ),
            R::ChangePending => timed_out(format!(
                "Request timed out waiting for voters to commit the latest voter change at {:?} with HWM {}",
                self.core.latest_voters_offset(),
                self.core.high_watermark()
            )),
            R::Lagging(id) => {
                timed_out(format!("Aborted add voter operation for {} since it is lagging behind", lagging(id)))
            }
            R::LastVoter | R::NoChange | R::NotOneVoter => {
                (ResponseError::VoterNotFound, format!("Cannot change the set of voters [{current}] that way"))
            }
        })?;
        Ok(new)
    }
}

/// Kafka's leader asks a voter to add for its ApiVersions before adding it (`AddVoterHandler`):
/// one that cannot be reached, or answers an error, is refused with REQUEST_TIMED_OUT; one whose
/// kraft.version range lacks the finalized level (1, the only one with dynamic voters) with
/// INVALID_REQUEST. Kafka's messages (its first one lacks the voter, as Kafka's does).
pub(super) async fn probe_new_voter(settings: &VoterSettings, voter: &VoterInfo) -> ChangeOutcome {
    use kafka_protocol::messages::ApiVersionsRequest;
    const FINALIZED: i16 = 1;
    let Some(to) = endpoint_on(voter, settings.listener()) else {
        return Err((ResponseError::InvalidRequest, "the voter has no endpoint".into()));
    };
    let addr = format!("{}:{}", to.host, to.port);
    let timeout = std::time::Duration::from_millis(settings.request_timeout_ms.max(1) as u64);
    let request = ApiVersionsRequest::default()
        .with_client_software_name("ketch".into())
        .with_client_software_version(env!("CARGO_PKG_VERSION").into());
    // v4: v3 leaves out supported features whose lowest level is 0, as kraft.version's is.
    let answer = match Connection::connect(&addr, "raft-client", timeout, &settings.security).await {
        Ok(mut c) => c.send(4, &request, std::time::Duration::ZERO).await,
        Err(e) => Err(e),
    };
    let error = match &answer {
        // (A connection refused, closed or timed out: Kafka's network channel says BROKER_NOT_AVAILABLE.)
        Err(_) => Some(ResponseError::BrokerNotAvailable),
        Ok(a) => ResponseError::try_from_code(a.error_code),
    };
    if let Some(error) = error {
        tracing::info!(voter = voter.id, %addr, ?answer, "a voter to add did not answer ApiVersions");
        let name = screaming_snake(&format!("{error:?}"));
        return Err((
            ResponseError::RequestTimedOut,
            format!("Aborted add voter operation for since API_VERSIONS returned an error {name}"),
        ));
    }
    let answer = answer.expect("an error is returned above");
    let range =
        answer.supported_features.iter().find(|f| f.name.as_str() == crate::controller::bootstrap::KRAFT_VERSION);
    match range {
        Some(r) if r.min_version <= FINALIZED && FINALIZED <= r.max_version => Ok(()),
        _ => {
            let shown = range
                .map_or("(min: 0, max: 0)".to_string(), |r| format!("(min: {}, max: {}", r.min_version, r.max_version));
            Err((
                ResponseError::InvalidRequest,
                format!(
                    "Aborted add voter operation for {} since the kraft.version range {shown} doesn't support the finalized version {FINALIZED}",
                    key(voter.id, voter.directory_id)
                ),
            ))
        }
    }
}

/// `BrokerNotAvailable` as Kafka names its errors: `BROKER_NOT_AVAILABLE`.
fn screaming_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// A voter as Kafka's messages name it.
fn key(id: NodeId, directory_id: uuid::Uuid) -> String {
    let directory_id = crate::metadata::print_uuid(&directory_id);
    format!("ReplicaKey(id={id}, directoryId=Optional[{directory_id}])")
}

fn keys(voters: &[VoterInfo]) -> String {
    voters.iter().map(|v| key(v.id, v.directory_id)).collect::<Vec<_>>().join(", ")
}
