//! Metrics: the counters, gauges and histograms the broker keeps, and their rendering in the
//! Prometheus text exposition format 0.0.4 (served by `http.rs` when `ketch.metrics.listener`
//! is set).
//!
//! Owns: the per-API request counters and latency histograms, network byte counters, the
//! connection gauge, the readiness state (starting -> ready -> stopping), and the scrape-time
//! collection of per-partition log figures and consumer-group lag from the attached broker.
//! Invariants: the request hot path only does relaxed atomic adds on fixed arrays (no lock, no
//! allocation); a histogram's `_count` and `+Inf` bucket come from the same snapshot as its
//! other buckets, so buckets are monotone and `+Inf == _count` in every scrape; label values are
//! escaped (group ids are arbitrary client strings); rendering takes the group and partition
//! locks one at a time, never two together, and only on the scrape path.

pub mod http;

use std::fmt::{Display, Write as _};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use kafka_protocol::messages::ApiKey;

use crate::broker::Broker;
use crate::config::Properties;
use crate::error::ConfigError;

/// The config key that turns the endpoint on: `host:port` (empty host = every interface,
/// port 0 = ephemeral). Absent or empty: no endpoint.
pub const LISTENER_KEY: &str = "ketch.metrics.listener";

/// Slots for API keys 0..API_SLOTS (Kafka 4.1's highest key is 92).
const API_SLOTS: usize = 128;

/// Upper bounds of the latency buckets, in nanoseconds, and the same bounds as `le` labels.
const BUCKET_BOUNDS_NS: [u64; 16] = [
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];
const BUCKET_LABELS: [&str; 16] = [
    "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1",
    "2.5", "5", "10",
];
/// Finite buckets plus the overflow (`+Inf`) one.
const BUCKETS: usize = BUCKET_BOUNDS_NS.len() + 1;

/// Parses `ketch.metrics.listener` into (host, port); `None` when the endpoint is off.
pub fn listener_from_properties(props: &Properties) -> Result<Option<(String, u16)>, ConfigError> {
    let Some(value) = props.get(LISTENER_KEY).map(|v| v.trim()) else { return Ok(None) };
    if value.is_empty() {
        return Ok(None);
    }
    let bad = || ConfigError::invalid_because(LISTENER_KEY, value, "expected host:port, e.g. 127.0.0.1:9404");
    let at = value.rfind(':').ok_or_else(bad)?;
    let port = value[at + 1..].parse::<u16>().map_err(|_| bad())?;
    let host = value[..at].trim_start_matches('[').trim_end_matches(']');
    if host.contains(['/', ' ']) {
        return Err(bad());
    }
    Ok(Some((host.to_string(), port)))
}

/// A latency histogram with fixed buckets: one atomic per bucket (not cumulative; cumulated
/// when rendered) and the sum in nanoseconds.
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS],
    sum_ns: AtomicU64,
}

/// A consistent-enough reading of a histogram: `cumulative[i]` counts observations `<=`
/// bound i; the last entry is `+Inf`, which is also the count.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    pub cumulative: [u64; BUCKETS],
    pub sum_seconds: f64,
}

impl HistogramSnapshot {
    pub fn count(&self) -> u64 {
        self.cumulative[BUCKETS - 1]
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { buckets: std::array::from_fn(|_| AtomicU64::new(0)), sum_ns: AtomicU64::new(0) }
    }
}

impl Histogram {
    pub fn observe(&self, elapsed: Duration) {
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let slot = BUCKET_BOUNDS_NS.iter().position(|&bound| ns <= bound).unwrap_or(BUCKETS - 1);
        self.buckets[slot].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = [0u64; BUCKETS];
        let mut running = 0u64;
        for (out, bucket) in cumulative.iter_mut().zip(&self.buckets) {
            running = running.saturating_add(bucket.load(Ordering::Relaxed));
            *out = running;
        }
        HistogramSnapshot { cumulative, sum_seconds: self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9 }
    }
}

/// Counters of one API key.
#[derive(Default)]
struct ApiStats {
    /// Requests received and decoded (counted before handling).
    requests: AtomicU64,
    /// Time from a whole frame received to its response written (or, with no response, to the
    /// handler's end).
    latency: Histogram,
}

