//! The partitions of one topic that this broker hosts (Kafka's `LogManager` view of a topic):
//! the topic has `len()` partitions in the cluster, and a log is open here only for those this
//! broker is a replica of. A single node hosts every partition; a broker of a cluster only those
//! the metadata image assigns to it.
//! Invariants: a hosted partition sits at its own index (`get(i)` is partition `i`); the count
//! never goes below the highest hosted index + 1.

use std::sync::Arc;

use crate::log::Partition;

#[derive(Debug, Clone, Default)]
pub struct HostedPartitions {
    slots: Vec<Option<Arc<Partition>>>,
}

impl HostedPartitions {
    /// Every partition of the topic hosted here (a single node).
    pub fn all(partitions: Vec<Arc<Partition>>) -> HostedPartitions {
        for (i, p) in partitions.iter().enumerate() {
            assert_eq!(p.index as usize, i, "partition {} at slot {i}", p.index);
        }
        HostedPartitions { slots: partitions.into_iter().map(Some).collect() }
    }

    /// A topic of `count` partitions of which `hosted` are open here.
    pub fn some(count: usize, hosted: impl IntoIterator<Item = Arc<Partition>>) -> HostedPartitions {
        let mut slots = vec![None; count];
        for p in hosted {
            let i = p.index as usize;
            assert!(i < count, "partition {i} of a topic of {count}");
            slots[i] = Some(p);
        }
        HostedPartitions { slots }
    }

    /// The topic's partition count in the cluster (hosted here or not).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Partition `index`, if hosted here.
    pub fn get(&self, index: usize) -> Option<&Arc<Partition>> {
        self.slots.get(index).and_then(Option::as_ref)
    }

    /// The hosted partitions, by index.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Partition>> {
        self.slots.iter().flatten()
    }

    /// Whether every partition of the topic is hosted here.
    pub fn hosts_all(&self) -> bool {
        self.slots.iter().all(Option::is_some)
    }

    /// The hosted partitions followed by `more` (new partitions, hosted here, at the next indexes).
    pub fn grown(&self, count: usize, more: impl IntoIterator<Item = Arc<Partition>>) -> HostedPartitions {
        assert!(count >= self.slots.len());
        HostedPartitions::some(count, self.iter().cloned().chain(more))
    }
}

impl<'a> IntoIterator for &'a HostedPartitions {
    type Item = &'a Arc<Partition>;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Option<Arc<Partition>>>>;
    fn into_iter(self) -> Self::IntoIter {
        self.slots.iter().flatten()
    }
}
