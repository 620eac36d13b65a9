//! Incremental fetch sessions (KIP-227): the broker remembers, per session, which partitions a
//! consumer fetches and what it last told it, so later requests and responses only carry changes.
//!
//! Owns: the session cache (`max.incremental.fetch.session.cache.slots` sessions at most, with
//! Kafka's `FetchSessionCache` rules for a new session when it is full), resolving a request into
//! the full list of partitions to read, and filtering an incremental response to the partitions
//! whose data, high watermark, log start offset or error changed.
//! Eviction (Kafka's `tryEvict`, with `min.incremental.fetch.session.eviction.ms` as its 120 s):
//! the least recently used session goes if it was idle that long; otherwise a new session may
//! take the place of the smallest "evictable" one, ordered by (privileged, partitions, id): for a
//! follower's (privileged) session every consumer's session and the followers' older than that
//! time, for a consumer's only sessions older than that time; it does only when it is bigger in
//! that order (a follower's beats a consumer's, then more partitions win). A full cache with no
//! such session serves the request sessionless (session id 0), as Kafka does.
//! Session ids are random (never 0, never a live one): a client cannot guess another's.
//! Invariants: a session's epoch advances by exactly one per successful incremental request; a
//! request with the wrong epoch or an unknown session id changes nothing; the cache never holds
//! more than its slots.

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
    created: Instant,
    /// A follower's (Kafka's "privileged" session).
    privileged: bool,
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
}

impl FetchSessions {
    pub fn new(max_sessions: usize, idle_eviction: Duration) -> FetchSessions {
        FetchSessions { max_sessions, idle_eviction, inner: Mutex::new(Inner { sessions: HashMap::new() }) }
    }

