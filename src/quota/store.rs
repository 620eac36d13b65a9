//! The client quotas in force on this node and the byte-rate throttling they ask for (Kafka's
//! `ClientQuotaManager` for `producer_byte_rate` and `consumer_byte_rate`, its
//! `ClientRequestQuotaManager` for `request_percentage`).
//!
//! On disk (a single node): `<first log dir>/.ketch/quotas.records`: one Kafka
//! `ClientQuotaRecord` per (entity, key) set, in the file format of `security::records_file`,
//! replaced atomically on every change and read at start. In a cluster the quotas are cluster
//! metadata, as in Kafka's KRaft mode: a broker reads them from its metadata image
//! (`read_from_image`) and alterations go to the controller.
//!
//! Throttling: each request's bytes (for `request_percentage`, its handling time) are counted
//! in a rate (`rate.rs`) per quota type and per Kafka's metric tags, the (user, client-id) pair
//! the most specific configured quota entity names (`tags`), so clients sharing a quota share
//! its rate; a rate over the entity's limit asks for Kafka's throttle time. Invariants: without any quota nothing is counted (one read of the
//! quota map); at most `MAX_SENSORS` rates are kept, idle ones dropped first.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use super::entity::{self, Alteration, Change, Entity, Quotas, CLIENT_ID, USER};
use super::mutation::{MutationBuckets, MutationQuota};
use super::rate::{Rate, Window};
use crate::metadata::image::MetadataImage;
use crate::metadata::records::{ClientQuotaRecord, EntityData, MetadataRecord};
use crate::security::records_file;

/// Rates kept at most (one per quota type and active (user, client-id) tags).
const MAX_SENSORS: usize = 100_000;

/// Kafka's error codes of a refused alteration.
pub const INVALID_REQUEST: i16 = 42;
pub const KAFKA_STORAGE_ERROR: i16 = 56;

/// One entity's outcome: Ok, or (error code, message).
pub type Outcome = (Entity, Result<(), (i16, String)>);

/// A cluster broker's current metadata image (None before it has one: no quotas then).
pub type ImageSource = Box<dyn Fn() -> Option<Arc<MetadataImage>> + Send + Sync>;

/// The byte-rate quotas Ketch enforces.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Kind {
    /// `producer_byte_rate`: Produce request bytes.
    Produce,
    /// `consumer_byte_rate`: Fetch response bytes (consumers; followers are not throttled).
    Fetch,
    /// `request_percentage`: the time handling a client's requests took, in percent of one
    /// thread per second (Kafka's request quota, KIP-124).
    Request,
    /// `controller_mutation_rate`: partitions created or deleted per second (`mutation.rs`).
    Mutation,
}

impl Kind {
    pub fn key(self) -> &'static str {
        match self {
            Kind::Produce => entity::PRODUCER_BYTE_RATE,
            Kind::Fetch => entity::CONSUMER_BYTE_RATE,
            Kind::Request => entity::REQUEST_PERCENTAGE,
            Kind::Mutation => entity::CONTROLLER_MUTATION_RATE,
        }
    }
}

/// Who a request comes from, as quotas see it: the principal's name (`alice` for
/// `User:alice`, `ANONYMOUS` without authentication) and the request's client id.
pub struct Client<'a> {
    pub user: &'a str,
    pub client_id: &'a str,
}

impl<'a> Client<'a> {
    /// From a principal (`User:alice`: `alice`) and a request's client id.
    pub fn of(principal: &'a str, client_id: Option<&'a str>) -> Client<'a> {
        Client { user: principal.strip_prefix("User:").unwrap_or(principal), client_id: client_id.unwrap_or("") }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) struct SensorKey {
    kind: Kind,
    user: String,
    client_id: String,
}

pub struct QuotaStore {
    path: PathBuf,
    quotas: RwLock<Arc<Quotas>>,
    /// Set on a broker of a cluster: quotas come from the metadata image, not the file.
    image: OnceLock<ImageSource>,
    window: Window,
    sensors: Mutex<HashMap<SensorKey, Rate>>,
    /// `controller_mutation_rate` buckets (a single node decides its topics itself).
    mutations: MutationBuckets,
}

