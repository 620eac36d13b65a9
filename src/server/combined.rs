//! The controller half of a combined node of a cluster (`process.roles=broker,controller` with a
//! controller listener: `node::Roles::BrokerController`), Kafka's combined mode: this node is the
//! only voter of the quorum, or one of several (a quorum of combined nodes), and serves other
//! brokers on its controller listener exactly as a controller-only node does
//! (`server::controller`), and its broker half is one of those brokers: it registers and
//! heartbeats with whichever voter leads.
//!
//! Owns: opening the controller on the first log directory's metadata log, serving it on the
//! controller listeners, and publishing its image to this node's broker. The broker does not
//! fetch its own controller's log: like Kafka's combined node (one `__cluster_metadata` log for
//! both halves) it reads the image the controller builds as records become durable. It still
//! registers, heartbeats and shuts down through the controller listener, as any broker does.
//!
//! On disk: the controller's metadata log, `<first log dir>/__cluster_metadata-0` (`raft`),
//! where a broker-only node keeps its observer's copy.
//! Invariants: the broker sees an image only once the records in it are durable (the controller
//! publishes after the append's fsync); images reach it in offset order; the controller outlives
//! the broker (it stops after the broker's controlled shutdown).

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::broker::Broker;
use crate::controller::quorum::QuorumController;
use crate::metadata::image::MetadataImage;
use crate::raft::observer::{Leader, ObserverHandle};
use crate::raft::voter::VoterHandle;

/// How often a voter's image is looked at besides its status changes.
const IMAGE_TICK: Duration = Duration::from_millis(100);

/// A running controller half: stopped by `stop` once the broker half has left.
pub struct ControllerHalf {
    controller: Arc<QuorumController>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The quorum's leader as the broker half sees it: this node, in this epoch, for its life.
    _leader: watch::Sender<Option<Leader>>,
}

impl ControllerHalf {
    /// Opens the controller and serves it on `listeners` (the controller listeners, bound);
    /// returns it with the metadata its broker half follows.
    pub async fn start(
        broker: &Arc<Broker>,
        listeners: Vec<(String, TcpListener)>,
    ) -> anyhow::Result<(ControllerHalf, ObserverHandle)> {
        let (config, node) = (&broker.config, &broker.node);
        let Some((name, first)) = listeners.first() else {
            anyhow::bail!(
                "process.roles=broker,controller: no listener in `listeners` is named in controller.listener.names ({})",
                node.controller_listener_names.join(",")
            );
        };
        let endpoint = super::controller::endpoint(config, name, first.local_addr()?);
        let dirs = broker.topics.log_dirs();
        let controller = super::controller::open(config, node, dirs.cluster_id(), dirs.first()).await?;
        let (epoch, _, _) = controller.quorum();
        let own = format!("{}:{}", endpoint.host, endpoint.port);
        let (images, image) = watch::channel(controller.image());
        let mut tasks = super::controller::serve(&controller, config, listeners)?;
        tasks.push(tokio::spawn(publish_images(controller.clone(), images)));
        let (leader_tx, leader) = match controller.voter() {
            // The only voter: this node leads, in this epoch, for its life.
            None => watch::channel(Some(Leader { id: node.node_id, epoch, addr: own })),
            // One voter of several: whoever the quorum elected, at its controller listener.
            Some(voter) => {
                let (tx, rx) = watch::channel(None);
                tasks.push(tokio::spawn(follow_leader(voter, tx.clone())));
                (tx, rx)
            }
        };
        Ok((ControllerHalf { controller, tasks, _leader: leader_tx }, ObserverHandle { image, leader }))
    }

    /// Stops serving and closes the metadata log.
    pub async fn stop(self) -> anyhow::Result<()> {
        super::controller::stop(self.controller, self.tasks).await
    }
}

/// Publishes the quorum's leader (at its endpoint on the controller listener, as the voter last
/// knows it: configured, from a VotersRecord, or, for an observer, from a fetch answer) as this
/// voter learns it, for the broker half's registration and heartbeats. A leader whose endpoint
/// is not known yet is looked up again every `IMAGE_TICK`.
async fn follow_leader(voter: VoterHandle, leader: watch::Sender<Option<Leader>>) {
    let mut status = voter.status.clone();
    loop {
        let (id, epoch) = {
            let s = status.borrow_and_update();
            (s.leader, s.epoch)
        };
        let endpoint = id.and_then(|id| voter.voter_endpoint(id).map(|e| (id, e)));
        let now = endpoint.map(|(id, e)| Leader { id, epoch, addr: format!("{}:{}", e.host, e.port) });
        let unresolved = id.is_some() && now.is_none();
        leader.send_if_modified(|current| {
            let changed = *current != now;
            if changed {
                *current = now;
            }
            changed
        });
        tokio::select! {
            changed = status.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(IMAGE_TICK), if unresolved => {}
        }
    }
}

/// Publishes the controller's image after every durable change (the only voter) or committed
/// one (a voter of several: the quorum's status moves on as its high watermark does, and a
/// tick catches an image applied after the status that announced it), until nobody watches.
async fn publish_images(controller: Arc<QuorumController>, images: watch::Sender<Arc<MetadataImage>>) {
    let mut appended = controller.subscribe();
    let mut status = controller.voter().map(|v| v.status.clone());
    let mut tick = tokio::time::interval(IMAGE_TICK);
    let voter = status.is_some();
    loop {
        appended.borrow_and_update();
        let image = controller.image();
        images.send_if_modified(|current| {
            debug_assert!(image.offset >= current.offset, "images move forward");
            let newer = image.offset > current.offset;
            if newer {
                *current = image;
            }
            newer
        });
        let status_changed = async {
            match status.as_mut() {
                Some(s) => s.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = appended.changed() => if changed.is_err() { return },
            alive = status_changed => if !alive { return },
            _ = tick.tick(), if voter => {}
            _ = images.closed() => return,
        }
    }
}
