//! Connection limits, as Kafka's `ConnectionQuotas` and its acceptor apply them to every new
//! connection of a broker listener, in Kafka's order:
//!
//! 1. Creation rate: the connection counts in the broker-wide rate (`max.connection.creation.rate`,
//!    not on the protected inter-broker listener) and its listener's
//!    (`listener.name.<l>.max.connection.creation.rate`); over either, the acceptor pauses for the
//!    throttle time Kafka computes (at most one quota window), holding back later connections.
//! 2. A slot: the acceptor waits while its listener has `listener.name.<l>.max.connections`
//!    connections, or the broker `max.connections` (the inter-broker listener may go past the
//!    broker-wide limit: the least recently active connection of another listener is closed
//!    instead, once there are several listeners).
//! 3. The IP `connection_creation_rate` quota (`kafka-configs --entity-type ips`): a connection
//!    over it is taken back from every rate, held open for its throttle time and then closed.
//! 4. `max.connections.per.ip` (or its `max.connections.per.ip.overrides` entry): a connection
//!    beyond it is closed at once.
//!
//! Limits are read from the broker config in force at each new connection, so `kafka-configs
//! --alter` on them takes effect for the next one (a waiting acceptor looks again every
//! `RECHECK`). `connections.max.idle.ms` (static, as in Kafka) is the connection's own
//! business (`connection.rs`), with its [`Slot`] recording activity.
//!
//! Invariants: a [`Slot`] exists for each counted connection and uncounts it when dropped, so the
//! counts are exactly the open connections; rates are kept for at most `MAX_IP_RATES` addresses
//! (idle ones dropped first); nothing here blocks a thread: waits are async.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::config::Properties;
use crate::dynconf::defs::parse_ip_overrides as parse_overrides;
use crate::quota::rate::{Rate, Window};

/// Per-address creation rates kept at most.
const MAX_IP_RATES: usize = 10_000;

/// A waiting acceptor looks at the limits again this often (a config change does not wake it).
const RECHECK: Duration = Duration::from_millis(500);

/// Kafka's "no limit" (`Int.MaxValue`), the default of every count and rate here.
const UNLIMITED: i64 = i32::MAX as i64;

/// The limits in force for a new connection on one listener, from the broker config.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub max_connections: i64,
    pub listener_max_connections: i64,
    pub max_per_ip: i64,
    pub per_ip_overrides: Overrides,
    pub creation_rate: i64,
    pub listener_creation_rate: i64,
}

impl Settings {
    /// Reads the limits of `listener` (Kafka's prefix `listener.name.<lower-case name>.`), with
    /// `overrides` the parsed `max.connections.per.ip.overrides`. Values that do not parse count
    /// as no limit; `check` refuses them before they get here.
    fn of(props: &Properties, listener: &str, overrides: Overrides) -> Settings {
        let int = |key: &str| props.get(key).and_then(|v| v.trim().parse::<i64>().ok());
        Settings {
            max_connections: int("max.connections").unwrap_or(UNLIMITED),
            listener_max_connections: int(&crate::config::listener_key(listener, "max.connections"))
                .unwrap_or(UNLIMITED),
            max_per_ip: int("max.connections.per.ip").unwrap_or(UNLIMITED),
            per_ip_overrides: overrides,
            creation_rate: int("max.connection.creation.rate").unwrap_or(UNLIMITED),
            listener_creation_rate: int(&crate::config::listener_key(listener, "max.connection.creation.rate"))
                .unwrap_or(UNLIMITED),
        }
    }

    fn max_for(&self, ip: IpAddr) -> i64 {
        self.per_ip_overrides.iter().find(|(a, _)| *a == ip).map_or(self.max_per_ip, |(_, n)| *n)
    }
}

/// Parsed `max.connections.per.ip.overrides`: (address, most connections).
type Overrides = Arc<Vec<(IpAddr, i64)>>;

/// What becomes of a new connection.
pub enum Admission {
    /// Counted: serve it; the slot uncounts it when dropped.
    Accepted(Slot),
    /// Over its address's connection count: close it now.
    Refused { max: i64 },
    /// Over its address's creation rate: hold it open this long, then close it.
    Throttled(Duration),
}

/// The connections one broker's listeners have open, and the rates new ones came in at.
pub struct ConnectionLimits {
    state: Mutex<State>,
    /// Woken whenever a connection closes (a slot may be free).
    freed: Notify,
    window: Window,
    /// The inter-broker listener, protected from the broker-wide limits when there are several.
    protected: Option<Arc<str>>,
    /// `max.connections.per.ip.overrides` as last parsed (host names are resolved once per
    /// value, not per connection).
    overrides: Mutex<(String, Overrides)>,
}