impl QuotaStore {
    pub fn open(metadata_dir: &Path, window: Window) -> anyhow::Result<QuotaStore> {
        let path = metadata_dir.join(".ketch").join("quotas.records");
        let mut quotas = Quotas::new();
        match std::fs::read(&path) {
            Ok(bytes) => records_file::read(&bytes, |record| match record {
                MetadataRecord::ClientQuota(r) => {
                    entity::apply(&mut quotas, [change_of(&r)]);
                    Ok(())
                }
                _ => Err("not a ClientQuotaRecord".into()),
            })
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        Ok(QuotaStore {
            path,
            quotas: RwLock::new(Arc::new(quotas)),
            image: OnceLock::new(),
            window,
            sensors: Mutex::new(HashMap::new()),
            mutations: MutationBuckets::new(window),
        })
    }

    /// The controller mutation quota's window (`controller.quota.window.*`; by default the
    /// client quotas' defaults).
    pub fn with_mutation_window(mut self, window: Window) -> QuotaStore {
        self.mutations = MutationBuckets::new(window);
        self
    }

    /// From now on quotas are read from the metadata image `source` gives (a broker of a
    /// cluster, as Kafka's brokers read `ClientQuotasImage`). Set once; later calls are ignored.
    pub fn read_from_image(&self, source: ImageSource) {
        let _ = self.image.set(source);
    }

    /// Calls `f` with the quotas in force: the image's on a cluster broker, the file's otherwise.
    pub fn with_quotas<R>(&self, f: impl FnOnce(&Quotas) -> R) -> R {
        match self.image.get() {
            Some(source) => match source() {
                Some(image) => f(&image.quotas),
                None => f(&Quotas::new()),
            },
            None => {
                let quotas = self.quotas.read().unwrap_or_else(|p| p.into_inner()).clone();
                f(&quotas)
            }
        }
    }

    /// The quotas as ClientQuotaRecords (carried into a controller's metadata log).
    pub fn records(&self) -> Vec<MetadataRecord> {
        let quotas = self.quotas.read().unwrap_or_else(|p| p.into_inner()).clone();
        records_of(all_changes(&quotas))
    }

    /// AlterClientQuotas on a single node: decided as Kafka's controller decides (`entity`),
    /// stored durably before it is answered. Each entity's outcome, in request order: refusals
    /// are INVALID_REQUEST; a failed write fails every entity that had changes with
    /// KAFKA_STORAGE_ERROR.
    pub fn alter(&self, alterations: &[Alteration], validate_only: bool) -> Vec<Outcome> {
        let mut guard = self.quotas.write().unwrap_or_else(|p| p.into_inner());
        let decision = entity::decide(&guard, alterations);
        if validate_only || decision.changes.is_empty() {
            return outcomes_of(&decision);
        }
        let mut next = (**guard).clone();
        entity::apply(&mut next, decision.changes.clone());
        if let Err(e) = records_file::write(&self.path, records_of(all_changes(&next))) {
            tracing::error!(error = %e, path = %self.path.display(), "storing client quotas");
            let changed = |e: &Entity| decision.changes.iter().any(|c| &c.entity == e);
            let failed = (KAFKA_STORAGE_ERROR, format!("storing client quotas: {e}"));
            return outcomes_of(&decision)
                .into_iter()
                .map(|(e, o)| if changed(&e) { (e, Err(failed.clone())) } else { (e, o) })
                .collect();
        }
        *guard = Arc::new(next);
        outcomes_of(&decision)
    }

    /// The quota of `kind` that applies to `client` (its rate and limit), None without one: the
    /// one lookup of the quotas a request makes.
    pub fn limit_for(&self, kind: Kind, client: &Client) -> Option<Limit> {
        self.with_quotas(|q| limit_of(q, kind, client))
    }

    /// `limit_for` of several kinds, with one lookup of the quotas.
    pub fn limits_for<const N: usize>(&self, kinds: [Kind; N], client: &Client) -> [Option<Limit>; N] {
        self.with_quotas(|q| kinds.map(|kind| limit_of(q, kind, client)))
    }

    /// The `connection_creation_rate` quota of connections from `ip`: its own entity's, else the
    /// default IP entity's, None without one (Kafka's `ConnectionQuotas.connectionRateForIp`).
    /// Entity names are compared as addresses (`::1` and `0:0:0:0:0:0:0:1` are the same).
    pub fn ip_connection_rate(&self, ip: std::net::IpAddr) -> Option<f64> {
        self.with_quotas(|quotas| {
            let mut default = None;
            for (entity, values) in quotas {
                let (Some(name), Some(rate)) = (entity.get(entity::IP), values.get(entity::CONNECTION_CREATION_RATE))
                else {
                    continue;
                };
                match name {
                    Some(n) if n.parse::<std::net::IpAddr>().is_ok_and(|a| a.to_canonical() == ip) => {
                        return Some(*rate)
                    }
                    Some(_) => {}
                    None => default = Some(*rate),
                }
            }
            default
        })
    }

    /// The controller mutation quota of one CreateTopics / CreatePartitions / DeleteTopics of
    /// `client` (strict from the versions that know THROTTLING_QUOTA_EXCEEDED).
    pub fn mutation_quota(&self, client: &Client, strict: bool) -> MutationQuota<'_> {
        self.with_quotas(|q| self.mutations.quota_for(q, client, strict))
    }

