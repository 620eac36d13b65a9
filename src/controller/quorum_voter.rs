//! A controller on one voter of a multi-voter quorum (`controller.quorum.voters` naming several
//! controllers): the metadata log is the voter's (`raft::voter`), the image is the replay of
//! what the quorum committed (applied from the voter's thread, batch by batch, in offset order),
//! and this controller changes it only while active (it leads, and everything before its epoch
//! is committed and applied): a change is proposed and answered once committed and applied.
//! On becoming active it gives every registered broker a full session (Kafka's new active
//! controller does not fence brokers it has not heard from yet) and, on a new cluster, writes
//! the bootstrap records `ketch format` chose.
//!
//! Invariants: the image only ever holds committed records; a change decided by an inactive
//! controller is refused (NOT_CONTROLLER), never written; bootstrap records are written once,
//! by the first active controller that finds no `metadata.version` in the image.

use std::sync::{Arc, Mutex};

use super::{Applied, BrokerSessions, ControllerSettings, Log, QuorumController, State};
use crate::metadata::image::ImageBuilder;
use crate::metadata::records::MetadataRecord;
use crate::raft::voter::{self, Applier, VoterSettings};
use crate::raft::MetadataLog;

/// The controller's image as the voter's committed records drive it.
struct ImageApplier(Arc<Mutex<Applied>>);

impl ImageApplier {
    fn applied(&self) -> std::sync::MutexGuard<'_, Applied> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Applier for ImageApplier {
    fn apply(&mut self, log: &MetadataLog, from: u64, to: u64) -> u64 {
        let mut applied = self.applied();
        let applied = &mut *applied;
        let replayed = log.records_between(from as i64, to as i64, &mut |offset, record| {
            applied.builder.apply(offset, &record).map_err(anyhow::Error::from)
        });
        let bytes = match replayed {
            Ok(bytes) => bytes,
            Err(e) => {
                // Kafka's controller stops on a committed record it cannot replay.
                tracing::error!(error = %e, from, to, "a committed metadata record does not apply: the controller stops");
                std::process::exit(1);
            }
        };
        applied.image = applied.builder.publish();
        bytes
    }

    fn snapshot(&self) -> Option<Vec<MetadataRecord>> {
        self.applied().builder.settled().map(crate::metadata::image_records::records)
    }

    fn load(&mut self, end: u64, records: Vec<MetadataRecord>) {
        let mut builder = ImageBuilder::new();
        for record in &records {
            if let Err(e) = builder.apply(end as i64 - 1, record) {
                tracing::error!(error = %e, end, "a metadata snapshot does not apply: the controller stops");
                std::process::exit(1);
            }
        }
        let mut applied = self.applied();
        applied.image = builder.publish();
        applied.builder = builder;
    }
}

impl QuorumController {
    /// Opens this node's voter of the quorum (on the current tokio runtime) with a controller on
    /// top of it; the image fills as the quorum commits.
    pub fn open_voter(
        metadata_dir: &std::path::Path,
        settings: ControllerSettings,
        voter_settings: VoterSettings,
    ) -> anyhow::Result<QuorumController> {
        let mut builder = ImageBuilder::new();
        let image = builder.publish();
        let applied = Arc::new(Mutex::new(Applied { builder, image }));
        // (The controller's one-change-at-a-time lock is the voter's writer gate.)
        let changing = voter_settings.writer_gate.clone();
        let voter = voter::start(metadata_dir, voter_settings, Box::new(ImageApplier(applied.clone())))?;
        let (appended, _) = tokio::sync::watch::channel(0);
        let sessions = BrokerSessions::new(settings.config);
        let state = State { log: Log::Voter, observers: Default::default(), sessions };
        let window = crate::quota::rate::Window::controller_from_properties(&settings.static_props).unwrap_or_default();
        let mutations = crate::quota::mutation::MutationBuckets::new(window);
        let acls = crate::security::acl_store::AclStore::open(&settings.static_props, metadata_dir)?;
        let voter = Some(voter);
        Ok(QuorumController { settings, state: Mutex::new(state), voter, changing, applied, appended, mutations, acls })
    }

