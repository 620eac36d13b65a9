//! Incremental fetch sessions (KIP-227): the broker remembers, per session, which partitions a
//! consumer fetches and what it last told it, so later requests and responses only carry changes.
//!
//! Owns: the session cache (`max.incremental.fetch.session.cache.slots` sessions at most, idle
//! sessions evicted after `min.incremental.fetch.session.eviction.ms`), resolving a request into
//! the full list of partitions to read, and filtering an incremental response to the partitions
//! whose data, high watermark, log start offset or error changed.
//! Invariants: a session's epoch advances by exactly one per successful incremental request; a
//! request with the wrong epoch or an unknown session id changes nothing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use kafka_protocol::error::ResponseError;
use uuid::Uuid;

const INITIAL_EPOCH: i32 = 0;
const FINAL_EPOCH: i32 = -1;

/// A partition as the session knows it: (topic name, topic id, partition index).
pub type Key = (String, Uuid, i32);

#[derive(Debug, Clone)]
pub struct Wanted {
    pub fetch_offset: i64,
    pub max_bytes: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LastSent {
    pub high_watermark: i64,
    pub log_start_offset: i64,
}

#[derive(Debug)]
struct Session {
    next_epoch: i32,
    partitions: IndexMap<Key, (Wanted, Option<LastSent>)>,
    last_used: Instant,
}

/// How to answer one fetch request.
#[derive(Debug)]
pub struct Plan {
    /// Session id to put in the response (0: none).
    pub session_id: i32,
    /// Whether the response should only hold changed partitions.
    pub incremental: bool,
    pub partitions: Vec<(Key, Wanted)>,
}

pub struct FetchSessions {
    max_sessions: usize,
    idle_eviction: Duration,
    inner: Mutex<Inner>,
}

struct Inner {
    sessions: HashMap<i32, Session>,
    next_id: i32,
}

impl FetchSessions {
    pub fn new(max_sessions: usize, idle_eviction: Duration) -> FetchSessions {
        FetchSessions { max_sessions, idle_eviction, inner: Mutex::new(Inner { sessions: HashMap::new(), next_id: 1 }) }
    }

    /// Resolves a request: `requested` are the partitions in it (in order), `forgotten` those
    /// it asks the session to drop.
    pub fn plan(
        &self,
        session_id: i32,
        epoch: i32,
        requested: Vec<(Key, Wanted)>,
        forgotten: Vec<Key>,
    ) -> Result<Plan, ResponseError> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if session_id == 0 {
            if epoch == FINAL_EPOCH {
                return Ok(Plan { session_id: 0, incremental: false, partitions: requested });
            }
            if epoch != INITIAL_EPOCH {
                return Err(ResponseError::InvalidFetchSessionEpoch);
            }
            return Ok(self.create(&mut inner, requested, now));
        }
        if epoch == FINAL_EPOCH || epoch == INITIAL_EPOCH {
            inner.sessions.remove(&session_id);
            if epoch == FINAL_EPOCH {
                return Ok(Plan { session_id: 0, incremental: false, partitions: requested });
            }
            return Ok(self.create(&mut inner, requested, now));
        }
        let session = inner.sessions.get_mut(&session_id).ok_or(ResponseError::FetchSessionIdNotFound)?;
        if session.next_epoch != epoch {
            return Err(ResponseError::InvalidFetchSessionEpoch);
        }
        for key in forgotten {
            session.partitions.shift_remove(&key);
        }
        for (key, wanted) in requested {
            match session.partitions.get_mut(&key) {
                Some(entry) => entry.0 = wanted,
                None => {
                    session.partitions.insert(key, (wanted, None));
                }
            }
        }
        session.next_epoch = next_epoch(epoch);
        session.last_used = now;
        let partitions = session.partitions.iter().map(|(k, (w, _))| (k.clone(), w.clone())).collect();
        Ok(Plan { session_id, incremental: true, partitions })
    }