    /// `quota.window.num` and `quota.window.size.seconds`.
    pub fn window(&self) -> Window {
        self.window
    }

    /// Counts `bytes` against `limit`'s rate at `now_ms` and returns the throttle time it asks
    /// for (0 within the quota).
    pub fn record(&self, limit: &Limit, bytes: usize, now_ms: u64) -> u64 {
        self.record_value(limit, bytes as f64, now_ms)
    }

    /// Counts `value` (bytes, or for a request quota percent of a thread's second) against
    /// `limit`'s rate at `now_ms` and returns the throttle time it asks for. A request quota's
    /// throttle is at most one window (`quota.window.size.seconds`), as Kafka's
    /// `ClientRequestQuotaManager` bounds it.
    pub fn record_value(&self, limit: &Limit, value: f64, now_ms: u64) -> u64 {
        let mut sensors = self.sensors.lock().unwrap_or_else(|p| p.into_inner());
        if !sensors.contains_key(&limit.key) && sensors.len() >= MAX_SENSORS {
            let idle_ms = self.window.samples as u64 * self.window.window_ms;
            sensors.retain(|_, r| now_ms.saturating_sub(r.last_event_ms()) < idle_ms);
            if sensors.len() >= MAX_SENSORS {
                return 0;
            }
        }
        let rate = sensors.entry(limit.key.clone()).or_insert_with(|| Rate::new(self.window, now_ms));
        rate.record(value, now_ms);
        let throttle_ms = rate.throttle_ms(limit.bound, now_ms);
        match limit.key.kind {
            Kind::Request => throttle_ms.min(self.window.window_ms),
            Kind::Produce | Kind::Fetch | Kind::Mutation => throttle_ms,
        }
    }

    /// Takes back bytes `record` counted (a throttled fetch answered empty).
    pub fn unrecord(&self, limit: &Limit, bytes: usize, now_ms: u64) {
        let mut sensors = self.sensors.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rate) = sensors.get_mut(&limit.key) {
            rate.unrecord(bytes as f64, now_ms);
        }
    }

    /// The most bytes one response may carry under `limit` (Kafka caps a fetch at the quota's
    /// bytes over the window, `getMaxValueInQuotaWindow`).
    pub fn max_bytes_in_window(&self, limit: &Limit) -> u64 {
        let window_s = (self.window.samples as f64 - 1.0) * self.window.window_ms as f64 / 1000.0;
        (limit.bound * window_s).min(u64::MAX as f64) as u64
    }
}

/// The quota one client's requests of one kind are held to: the rate it shares (Kafka's sensor,
/// by metric tags) and its bound in bytes per second.
#[derive(Clone, Debug)]
pub struct Limit {
    pub(super) key: SensorKey,
    pub(super) bound: f64,
}

/// Each entity's outcome of a decision: refusals are INVALID_REQUEST.
pub fn outcomes_of(decision: &entity::Decision) -> Vec<Outcome> {
    let invalid = |m: &String| (INVALID_REQUEST, m.clone());
    decision.outcomes.iter().map(|(e, o)| (e.clone(), o.as_ref().map(|_| ()).map_err(invalid))).collect()
}