    /// Follows this voter's leadership: each time it becomes active, fresh sessions for the
    /// registered brokers and, on a new cluster, the bootstrap records. Returns when the voter
    /// stops.
    pub async fn follow_leadership(self: Arc<Self>, metadata_dir: std::path::PathBuf) {
        let Some(voter) = self.voter() else { return };
        let mut status = voter.status.clone();
        let mut was_active = false;
        loop {
            let active = status.borrow_and_update().active;
            if active && !was_active {
                let controller = self.clone();
                let dir = metadata_dir.clone();
                let activated = tokio::task::spawn_blocking(move || controller.activate(&dir)).await;
                match activated {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::error!(error = %e, "becoming the active controller"),
                    Err(e) => tracing::error!(error = %e, "becoming the active controller"),
                }
            }
            was_active = active;
            if status.changed().await.is_err() {
                return;
            }
        }
    }

    fn activate(&self, metadata_dir: &std::path::Path) -> anyhow::Result<()> {
        let image = self.image();
        {
            let mut state = self.lock();
            state.sessions = BrokerSessions::new(self.settings.config);
            state.sessions.touch_all(&image, crate::log::now_ms());
        }
        tracing::info!(offset = image.offset, brokers = image.brokers.len(), "this controller is the active one");
        if !image.features.contains_key("metadata.version") {
            let levels = super::bootstrap::read(metadata_dir)?;
            let scram = crate::security::scram_store::ScramStore::open(metadata_dir)?.records();
            let min_isr = self.settings.topic_defaults.min_insync_replicas;
            let records = super::bootstrap::records(&levels, min_isr, scram);
            self.change(|_| (records, ()))?;
            tracing::info!(features = ?levels, "new metadata log: bootstrap metadata written");
        }
        Ok(())
    }
}

impl QuorumController {
    /// Keeps this controller registered with the quorum's active controller (KIP-919), as Kafka's
    /// `ControllerRegistrationManager`: once the committed image lacks this incarnation's
    /// registration, it is sent to the leader (Kafka's or Ketch's), or written when this
    /// controller is the active one; again after a failure, every half second.
    pub async fn keep_registered(
        self: Arc<Self>,
        request: kafka_protocol::messages::ControllerRegistrationRequest,
        security: Arc<crate::security::client::ClientSecurity>,
    ) {
        use crate::controller::registration;
        let Some(voter) = self.voter() else { return };
        let node_id = self.settings.config.node_id;
        let timeout = std::time::Duration::from_millis(voter.settings().request_timeout_ms.max(1) as u64);
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            if registration::registered(&self.image(), &request) {
                continue;
            }
            let status = voter.status.borrow().clone();
            let outcome = match status.leader {
                Some(leader) if leader == node_id => {
                    if !status.active {
                        continue;
                    }
                    self.change(|d| match registration::decide(d.image, &request) {
                        Ok(records) => (records, ()),
                        Err(_) => (Vec::new(), ()),
                    })
                }
                Some(leader) => {
                    let Some(endpoint) = voter.voter_endpoint(leader) else { continue };
                    let addr = format!("{}:{}", endpoint.host, endpoint.port);
                    let client_id = format!("controller-{node_id}-registration");
                    match crate::node::client::Connection::connect(&addr, &client_id, timeout, &security).await {
                        Ok(mut connection) => connection.send(0, &request, std::time::Duration::ZERO).await.and_then(
                            |answer| match answer.error_code {
                                0 => Ok(()),
                                code => Err(anyhow::anyhow!("error {code}")),
                            },
                        ),
                        Err(e) => Err(e),
                    }
                }
                None => continue,
            };
            match outcome {
                Ok(()) => tracing::debug!(leader = ?status.leader, "controller registration sent"),
                Err(e) => tracing::debug!(leader = ?status.leader, error = %e, "controller registration failed"),
            }
        }
    }
}