    fn create(&self, inner: &mut Inner, requested: Vec<(Key, Wanted)>, now: Instant) -> Plan {
        let idle = self.idle_eviction;
        inner.sessions.retain(|_, s| now.duration_since(s.last_used) < idle);
        if inner.sessions.len() >= self.max_sessions {
            // Cache full: serve sessionless, as Kafka does.
            return Plan { session_id: 0, incremental: false, partitions: requested };
        }
        let id = loop {
            let id = inner.next_id;
            inner.next_id = if inner.next_id == i32::MAX { 1 } else { inner.next_id + 1 };
            if !inner.sessions.contains_key(&id) {
                break id;
            }
        };
        let partitions = requested.iter().map(|(k, w)| (k.clone(), (w.clone(), None))).collect();
        inner.sessions.insert(id, Session { next_epoch: 1, partitions, last_used: now });
        Plan { session_id: id, incremental: false, partitions: requested }
    }

    /// Records what a response told the client; for an incremental session returns, per
    /// partition, whether it must appear in the response.
    pub fn record_sent(&self, session_id: i32, sent: &[(Key, LastSent, bool)]) -> Vec<bool> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let Some(session) = inner.sessions.get_mut(&session_id) else {
            return vec![true; sent.len()];
        };
        sent.iter()
            .map(|(key, now, has_data_or_error)| match session.partitions.get_mut(key) {
                Some(entry) => {
                    let changed = *has_data_or_error || entry.1 != Some(*now);
                    entry.1 = Some(*now);
                    changed
                }
                None => true,
            })
            .collect()
    }
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(p: i32) -> Key {
        ("t".into(), Uuid::nil(), p)
    }
    fn want(offset: i64) -> Wanted {
        Wanted { fetch_offset: offset, max_bytes: 100 }
    }

    #[test]
    fn session_lifecycle() {
        let cache = FetchSessions::new(10, Duration::from_secs(60));
        let full = cache.plan(0, 0, vec![(key(0), want(0)), (key(1), want(0))], vec![]).unwrap();
        assert!(full.session_id > 0 && !full.incremental);
        let id = full.session_id;
        let shown =
            cache.record_sent(id, &[(key(0), LastSent::default(), false), (key(1), LastSent::default(), false)]);
        assert_eq!(shown, vec![true, true]);
        // Incremental: only partition 1's offset changes, partition 0 is still fetched.
        let inc = cache.plan(id, 1, vec![(key(1), want(5))], vec![]).unwrap();
        assert!(inc.incremental);
        assert_eq!(inc.partitions.len(), 2);
        assert_eq!(inc.partitions[1].1.fetch_offset, 5);
        let shown = cache.record_sent(
            id,
            &[
                (key(0), LastSent::default(), false),
                (key(1), LastSent { high_watermark: 9, log_start_offset: 0 }, false),
            ],
        );
        assert_eq!(shown, vec![false, true]);
        // Wrong epoch and unknown session are refused.
        assert_eq!(cache.plan(id, 1, vec![], vec![]).unwrap_err(), ResponseError::InvalidFetchSessionEpoch);
        assert_eq!(cache.plan(id + 100, 1, vec![], vec![]).unwrap_err(), ResponseError::FetchSessionIdNotFound);
        // Forgetting a partition removes it from the session.
        let inc = cache.plan(id, 2, vec![], vec![key(0)]).unwrap();
        assert_eq!(inc.partitions.len(), 1);
        // Closing the session.
        let closed = cache.plan(id, FINAL_EPOCH, vec![(key(0), want(0))], vec![]).unwrap();
        assert_eq!(closed.session_id, 0);
        assert_eq!(cache.plan(id, 3, vec![], vec![]).unwrap_err(), ResponseError::FetchSessionIdNotFound);
    }

    #[test]
    fn full_cache_serves_sessionless() {
        let cache = FetchSessions::new(1, Duration::from_secs(60));
        assert!(cache.plan(0, 0, vec![], vec![]).unwrap().session_id > 0);
        assert_eq!(cache.plan(0, 0, vec![], vec![]).unwrap().session_id, 0);
    }
}
