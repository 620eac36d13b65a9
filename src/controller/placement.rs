//! Replica placement for new partitions: Kafka's `StripedReplicaPlacer` semantics.
//!
//! Brokers are grouped by rack (brokers without a rack form one rack of their own). Racks are
//! taken in turn ("striping"): the first replica of each partition (its preferred leader) comes
//! from the next rack that has an unfenced broker, the other replicas from the following racks,
//! each rack handing out its brokers round robin, unfenced ones before fenced ones. Every call
//! moves the starting rack and each touched rack's starting broker on by one, so leaders and
//! followers spread evenly; once as many partitions as there are unfenced brokers were placed,
//! racks and brokers are reshuffled (seeded) so the same assignments do not simply repeat.
//!
//! Fenced brokers are used only when the unfenced ones are too few, and never as first replica.
//! Brokers in controlled shutdown are not offered at all (`placement_brokers`), as Kafka's
//! `BrokerHeartbeatManager.usableBrokers` skips them.
//!
//! Invariants: every partition gets exactly `replication_factor` distinct brokers; its first
//! replica is unfenced; the result only depends on the arguments (the seed replaces Kafka's
//! `Random`, so the exact assignments differ from a Kafka controller's, the spreading does not).

use super::Refused;
use crate::metadata::image::MetadataImage;

/// A broker replicas can be placed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementBroker {
    pub id: i32,
    pub rack: Option<String>,
    pub fenced: bool,
}

/// The brokers placement may use: every registered broker not in controlled shutdown.
pub fn placement_brokers(image: &MetadataImage) -> Vec<PlacementBroker> {
    image
        .brokers
        .values()
        .filter(|b| !b.in_controlled_shutdown)
        .map(|b| PlacementBroker { id: b.id, rack: b.rack.clone(), fenced: b.fenced })
        .collect()
}

/// Replicas for `partitions` new partitions, `replication_factor` each; refused with Kafka's
/// INVALID_REPLICATION_FACTOR text (the caller answers that error code).
pub fn place(
    brokers: &[PlacementBroker],
    partitions: i32,
    replication_factor: i16,
    seed: u64,
) -> Result<Vec<Vec<i32>>, Refused> {
    let refuse = |reason: String| {
        Err(Refused(format!("Unable to replicate the partition {replication_factor} time(s): {reason}")))
    };
    if replication_factor <= 0 {
        return refuse(format!(
            "Invalid replication factor {replication_factor}: the replication factor must be positive."
        ));
    }
    let mut racks = RackList::new(brokers, seed);
    if racks.unfenced_count == 0 {
        return refuse("All brokers are currently fenced.".to_string());
    }
    if replication_factor as usize > racks.total_count {
        return refuse(format!(
            "The target replication factor of {replication_factor} cannot be reached because only {} broker(s) \
             are registered.",
            racks.total_count
        ));
    }
    let placed: Vec<Vec<i32>> = (0..partitions.max(0)).map(|_| racks.place(replication_factor as usize)).collect();
    for replicas in &placed {
        debug_assert_eq!(replicas.len(), replication_factor as usize);
        debug_assert!(replicas.iter().enumerate().all(|(i, r)| !replicas[..i].contains(r)), "distinct replicas");
    }
    Ok(placed)
}

/// A seeded generator, enough to shuffle.
struct Rng(crate::raft::core::SplitMix64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A number in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        assert!(n > 0);
        (self.next_u64() % n as u64) as usize
    }

    /// Fisher-Yates.
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// The brokers of one rack and one fencing state, handed out round robin.
#[derive(Debug, Default)]
struct BrokerList {
    brokers: Vec<i32>,
    /// How many brokers this list handed out in the current epoch.
    index: usize,
    /// Where the round robin starts in the current epoch.
    offset: usize,
    epoch: u64,
}

impl BrokerList {
    fn initialize(&mut self, rng: &mut Rng) {
        if !self.brokers.is_empty() {
            self.brokers.sort_unstable();
            self.offset = rng.below(self.brokers.len());
        }
    }