/// Every stored value as a change that sets it.
fn all_changes(quotas: &Quotas) -> impl Iterator<Item = Change> + '_ {
    quotas.iter().flat_map(|(e, values)| {
        values.iter().map(|(k, v)| Change { entity: e.clone(), key: k.clone(), value: Some(*v) })
    })
}

/// The sensor and the limit of `client`'s quota of `kind`, None without one.
pub(super) fn limit_of(quotas: &Quotas, kind: Kind, client: &Client) -> Option<Limit> {
    if quotas.is_empty() {
        return None;
    }
    let (user, client_id) = tags(quotas, kind.key(), client.user, client.client_id);
    let bound = limit(quotas, kind.key(), &user, &client_id)?;
    Some(Limit { key: SensorKey { kind, user, client_id }, bound })
}

fn entity_of(user: Option<Option<&str>>, client_id: Option<Option<&str>>) -> Entity {
    let mut e = Entity::new();
    if let Some(u) = user {
        e.insert(USER.into(), u.map(str::to_string));
    }
    if let Some(c) = client_id {
        e.insert(CLIENT_ID.into(), c.map(str::to_string));
    }
    e
}

fn has(quotas: &Quotas, key: &str, e: Entity) -> bool {
    quotas.get(&e).is_some_and(|values| values.contains_key(key))
}

/// Kafka's metric tags for a (user, client-id) (`DefaultQuotaCallback.quotaMetricTags`): the
/// most specific of the eight entity levels that has a quota of this type decides whether the
/// rate is shared per user, per client id or per both.
fn tags(quotas: &Quotas, key: &str, user: &str, client_id: &str) -> (String, String) {
    let (u, c) = (Some(Some(user)), Some(Some(client_id)));
    let (du, dc) = (Some(None), Some(None));
    let both = (user.to_string(), client_id.to_string());
    let user_only = (user.to_string(), String::new());
    if has(quotas, key, entity_of(u, c)) || has(quotas, key, entity_of(u, dc)) {
        return both;
    }
    if has(quotas, key, entity_of(u, None)) {
        return user_only;
    }
    if has(quotas, key, entity_of(du, c)) || has(quotas, key, entity_of(du, dc)) {
        return both;
    }
    if has(quotas, key, entity_of(du, None)) {
        return user_only;
    }
    (String::new(), client_id.to_string())
}

/// The quota for metric tags (`DefaultQuotaCallback.quotaLimit`), None: unlimited.
fn limit(quotas: &Quotas, key: &str, user: &str, client_id: &str) -> Option<f64> {
    let get = |e: Entity| quotas.get(&e).and_then(|values| values.get(key)).copied();
    let (u, c, d) = (Some(Some(user)), Some(Some(client_id)), Some(None));
    match (user.is_empty(), client_id.is_empty()) {
        (false, false) => get(entity_of(u, c))
            .or_else(|| get(entity_of(u, d)))
            .or_else(|| get(entity_of(d, c)))
            .or_else(|| get(entity_of(d, d))),
        (false, true) => get(entity_of(u, None)).or_else(|| get(entity_of(d, None))),
        (true, false) => get(entity_of(None, c)).or_else(|| get(entity_of(None, d))),
        (true, true) => None,
    }
}

/// A ClientQuotaRecord as a change.
pub fn change_of(r: &ClientQuotaRecord) -> Change {
    let entity = r.entity.iter().map(|e| (e.entity_type.clone(), e.entity_name.clone())).collect();
    Change { entity, key: r.key.clone(), value: (!r.remove).then_some(r.value) }
}

/// Changes as ClientQuotaRecords.
pub fn records_of(changes: impl IntoIterator<Item = Change>) -> Vec<MetadataRecord> {
    changes
        .into_iter()
        .map(|c| {
            let entity = c
                .entity
                .iter()
                .map(|(t, n)| EntityData { entity_type: t.clone(), entity_name: n.clone(), ..Default::default() })
                .collect();
            MetadataRecord::ClientQuota(ClientQuotaRecord {
                entity,
                key: c.key,
                value: c.value.unwrap_or(0.0),
                remove: c.value.is_none(),
                ..Default::default()
            })
        })
        .collect()
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