    /// Resolves a request: `requested` are the partitions in it (in order), `forgotten` those
    /// it asks the session to drop; `privileged` for a follower's fetch.
    pub fn plan(
        &self,
        session_id: i32,
        epoch: i32,
        requested: Vec<(Key, Wanted)>,
        forgotten: Vec<Key>,
        privileged: bool,
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
            return Ok(self.create(&mut inner, requested, now, privileged));
        }
        if epoch == FINAL_EPOCH || epoch == INITIAL_EPOCH {
            inner.sessions.remove(&session_id);
            if epoch == FINAL_EPOCH {
                return Ok(Plan { session_id: 0, incremental: false, partitions: requested });
            }
            return Ok(self.create(&mut inner, requested, now, privileged));
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

    fn create(&self, inner: &mut Inner, requested: Vec<(Key, Wanted)>, now: Instant, privileged: bool) -> Plan {
        if inner.sessions.len() >= self.max_sessions && !self.try_evict(inner, privileged, requested.len(), now) {
            // Cache full and nothing to give way: served sessionless, as Kafka does.
            return Plan { session_id: 0, incremental: false, partitions: requested };
        }
        let id = loop {
            let id = rand::random::<i32>() & i32::MAX;
            if id != 0 && !inner.sessions.contains_key(&id) {
                break id;
            }
        };
        let partitions = requested.iter().map(|(k, w)| (k.clone(), (w.clone(), None))).collect();
        inner.sessions.insert(id, Session { next_epoch: 1, partitions, last_used: now, created: now, privileged });
        assert!(inner.sessions.len() <= self.max_sessions, "the cache holds at most its slots");
        Plan { session_id: id, incremental: false, partitions: requested }
    }

    /// Kafka's `tryEvict` for a new session of `size` partitions (see the module notes).
    fn try_evict(&self, inner: &mut Inner, privileged: bool, size: usize, now: Instant) -> bool {
        let old = |at: Instant| now.duration_since(at) > self.idle_eviction;
        let lru = inner.sessions.iter().min_by_key(|(id, s)| (s.last_used, **id)).map(|(id, s)| (*id, s.last_used));
        if let Some((id, _)) = lru.filter(|(_, last_used)| old(*last_used)) {
            inner.sessions.remove(&id);
            return true;
        }
        let smallest = inner
            .sessions
            .iter()
            .filter(|(_, s)| old(s.created) || (privileged && !s.privileged))
            .map(|(id, s)| (s.privileged, s.partitions.len(), *id))
            .min();
        match smallest {
            Some((other_privileged, other_size, id)) if (privileged, size) > (other_privileged, other_size) => {
                inner.sessions.remove(&id);
                true
            }
            _ => false,
        }
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
        let full = cache.plan(0, 0, vec![(key(0), want(0)), (key(1), want(0))], vec![], false).unwrap();
        assert!(full.session_id > 0 && !full.incremental);
        let id = full.session_id;
        let shown =
            cache.record_sent(id, &[(key(0), LastSent::default(), false), (key(1), LastSent::default(), false)]);
        assert_eq!(shown, vec![true, true]);
        // Incremental: only partition 1's offset changes, partition 0 is still fetched.
        let inc = cache.plan(id, 1, vec![(key(1), want(5))], vec![], false).unwrap();
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
        assert_eq!(cache.plan(id, 1, vec![], vec![], false).unwrap_err(), ResponseError::InvalidFetchSessionEpoch);
        assert_eq!(
            cache.plan(id.wrapping_add(100) & i32::MAX, 1, vec![], vec![], false).unwrap_err(),
            ResponseError::FetchSessionIdNotFound
        );
        // Forgetting a partition removes it from the session.
        let inc = cache.plan(id, 2, vec![], vec![key(0)], false).unwrap();
        assert_eq!(inc.partitions.len(), 1);
        // Closing the session.
        let closed = cache.plan(id, FINAL_EPOCH, vec![(key(0), want(0))], vec![], false).unwrap();
        assert_eq!(closed.session_id, 0);
        assert_eq!(cache.plan(id, 3, vec![], vec![], false).unwrap_err(), ResponseError::FetchSessionIdNotFound);
    }

    #[test]
    fn full_cache_serves_sessionless() {
        let cache = FetchSessions::new(1, Duration::from_secs(60));
        assert!(cache.plan(0, 0, vec![], vec![], false).unwrap().session_id > 0);
        assert_eq!(cache.plan(0, 0, vec![], vec![], false).unwrap().session_id, 0);
    }

    fn new_session(cache: &FetchSessions, partitions: i32, privileged: bool) -> i32 {
        let requested = (0..partitions).map(|p| (key(p), want(0))).collect();
        cache.plan(0, INITIAL_EPOCH, requested, vec![], privileged).unwrap().session_id
    }

    fn live(cache: &FetchSessions, id: i32) -> bool {
        cache.inner.lock().unwrap().sessions.contains_key(&id)
    }

    #[test]
    fn a_full_cache_gives_way_as_kafkas_does() {
        // Recent sessions: a consumer's gives way to a follower's, never to another consumer's,
        // and a follower's only to a bigger follower's once older than the eviction time.
        let cache = FetchSessions::new(2, Duration::from_millis(200));
        let consumer = new_session(&cache, 5, false);
        let follower = new_session(&cache, 1, true);
        assert_eq!(new_session(&cache, 50, false), 0, "a consumer evicts no recent session");
        let second_follower = new_session(&cache, 1, true);
        assert!(second_follower > 0 && !live(&cache, consumer), "a follower's takes a consumer's place");
        assert_eq!(new_session(&cache, 1, true), 0, "recent followers' sessions stay");
        assert!(live(&cache, follower) && live(&cache, second_follower));
        // Past the eviction time (created long ago, but used lately): the smaller one gives way
        // to a bigger one; an idle one to anyone.
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(cache.plan(follower, 1, vec![], vec![], true).unwrap().session_id, follower); // used now
        assert_eq!(cache.plan(second_follower, 1, vec![], vec![], true).unwrap().session_id, second_follower);
        assert_eq!(new_session(&cache, 1, true), 0, "not bigger than the smallest");
        let bigger = new_session(&cache, 3, true);
        assert!(bigger > 0 && live(&cache, bigger));
        assert_eq!([follower, second_follower].iter().filter(|id| live(&cache, **id)).count(), 1);
        std::thread::sleep(Duration::from_millis(250));
        assert!(new_session(&cache, 0, false) > 0, "an idle session makes room for anyone");
    }

    #[test]
    fn session_ids_are_random_positive_and_unique() {
        let cache = FetchSessions::new(1000, Duration::from_secs(60));
        let ids: std::collections::HashSet<i32> = (0..1000).map(|_| new_session(&cache, 1, false)).collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids.iter().all(|id| *id > 0));
        let mut sorted: Vec<i32> = ids.into_iter().collect();
        sorted.sort();
        assert!(sorted[999] - sorted[0] > 1_000_000, "not handed out in sequence");
    }
}