    /// The next broker of this list in `epoch` (one placement call), none once all were given.
    fn next(&mut self, epoch: u64) -> Option<i32> {
        if self.brokers.is_empty() {
            return None;
        }
        if self.epoch != epoch {
            self.epoch = epoch;
            self.index = 0;
            self.offset = (self.offset + 1) % self.brokers.len();
        }
        if self.index >= self.brokers.len() {
            return None;
        }
        let broker = self.brokers[(self.index + self.offset) % self.brokers.len()];
        self.index += 1;
        Some(broker)
    }
}

#[derive(Debug, Default)]
struct Rack {
    unfenced: BrokerList,
    fenced: BrokerList,
}

impl Rack {
    fn next(&mut self, epoch: u64) -> Option<i32> {
        self.unfenced.next(epoch).or_else(|| self.fenced.next(epoch))
    }
}

struct RackList {
    rng: Rng,
    /// Racks by name (`None` first), reshuffled once every unfenced broker led a partition.
    racks: Vec<(Option<String>, Rack)>,
    total_count: usize,
    unfenced_count: usize,
    /// Placement calls since the last reshuffle.
    epoch: u64,
    /// The rack the next partition's first replica is looked for in first.
    offset: usize,
}

impl RackList {
    fn new(brokers: &[PlacementBroker], seed: u64) -> RackList {
        let mut rng = Rng(crate::raft::core::SplitMix64(seed));
        let mut racks: Vec<(Option<String>, Rack)> = Vec::new();
        let mut unfenced_count = 0;
        for b in brokers {
            let at = match racks.iter().position(|(name, _)| *name == b.rack) {
                Some(at) => at,
                None => {
                    racks.push((b.rack.clone(), Rack::default()));
                    racks.len() - 1
                }
            };
            let rack = &mut racks[at].1;
            if b.fenced {
                rack.fenced.brokers.push(b.id);
            } else {
                unfenced_count += 1;
                rack.unfenced.brokers.push(b.id);
            }
        }
        racks.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, rack) in racks.iter_mut() {
            rack.unfenced.initialize(&mut rng);
            rack.fenced.initialize(&mut rng);
        }
        let offset = if racks.is_empty() { 0 } else { rng.below(racks.len()) };
        RackList { rng, racks, total_count: brokers.len(), unfenced_count, epoch: 0, offset }
    }

    /// The replicas of one partition. The caller checked `1 <= replication_factor <=
    /// total_count` and that some broker is unfenced.
    fn place(&mut self, replication_factor: usize) -> Vec<i32> {
        assert!(replication_factor >= 1 && replication_factor <= self.total_count);
        assert!(self.unfenced_count > 0);
        // Never reshuffle for a single unfenced broker: the epoch would never move on.
        if self.epoch == self.unfenced_count as u64 && self.unfenced_count > 1 {
            self.rng.shuffle(&mut self.racks);
            for (_, rack) in self.racks.iter_mut() {
                self.rng.shuffle(&mut rack.unfenced.brokers);
                self.rng.shuffle(&mut rack.fenced.brokers);
            }
            self.epoch = 0;
        }
        if self.offset == self.racks.len() {
            self.offset = 0;
        }
        let rack_count = self.racks.len();
        let mut replicas = Vec::with_capacity(replication_factor);
        // The first replica: the first unfenced broker from the starting rack on.
        let mut first_rack = self.offset;
        loop {
            if let Some(broker) = self.racks[first_rack].1.unfenced.next(self.epoch) {
                replicas.push(broker);
                break;
            }
            first_rack = (first_rack + 1) % rack_count;
        }
        // The others: one rack after the other from the starting rack, skipping the first
        // replica's rack once (it already gave one).
        let mut skip_rack = Some(first_rack);
        let mut rack_index = self.offset;
        while replicas.len() < replication_factor {
            let broker = if skip_rack == Some(rack_index) {
                skip_rack = None;
                None
            } else {
                self.racks[rack_index].1.next(self.epoch)
            };
            rack_index = (rack_index + 1) % rack_count;
            if let Some(broker) = broker {
                debug_assert!(!replicas.contains(&broker));
                replicas.push(broker);
            }
        }
        self.epoch += 1;
        self.offset += 1;
        replicas
    }
}

#[cfg(test)]
#[path = "placement_tests.rs"]
mod placement_tests;