struct State {
    total: i64,
    per_ip: HashMap<IpAddr, i64>,
    per_listener: HashMap<Arc<str>, i64>,
    broker_rate: Rate,
    listener_rates: HashMap<Arc<str>, Rate>,
    ip_rates: HashMap<IpAddr, Rate>,
    open: HashMap<u64, Open>,
    next_id: u64,
}

/// What the limits know of an open connection: enough to close the least recently active one.
struct Open {
    listener: Arc<str>,
    activity: Arc<Activity>,
}

/// A connection's last activity (ms since the Unix epoch) and its close signal.
pub struct Activity {
    last_ms: AtomicU64,
    close: Notify,
}

/// One counted connection. Dropping it uncounts the connection and wakes waiting acceptors.
pub struct Slot {
    limits: Arc<ConnectionLimits>,
    id: u64,
    ip: IpAddr,
    listener: Arc<str>,
    activity: Arc<Activity>,
}

impl Slot {
    /// Marks the connection active now (a frame read or a response written).
    pub fn touch(&self) {
        self.activity.last_ms.store(crate::log::now_ms() as u64, Ordering::Relaxed);
    }

    /// Resolves when the broker closes this connection to make room (`max.connections` reached
    /// by the inter-broker listener).
    pub async fn evicted(&self) {
        self.activity.close.notified().await
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = self.limits.lock();
        state.open.remove(&self.id);
        state.total -= 1;
        if let Some(n) = state.per_listener.get_mut(&self.listener) {
            *n -= 1;
        }
        if let Some(n) = state.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n <= 0 {
                state.per_ip.remove(&self.ip);
            }
        }
        debug_assert!(state.total >= 0, "a connection uncounted twice");
        drop(state);
        self.limits.freed.notify_waiters();
    }
}

impl ConnectionLimits {
    /// Limits for the broker listeners `listeners`, of which `inter_broker` is protected from
    /// the broker-wide limits when there are several; rates over `window`.
    pub fn new(listeners: &[Arc<str>], inter_broker: &str, window: Window) -> Arc<ConnectionLimits> {
        let now = crate::log::now_ms() as u64;
        let protected = listeners.iter().find(|l| &***l == inter_broker).filter(|_| listeners.len() > 1).cloned();
        Arc::new(ConnectionLimits {
            state: Mutex::new(State {
                total: 0,
                per_ip: HashMap::new(),
                per_listener: listeners.iter().map(|l| (l.clone(), 0)).collect(),
                broker_rate: Rate::new(window, now),
                listener_rates: listeners.iter().map(|l| (l.clone(), Rate::new(window, now))).collect(),
                ip_rates: HashMap::new(),
                open: HashMap::new(),
                next_id: 0,
            }),
            freed: Notify::new(),
            window,
            protected,
            overrides: Mutex::new((String::new(), Arc::new(Vec::new()))),
        })
    }