/// Where the broker is in its life, for `/ready`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// Recovering logs, groups and transactions: not serving yet.
    Starting,
    /// Listening and serving (the `ketch listening on` line has been printed).
    Ready,
    /// A shutdown signal arrived.
    Stopping,
}

pub struct Metrics {
    started: Instant,
    start_unix_seconds: f64,
    readiness: AtomicU8,
    apis: Box<[ApiStats]>,
    requests_rejected: AtomicU64,
    bytes_received: AtomicU64,
    bytes_sent: AtomicU64,
    connections_active: AtomicI64,
    connections_accepted: AtomicU64,
    /// Set once the broker is open; until then only process and request figures are rendered.
    broker: OnceLock<Arc<Broker>>,
    /// Where the HTTP endpoint listens (set by `http::bind`).
    endpoint: OnceLock<std::net::SocketAddr>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Counts a connection as active until dropped.
pub struct ConnectionGuard(Arc<Metrics>);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.connections_active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Observes a request's latency when dropped (see [`Metrics::request`]).
pub struct RequestTimer {
    metrics: Arc<Metrics>,
    api: ApiKey,
    received_at: Instant,
}

impl Drop for RequestTimer {
    fn drop(&mut self) {
        self.metrics.request_finished(self.api, self.received_at.elapsed());
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let start_unix_seconds =
            SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        Metrics {
            started: Instant::now(),
            start_unix_seconds,
            readiness: AtomicU8::new(0),
            apis: (0..API_SLOTS).map(|_| ApiStats::default()).collect(),
            requests_rejected: AtomicU64::new(0),
            bytes_received: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            connections_active: AtomicI64::new(0),
            connections_accepted: AtomicU64::new(0),
            broker: OnceLock::new(),
            endpoint: OnceLock::new(),
        }
    }

    /// Makes partition and group figures available to scrapes.
    pub fn attach(&self, broker: Arc<Broker>) {
        let _ = self.broker.set(broker);
    }

    pub fn readiness(&self) -> Readiness {
        match self.readiness.load(Ordering::Acquire) {
            0 => Readiness::Starting,
            1 => Readiness::Ready,
            _ => Readiness::Stopping,
        }
    }

    pub fn set_readiness(&self, state: Readiness) {
        let v = match state {
            Readiness::Starting => 0,
            Readiness::Ready => 1,
            Readiness::Stopping => 2,
        };
        self.readiness.store(v, Ordering::Release);
    }

    /// The HTTP endpoint's bound address, if it is on.
    pub fn endpoint(&self) -> Option<std::net::SocketAddr> {
        self.endpoint.get().copied()
    }

    pub(crate) fn set_endpoint(&self, addr: std::net::SocketAddr) {
        let _ = self.endpoint.set(addr);
    }

    pub fn connection_opened(self: &Arc<Self>) -> ConnectionGuard {
        self.connections_accepted.fetch_add(1, Ordering::Relaxed);
        self.connections_active.fetch_add(1, Ordering::Relaxed);
        ConnectionGuard(self.clone())
    }

