//! The bound on requests read from clients and not yet taken up, across every connection of a
//! node's listeners: Kafka's request queue (`queued.max.requests`, 500) and its memory pool
//! (`queued.max.request.bytes`, -1: none).
//!
//! Kafka's network threads put each complete request on one queue of `queued.max.requests`
//! places and block, reading from no socket, while it is full; a request's buffer is taken from
//! a pool of `queued.max.request.bytes` when its length has been read (a pool out of memory mutes
//! every channel) and given back once the request has been handled. Here a connection reads its
//! own frames (`connection.rs`), so the same bounds are waits in that read:
//!
//! - [`RequestQueue::bytes`] is asked for a frame's length as soon as the length prefix has come,
//!   before any of its body is read, and waits while the pool is used up. As Kafka's non-strict
//!   pool, a frame is let in whenever some memory is left, even if it takes the pool below zero,
//!   so a frame never waits for a pool that can never hold it (Kafka also requires the pool to
//!   be at least `socket.request.max.bytes`, see `config.rs`). The [`Lease`] is given back when
//!   the request is taken up for handling, or for a produce request once it has been appended.
//! - [`RequestQueue::place`] is asked once a frame is whole, and waits while `queued.max.requests`
//!   frames are read and waiting for their connection to take them up. The [`Place`] is given
//!   back when the connection takes the frame up.
//!
//! What a request waits for once taken up (a long-poll fetch, a join waiting for its group) holds
//! neither, as Kafka's purgatories hold no queue place: only frames read ahead of their turn and
//! being read do. Invariants: the places and bytes counted are exactly those of live `Place`s and
//! `Lease`s (given back when dropped, whichever way a connection ends); a waiter is woken by
//! every give-back, so none waits while what it needs is free.

use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// Kafka's `queued.max.requests` default.
pub const QUEUED_MAX_REQUESTS: usize = 500;

/// The request queue's bounds, from `queued.max.requests` and `queued.max.request.bytes`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    pub max_requests: usize,
    /// `None`: no memory pool (Kafka's -1, and any value <= 0).
    pub max_bytes: Option<usize>,
}

impl Bounds {
    /// From the broker config (checked there, as Kafka checks them).
    pub fn of(config: &crate::config::BrokerConfig) -> Bounds {
        Bounds { max_requests: config.queued_max_requests, max_bytes: config.queued_max_request_bytes }
    }
}

/// One node's request queue, shared by the connections of all its listeners.
pub struct RequestQueue {
    places: Arc<Semaphore>,
    pool: Option<Arc<Pool>>,
    bounds: Bounds,
}

impl RequestQueue {
    pub fn new(bounds: Bounds) -> Arc<RequestQueue> {
        Arc::new(RequestQueue {
            places: Arc::new(Semaphore::new(bounds.max_requests)),
            pool: bounds.max_bytes.map(|b| Arc::new(Pool { available: Mutex::new(b as i64), freed: Notify::new() })),
            bounds,
        })
    }

    /// No bound worth the name (tests and tools that serve one connection).
    pub fn unbounded() -> Arc<RequestQueue> {
        RequestQueue::new(Bounds { max_requests: Semaphore::MAX_PERMITS, max_bytes: None })
    }

    pub fn bounds(&self) -> Bounds {
        self.bounds
    }

    /// Memory for a frame body of `len` bytes: waits while the pool is used up (never without a
    /// pool). Cancel-safe: a wait given up takes nothing.
    pub async fn bytes(&self, len: usize) -> Lease {
        let Some(pool) = &self.pool else { return Lease(None) };
        let len = len as i64;
        loop {
            let freed = pool.freed.notified();
            tokio::pin!(freed);
            // Registered before looking, so a give-back between the look and the wait wakes it.
            freed.as_mut().enable();
            {
                let mut available = pool.available.lock().unwrap_or_else(|p| p.into_inner());
                if *available > 0 {
                    *available -= len;
                    return Lease(Some((pool.clone(), len)));
                }
            }
            freed.await;
        }
    }