    /// The limits of a new connection on `listener` under the broker config `props`.
    pub fn settings(&self, props: &Properties, listener: &str) -> Settings {
        let text = props.get("max.connections.per.ip.overrides").map_or("", String::as_str);
        let overrides = {
            let mut cached = self.overrides.lock().unwrap_or_else(|p| p.into_inner());
            if cached.0 != text {
                let parsed = parse_overrides(text).unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "ignoring max.connections.per.ip.overrides");
                    Vec::new()
                });
                *cached = (text.to_string(), Arc::new(parsed));
            }
            cached.1.clone()
        };
        Settings::of(props, listener, overrides)
    }

    /// Admits a new connection from `ip` on `listener` under `settings` (read again while
    /// waiting, through `settings_now`) and the IP creation-rate quota `ip_rate` (None: none).
    /// Waits as Kafka's acceptor waits: for the creation-rate throttle, then for a slot.
    pub async fn admit(
        self: &Arc<Self>,
        listener: &Arc<str>,
        ip: IpAddr,
        settings_now: impl Fn() -> Settings,
        ip_rate: Option<f64>,
    ) -> Admission {
        let ip = ip.to_canonical();
        let protected = self.protected.as_ref() == Some(listener);
        let mut settings = settings_now();
        let throttle_ms = {
            let now = crate::log::now_ms() as u64;
            let mut state = self.lock();
            let mut throttle_ms = 0;
            if !protected {
                state.broker_rate.record(1.0, now);
                throttle_ms = self.bounded(state.broker_rate.throttle_ms(settings.creation_rate as f64, now));
            }
            if let Some(rate) = state.listener_rates.get_mut(listener) {
                rate.record(1.0, now);
                throttle_ms =
                    throttle_ms.max(self.bounded(rate.throttle_ms(settings.listener_creation_rate as f64, now)));
            }
            throttle_ms
        };
        if throttle_ms > 0 {
            tracing::debug!(%listener, throttle_ms, "connection creation rate over its limit: accepting later");
            tokio::time::sleep(Duration::from_millis(throttle_ms)).await;
        }
        loop {
            let freed = self.freed.notified();
            {
                let state = self.lock();
                if self.slot_available(&state, listener, protected, &settings) {
                    break;
                }
            }
            let _ = tokio::time::timeout(RECHECK, freed).await;
            settings = settings_now();
        }
        let mut state = self.lock();
        let now = crate::log::now_ms() as u64;
        if let Some(bound) = ip_rate {
            if !state.ip_rates.contains_key(&ip) && state.ip_rates.len() >= MAX_IP_RATES {
                let idle_ms = self.window.samples as u64 * self.window.window_ms;
                state.ip_rates.retain(|_, r| now.saturating_sub(r.last_event_ms()) < idle_ms);
            }
            if state.ip_rates.contains_key(&ip) || state.ip_rates.len() < MAX_IP_RATES {
                let rate = state.ip_rates.entry(ip).or_insert_with(|| Rate::new(self.window, now));
                rate.record(1.0, now);
                let throttle_ms = self.bounded(rate.throttle_ms(bound, now));
                if throttle_ms > 0 {
                    // Not accepted: taken back from every rate it was counted in.
                    rate.unrecord(1.0, now);
                    if !protected {
                        state.broker_rate.unrecord(1.0, now);
                    }
                    if let Some(rate) = state.listener_rates.get_mut(listener) {
                        rate.unrecord(1.0, now);
                    }
                    return Admission::Throttled(Duration::from_millis(throttle_ms));
                }
            }
        }
        let max = settings.max_for(ip);
        let from_ip = state.per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= max {
            return Admission::Refused { max };
        }
        state.next_id += 1;
        let id = state.next_id;
        let activity = Arc::new(Activity { last_ms: AtomicU64::new(now), close: Notify::new() });
        state.total += 1;
        *state.per_ip.entry(ip).or_insert(0) += 1;
        if let Some(n) = state.per_listener.get_mut(listener) {
            *n += 1;
        }
        state.open.insert(id, Open { listener: listener.clone(), activity: activity.clone() });
        if protected {
            self.close_excess(&state, &settings);
        }
        drop(state);
        Admission::Accepted(Slot { limits: self.clone(), id, ip, listener: listener.clone(), activity })
    }

    /// Kafka's `connectionSlotAvailable`.
    fn slot_available(&self, state: &State, listener: &Arc<str>, protected: bool, settings: &Settings) -> bool {
        let on_listener = state.per_listener.get(listener).copied().unwrap_or(0);
        if on_listener >= settings.listener_max_connections {
            return false;
        }
        protected || state.total < settings.max_connections
    }

    /// Over the broker-wide limit (only the protected listener gets there): asks the least
    /// recently active connections of the other listeners to close, one per connection over.
    fn close_excess(&self, state: &State, settings: &Settings) {
        let over = state.total - settings.max_connections;
        if over <= 0 {
            return;
        }
        let mut others: Vec<&Open> =
            state.open.values().filter(|o| Some(&o.listener) != self.protected.as_ref()).collect();
        others.sort_by_key(|o| o.activity.last_ms.load(Ordering::Relaxed));
        for open in others.into_iter().take(over as usize) {
            tracing::info!(listener = %open.listener, "closing the least recently active connection: max.connections reached");
            open.activity.close.notify_one();
        }
    }

    /// Kafka caps a connection throttle at one quota window (`quota.window.size.seconds`).
    fn bounded(&self, throttle_ms: u64) -> u64 {
        throttle_ms.min(self.window.window_ms)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Connections counted now (tests).
    #[cfg(test)]
    fn total(&self) -> i64 {
        self.lock().total
    }
}

#[cfg(test)]
#[path = "limits_tests.rs"]
mod tests;