    pub fn received(&self, bytes: usize) {
        self.bytes_received.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub fn sent(&self, bytes: usize) {
        self.bytes_sent.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// A frame that could not be decoded (bad header, unserved API or version, failed guard).
    pub fn request_rejected(&self) {
        self.requests_rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request of `api` now; its latency from `received_at` is observed when the
    /// returned timer is dropped.
    pub fn request(self: &Arc<Self>, api: ApiKey, received_at: Instant) -> RequestTimer {
        self.request_started(api);
        RequestTimer { metrics: self.clone(), api, received_at }
    }

    pub fn request_started(&self, api: ApiKey) {
        if let Some(stats) = self.apis.get(api as i16 as usize) {
            stats.requests.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn request_finished(&self, api: ApiKey, elapsed: Duration) {
        if let Some(stats) = self.apis.get(api as i16 as usize) {
            stats.latency.observe(elapsed);
        }
    }

    /// The whole exposition (may lock partition logs and the group coordinator one at a time:
    /// call it off the async runtime, e.g. in `spawn_blocking`).
    pub fn render(&self) -> String {
        let mut out = Exposition::default();
        self.render_process(&mut out);
        self.render_requests(&mut out);
        if let Some(broker) = self.broker.get() {
            render_logs(broker, &mut out);
            render_group_lag(broker, &mut out);
        }
        out.text
    }

    fn render_process(&self, out: &mut Exposition) {
        out.family("ketch_uptime_seconds", "gauge", "Seconds since the process started.");
        out.sample("ketch_uptime_seconds", &[], fmt_f64(self.started.elapsed().as_secs_f64()));
        out.family("process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch, seconds.");
        out.sample("process_start_time_seconds", &[], fmt_f64(self.start_unix_seconds));
        out.family(
            "ketch_ready",
            "gauge",
            "1 once recovery finished and the broker serves, 0 before and while stopping.",
        );
        out.sample("ketch_ready", &[], u8::from(self.readiness() == Readiness::Ready));
        out.family("ketch_connections_active", "gauge", "Open client connections.");
        out.sample("ketch_connections_active", &[], self.connections_active.load(Ordering::Relaxed).max(0));
        out.family("ketch_connections_accepted_total", "counter", "Client connections accepted.");
        out.sample("ketch_connections_accepted_total", &[], self.connections_accepted.load(Ordering::Relaxed));
        out.family("ketch_network_received_bytes_total", "counter", "Bytes of request frames received.");
        out.sample("ketch_network_received_bytes_total", &[], self.bytes_received.load(Ordering::Relaxed));
        out.family("ketch_network_sent_bytes_total", "counter", "Bytes of response frames sent.");
        out.sample("ketch_network_sent_bytes_total", &[], self.bytes_sent.load(Ordering::Relaxed));
    }

    /// APIs shown: every served one (zeros included, so rates start from the first request)
    /// plus any other key that was counted.
    fn shown_apis(&self) -> Vec<ApiKey> {
        let mut keys: Vec<ApiKey> = crate::handlers::versions::SERVED.iter().map(|(k, _, _)| *k).collect();
        for (i, stats) in self.apis.iter().enumerate() {
            if stats.requests.load(Ordering::Relaxed) > 0 || stats.latency.snapshot().count() > 0 {
                if let Ok(key) = ApiKey::try_from(i as i16) {
                    keys.push(key);
                }
            }
        }
        keys.sort_by_key(|k| *k as i16);
        keys.dedup();
        keys
    }

    fn render_requests(&self, out: &mut Exposition) {
        let apis = self.shown_apis();
        out.family("ketch_requests_total", "counter", "Requests received, by API.");
        for &key in &apis {
            let n = self.apis[key as i16 as usize].requests.load(Ordering::Relaxed);
            out.sample("ketch_requests_total", &[("api", api_name(key))], n);
        }
        out.family(
            "ketch_requests_rejected_total",
            "counter",
            "Request frames that could not be decoded (unknown API or version, malformed).",
        );
        out.sample("ketch_requests_rejected_total", &[], self.requests_rejected.load(Ordering::Relaxed));
        out.family(
            "ketch_request_duration_seconds",
            "histogram",
            "Time from a request frame received to its response written, by API (APIs requested so far).",
        );
        // Only APIs that were asked for: 19 lines of zeros for each of ~45 APIs is noise.
        for &key in &apis {
            let stats = &self.apis[key as i16 as usize];
            if stats.requests.load(Ordering::Relaxed) > 0 {
                out.histogram("ketch_request_duration_seconds", &[("api", api_name(key))], &stats.latency.snapshot());
            }
        }
    }
}

/// The API's name as Kafka spells it (`Produce`, `Fetch`, `OffsetCommit`, ...).
pub fn api_name(key: ApiKey) -> &'static str {
    // ApiKey's Debug output is the variant name; cache the strings so rendering allocates once.
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        (0..API_SLOTS as i16).map(|i| ApiKey::try_from(i).map(|k| format!("{k:?}")).unwrap_or_default()).collect()
    });
    names.get(key as i16 as usize).map(String::as_str).unwrap_or("Unknown")
}

fn render_logs(broker: &Broker, out: &mut Exposition) {
    struct Row {
        topic: String,
        partition: String,
        size: u64,
        start: i64,
        end: i64,
        hw: i64,
    }
    let mut rows = Vec::new();
    for topic in broker.topics.all() {
        for partition in &topic.partitions {
            let log = partition.log();
            rows.push(Row {
                topic: topic.name.clone(),
                partition: partition.index.to_string(),
                size: log.size_bytes(),
                start: log.log_start_offset(),
                end: log.log_end_offset(),
                hw: log.high_watermark(),
            });
        }
    }
    type Family = (&'static str, &'static str, fn(&Row) -> i128);
    let families: [Family; 4] = [
        ("ketch_log_size_bytes", "Bytes on disk of a partition's segments.", |r| r.size as i128),
        ("ketch_log_start_offset", "A partition's log start offset.", |r| r.start as i128),
        ("ketch_log_end_offset", "A partition's log end offset (next offset to be written).", |r| r.end as i128),
        ("ketch_log_high_watermark", "A partition's high watermark (last offset consumers may read + 1).", |r| {
            r.hw as i128
        }),
    ];
    for (name, help, value) in families {
        out.family(name, "gauge", help);
        for row in &rows {
            out.sample(name, &[("topic", &row.topic), ("partition", &row.partition)], value(row));
        }
    }
}

fn render_group_lag(broker: &Broker, out: &mut Exposition) {
    // Copy the committed offsets out first: the group lock is never held with a partition lock.
    let committed: Vec<(String, String, i32, i64)> = {
        let inner = broker.groups.lock();
        let mut v: Vec<_> = inner
            .offsets
            .iter()
            .flat_map(|(group, offsets)| {
                offsets
                    .iter()
                    .map(move |((topic, partition), value)| (group.clone(), topic.clone(), *partition, value.offset))
            })
            .collect();
        v.sort();
        v
    };
    let mut rows = Vec::with_capacity(committed.len());
    for (group, topic, partition, offset) in committed {
        let hw = broker.topics.partition(&topic, partition).map(|p| p.log().high_watermark());
        rows.push((group, topic, partition.to_string(), offset, hw));
    }
    out.family("ketch_consumer_group_committed_offset", "gauge", "A group's committed offset for a partition.");
    for (group, topic, partition, offset, _) in &rows {
        let labels = [("group", group.as_str()), ("topic", topic.as_str()), ("partition", partition.as_str())];
        out.sample("ketch_consumer_group_committed_offset", &labels, offset);
    }
    out.family(
        "ketch_consumer_group_lag",
        "gauge",
        "High watermark minus the committed offset (partitions that exist, offsets >= 0).",
    );
    for (group, topic, partition, offset, hw) in &rows {
        let (Some(hw), true) = (hw, *offset >= 0) else { continue };
        let labels = [("group", group.as_str()), ("topic", topic.as_str()), ("partition", partition.as_str())];
        out.sample("ketch_consumer_group_lag", &labels, (hw - offset).max(0));
    }
}

/// Builds text in the Prometheus exposition format 0.0.4.
#[derive(Default)]
pub struct Exposition {
    pub text: String,
}

impl Exposition {
    /// `# HELP` and `# TYPE` lines; every sample of the family must follow before the next.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                self.text.push_str(k);
                self.text.push_str("=\"");
                escape_label_into(&mut self.text, v);
                self.text.push('"');
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }

    /// `_bucket` lines (cumulative, ending with `le="+Inf"`), `_sum` and `_count`.
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], snap: &HistogramSnapshot) {
        let bucket = format!("{name}_bucket");
        let mut with_le: Vec<(&str, &str)> = labels.to_vec();
        with_le.push(("le", ""));
        let last = with_le.len() - 1;
        for (i, le) in BUCKET_LABELS.iter().chain(std::iter::once(&"+Inf")).enumerate() {
            with_le[last].1 = le;
            self.sample(&bucket, &with_le, snap.cumulative[i]);
        }
        self.sample(&format!("{name}_sum"), labels, fmt_f64(snap.sum_seconds));
        self.sample(&format!("{name}_count"), labels, snap.count());
    }
}

/// Label values escape backslash, double quote and line feed.
fn escape_label_into(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// HELP text escapes backslash and line feed.
fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Go-style float text: `NaN`, `+Inf`, `-Inf`, otherwise Rust's shortest exact decimal.
fn fmt_f64(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests;