    /// A place for a whole frame waiting to be taken up: waits while all are held.
    pub async fn place(&self) -> Place {
        Place(self.places.clone().acquire_owned().await.expect("the queue's semaphore is never closed"))
    }

    /// Places free now (for tests and metrics).
    pub fn free_places(&self) -> usize {
        self.places.available_permits()
    }

    /// Pool bytes free now (negative when a frame took it below zero); `None` without a pool.
    pub fn free_bytes(&self) -> Option<i64> {
        self.pool.as_ref().map(|p| *p.available.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Kafka's SimpleMemoryPool, non-strict: memory is handed out while any is left.
struct Pool {
    /// Bytes not leased; a lock held for a few instructions, never across an await.
    available: Mutex<i64>,
    freed: Notify,
}

/// A frame's bytes in the pool, given back when dropped.
#[must_use]
pub struct Lease(Option<(Arc<Pool>, i64)>);

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some((pool, len)) = self.0.take() {
            // A poisoned lock held only an integer: its value is still right.
            *pool.available.lock().unwrap_or_else(|p| p.into_inner()) += len;
            pool.freed.notify_waiters();
        }
    }
}

/// A whole frame's place in the queue, given back when dropped.
#[must_use]
pub struct Place(#[allow(dead_code)] OwnedSemaphorePermit);

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn queue(max_requests: usize, max_bytes: Option<usize>) -> Arc<RequestQueue> {
        RequestQueue::new(Bounds { max_requests, max_bytes })
    }

    async fn pending<F: std::future::Future>(f: F) -> bool {
        tokio::time::timeout(Duration::from_millis(50), f).await.is_err()
    }

    #[tokio::test]
    async fn a_used_up_pool_holds_back_frames_until_bytes_come_back() {
        let q = queue(10, Some(1000));
        // Non-strict: a frame larger than what is left still gets in while something is left.
        let a = q.bytes(600).await;
        let b = q.bytes(600).await;
        assert_eq!(q.free_bytes(), Some(-200));
        assert!(pending(q.bytes(1)).await, "an exhausted pool lets nothing in");
        drop(a);
        assert_eq!(q.free_bytes(), Some(400));
        let c = tokio::time::timeout(Duration::from_secs(5), q.bytes(100)).await.expect("room again");
        drop((b, c));
        assert_eq!(q.free_bytes(), Some(1000), "every lease is given back");
    }

    #[tokio::test]
    async fn a_waiter_wakes_when_bytes_come_back() {
        let q = queue(10, Some(100));
        let held = q.bytes(100).await;
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.bytes(50).await }
        });
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!waiter.is_finished());
        drop(held);
        let lease = tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("woken").unwrap();
        assert_eq!(q.free_bytes(), Some(50));
        drop(lease);
    }

    #[tokio::test]
    async fn places_bound_whole_frames_waiting() {
        let q = queue(2, None);
        let a = q.place().await;
        let _b = q.place().await;
        assert!(pending(q.place()).await, "a third frame waits");
        drop(a);
        let _c = tokio::time::timeout(Duration::from_secs(5), q.place()).await.expect("a place came back");
        assert_eq!(q.free_places(), 0);
        assert!(q.bytes(usize::MAX / 2).await.0.is_none(), "no pool: no wait and nothing counted");
    }

    #[test]
    fn bounds_as_kafka_checks_them() {
        let bounds = |pairs: &[(&str, &str)]| {
            let props = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            crate::config::BrokerConfig::from_properties(props).map(|c| Bounds::of(&c))
        };
        assert_eq!(bounds(&[]).unwrap(), Bounds { max_requests: 500, max_bytes: None });
        assert_eq!(bounds(&[("queued.max.request.bytes", "0")]).unwrap().max_bytes, None);
        assert!(bounds(&[("queued.max.requests", "0")]).is_err());
        let small = bounds(&[("queued.max.request.bytes", "1000")]).unwrap_err();
        assert!(small.to_string().contains("must be larger or equal to socket.request.max.bytes"), "{small}");
        let fits = [("queued.max.request.bytes", "2048"), ("socket.request.max.bytes", "2048")];
        assert_eq!(bounds(&fits).unwrap().max_bytes, Some(2048));
    }
}
