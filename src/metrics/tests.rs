//! Unit tests of the metrics registry, the exposition format and the HTTP endpoint (in process,
//! on an ephemeral port of 127.0.0.1).

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

/// Checks every line is a comment or `name{labels} value` with a parseable value, and that the
/// samples of a family are not split by another family. Returns (name+labels, value) pairs.
fn parse_exposition(text: &str) -> Vec<(String, f64)> {
    let mut samples = Vec::new();
    let mut families_seen: Vec<String> = Vec::new();
    let mut current = String::new();
    assert!(text.ends_with('\n'), "exposition ends with a line feed");
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(!families_seen.contains(&name.to_string()), "family {name} declared twice");
            families_seen.push(name.to_string());
            current = name.to_string();
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        assert!(!line.starts_with('#') && !line.is_empty(), "unexpected line {line:?}");
        let (series, value) = line.rsplit_once(' ').expect("sample has a value");
        let name = series.split('{').next().unwrap();
        assert!(
            name == current
                || [format!("{current}_bucket"), format!("{current}_sum"), format!("{current}_count")]
                    .contains(&name.to_string()),
            "sample {name} outside its family {current}"
        );
        let value = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse::<f64>().unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        samples.push((series.to_string(), value));
    }
    samples
}

fn value(samples: &[(String, f64)], series: &str) -> Option<f64> {
    samples.iter().find(|(s, _)| s == series).map(|(_, v)| *v)
}

#[test]
fn bucket_labels_match_bounds() {
    for (label, ns) in BUCKET_LABELS.iter().zip(BUCKET_BOUNDS_NS) {
        let seconds: f64 = label.parse().unwrap();
        assert!((seconds * 1e9 - ns as f64).abs() < 1.0, "{label} vs {ns} ns");
    }
    assert!(BUCKET_BOUNDS_NS.windows(2).all(|w| w[0] < w[1]), "bounds strictly increase");
}

#[test]
fn histogram_buckets_are_cumulative_and_inclusive() {
    let h = Histogram::default();
    h.observe(Duration::from_nanos(100_000)); // exactly on the first bound: le="0.0001"
    h.observe(Duration::from_nanos(100_001)); // just above: le="0.00025"
    h.observe(Duration::from_millis(3)); // le="0.005"
    h.observe(Duration::from_secs(60)); // only +Inf
    h.observe(Duration::ZERO);
    let s = h.snapshot();
    assert_eq!(s.cumulative[0], 2);
    assert_eq!(s.cumulative[1], 3);
    assert_eq!(s.cumulative[4], 3, "le=0.0025 excludes 3 ms");
    assert_eq!(s.cumulative[5], 4);
    assert_eq!(s.cumulative[BUCKETS - 2], 4, "le=10 excludes 60 s");
    assert_eq!(s.count(), 5);
    assert!(s.cumulative.windows(2).all(|w| w[0] <= w[1]));
    let expected = (100_000 + 100_001 + 3_000_000) as f64 / 1e9 + 60.0;
    assert!((s.sum_seconds - expected).abs() < 1e-9, "{}", s.sum_seconds);
}

#[test]
fn histogram_counts_every_concurrent_observation() {
    let h = Arc::new(Histogram::default());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let h = h.clone();
            std::thread::spawn(move || {
                for i in 0..10_000u64 {
                    h.observe(Duration::from_micros((i * 7 + t) % 20_000));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(h.snapshot().count(), 40_000);
}

#[test]
fn exposition_text_and_escaping() {
    let mut out = Exposition::default();
    out.family("x_total", "counter", "Help with a \\ backslash\nand a newline.");
    out.sample("x_total", &[], 3);
    out.sample("x_total", &[("group", "a\"b\\c\nd"), ("partition", "0")], 7);
    assert_eq!(
        out.text,
        "# HELP x_total Help with a \\\\ backslash\\nand a newline.\n# TYPE x_total counter\nx_total 3\n\
         x_total{group=\"a\\\"b\\\\c\\nd\",partition=\"0\"} 7\n"
    );
}

#[test]
fn histogram_exposition() {
    let h = Histogram::default();
    h.observe(Duration::from_micros(50));
    h.observe(Duration::from_millis(700));
    h.observe(Duration::from_secs(11));
    let mut out = Exposition::default();
    out.family("d_seconds", "histogram", "D.");
    out.histogram("d_seconds", &[("api", "Fetch")], &h.snapshot());
    let lines: Vec<&str> = out.text.lines().collect();
    assert_eq!(lines[2], "d_seconds_bucket{api=\"Fetch\",le=\"0.0001\"} 1");
    assert_eq!(lines[2 + 11], "d_seconds_bucket{api=\"Fetch\",le=\"0.5\"} 1");
    assert_eq!(lines[2 + 12], "d_seconds_bucket{api=\"Fetch\",le=\"1\"} 2");
    assert_eq!(lines[2 + 15], "d_seconds_bucket{api=\"Fetch\",le=\"10\"} 2");
    assert_eq!(lines[2 + 16], "d_seconds_bucket{api=\"Fetch\",le=\"+Inf\"} 3");
    assert!(lines[2 + 17].starts_with("d_seconds_sum{api=\"Fetch\"} 11.70005"), "{}", lines[19]);
    assert_eq!(lines[2 + 18], "d_seconds_count{api=\"Fetch\"} 3");
    assert_eq!(lines.len(), 21);
    parse_exposition(&out.text);
}

#[test]
fn float_formatting() {
    assert_eq!(fmt_f64(0.25), "0.25");
    assert_eq!(fmt_f64(1.0), "1");
    assert_eq!(fmt_f64(f64::INFINITY), "+Inf");
    assert_eq!(fmt_f64(f64::NEG_INFINITY), "-Inf");
    assert_eq!(fmt_f64(f64::NAN), "NaN");
    assert_eq!(fmt_f64(1e-7), "0.0000001");
}

#[test]
fn listener_config() {
    let props = |v: Option<&str>| {
        let mut p = Properties::new();
        if let Some(v) = v {
            p.insert(LISTENER_KEY.into(), v.into());
        }
        p
    };
    assert_eq!(listener_from_properties(&props(None)).unwrap(), None, "off by default");
    assert_eq!(listener_from_properties(&props(Some(" "))).unwrap(), None);
    assert_eq!(listener_from_properties(&props(Some("127.0.0.1:9404"))).unwrap(), Some(("127.0.0.1".into(), 9404)));
    assert_eq!(listener_from_properties(&props(Some(":0"))).unwrap(), Some((String::new(), 0)));
    assert_eq!(listener_from_properties(&props(Some("[::1]:9404"))).unwrap(), Some(("::1".into(), 9404)));
    for bad in ["9404", "host:", "host:99999", "http://h:1", "h:x"] {
        let err = listener_from_properties(&props(Some(bad))).unwrap_err().to_string();
        assert!(err.contains(LISTENER_KEY), "{bad}: {err}");
    }
}

#[test]
fn api_names_are_kafka_names() {
    assert_eq!(api_name(ApiKey::Produce), "Produce");
    assert_eq!(api_name(ApiKey::OffsetCommit), "OffsetCommit");
    assert_eq!(api_name(ApiKey::ApiVersions), "ApiVersions");
}

#[test]
fn render_without_a_broker() {
    let m = Arc::new(Metrics::new());
    let text = m.render();
    let s = parse_exposition(&text);
    assert_eq!(value(&s, "ketch_ready"), Some(0.0));
    assert_eq!(value(&s, "ketch_requests_total{api=\"Produce\"}"), Some(0.0), "served APIs shown from the start");
    assert!(!text.contains("ketch_log_size_bytes{"), "no partition figures before the broker is attached");
    assert!(!text.contains("ketch_request_duration_seconds_count{"), "no histogram for APIs never requested");

    let conn = m.connection_opened();
    m.request_started(ApiKey::Produce);
    m.request_started(ApiKey::Produce);
    m.request_finished(ApiKey::Produce, Duration::from_millis(2));
    m.received(100);
    m.sent(40);
    m.request_rejected();
    m.set_readiness(Readiness::Ready);
    let s = parse_exposition(&m.render());
    assert_eq!(value(&s, "ketch_requests_total{api=\"Produce\"}"), Some(2.0));
    assert_eq!(value(&s, "ketch_request_duration_seconds_count{api=\"Produce\"}"), Some(1.0));
    assert_eq!(value(&s, "ketch_request_duration_seconds_bucket{api=\"Produce\",le=\"0.001\"}"), Some(0.0));
    assert_eq!(value(&s, "ketch_request_duration_seconds_bucket{api=\"Produce\",le=\"0.0025\"}"), Some(1.0));
    assert_eq!(value(&s, "ketch_network_received_bytes_total"), Some(100.0));
    assert_eq!(value(&s, "ketch_network_sent_bytes_total"), Some(40.0));
    assert_eq!(value(&s, "ketch_requests_rejected_total"), Some(1.0));
    assert_eq!(value(&s, "ketch_connections_active"), Some(1.0));
    assert_eq!(value(&s, "ketch_ready"), Some(1.0));
    drop(conn);
    let s = parse_exposition(&m.render());
    assert_eq!(value(&s, "ketch_connections_active"), Some(0.0));
    assert_eq!(value(&s, "ketch_connections_accepted_total"), Some(1.0));
    assert!(value(&s, "ketch_uptime_seconds").unwrap() >= 0.0);
}

#[test]
fn request_timer_counts_at_start_and_observes_at_drop() {
    let m = Arc::new(Metrics::new());
    let timer = m.request(ApiKey::Fetch, std::time::Instant::now() - Duration::from_millis(30));
    let s = parse_exposition(&m.render());
    assert_eq!(value(&s, "ketch_requests_total{api=\"Fetch\"}"), Some(1.0));
    assert_eq!(value(&s, "ketch_request_duration_seconds_count{api=\"Fetch\"}"), Some(0.0), "still in flight");
    drop(timer);
    let s = parse_exposition(&m.render());
    assert_eq!(value(&s, "ketch_request_duration_seconds_count{api=\"Fetch\"}"), Some(1.0));
    assert_eq!(value(&s, "ketch_request_duration_seconds_bucket{api=\"Fetch\",le=\"0.025\"}"), Some(0.0));
    assert_eq!(value(&s, "ketch_request_duration_seconds_bucket{api=\"Fetch\",le=\"0.05\"}"), Some(1.0));
}

#[test]
fn render_with_a_broker_reports_partitions_and_lag() {
    let dir = tempfile::tempdir().unwrap();
    let mut props = Properties::new();
    props.insert("log.dirs".into(), dir.path().display().to_string());
    let config = crate::config::BrokerConfig::from_properties(props).unwrap();
    let broker = crate::broker::Broker::open(config).unwrap();
    broker.topics.create("t", 2, Properties::new()).unwrap();
    {
        let mut inner = broker.groups.lock();
        let offsets = inner.offsets.entry("g \"1\"".into()).or_default();
        let value = |offset| crate::group::records::OffsetValue {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
        };
        offsets.insert(("t".into(), 0), value(0));
        offsets.insert(("t".into(), 1), value(-1));
        offsets.insert(("gone".into(), 0), value(3));
    }
    let m = Metrics::new();
    m.attach(broker.clone());
    let s = parse_exposition(&m.render());
    assert_eq!(value(&s, "ketch_log_end_offset{topic=\"t\",partition=\"1\"}"), Some(0.0));
    assert_eq!(value(&s, "ketch_log_start_offset{topic=\"t\",partition=\"0\"}"), Some(0.0));
    assert!(value(&s, "ketch_log_size_bytes{topic=\"t\",partition=\"0\"}").is_some());
    let g = "group=\"g \\\"1\\\"\"";
    assert_eq!(
        value(&s, &format!("ketch_consumer_group_committed_offset{{{g},topic=\"gone\",partition=\"0\"}}")),
        Some(3.0)
    );
    assert_eq!(value(&s, &format!("ketch_consumer_group_lag{{{g},topic=\"t\",partition=\"0\"}}")), Some(0.0));
    assert_eq!(value(&s, &format!("ketch_consumer_group_lag{{{g},topic=\"t\",partition=\"1\"}}")), None, "no offset");
    assert_eq!(value(&s, &format!("ketch_consumer_group_lag{{{g},topic=\"gone\",partition=\"0\"}}")), None);
    broker.close();
}

/// Sends `request` raw and returns everything the endpoint answered before closing.
async fn exchange(addr: std::net::SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request).await.unwrap();
    s.shutdown().await.unwrap(); // our write half only: the answer still comes
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await.expect("answer in time").unwrap();
    String::from_utf8(out).unwrap()
}

fn status(response: &str) -> &str {
    response.split(' ').nth(1).unwrap_or("")
}

#[tokio::test]
async fn http_endpoint_routes_and_bounds() {
    let m = Arc::new(Metrics::new());
    let listener = http::bind("127.0.0.1", 0, &m).await.unwrap();
    let addr = m.endpoint().unwrap();
    assert_eq!(addr, listener.local_addr().unwrap());
    let task = http::spawn(listener, m.clone());

    let r = exchange(addr, b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(status(&r), "503", "{r}");
    assert!(r.ends_with("not ready: recovering\n"), "{r}");
    assert_eq!(status(&exchange(addr, b"GET /health HTTP/1.1\r\n\r\n").await), "503");
    assert_eq!(status(&exchange(addr, b"GET /live HTTP/1.1\r\n\r\n").await), "200");
    m.set_readiness(Readiness::Ready);
    assert_eq!(status(&exchange(addr, b"GET /ready HTTP/1.1\r\n\r\n").await), "200");
    assert_eq!(status(&exchange(addr, b"GET /health?verbose HTTP/1.0\n\n").await), "200");

    let r = exchange(addr, b"GET /metrics HTTP/1.1\r\nAccept: */*\r\n\r\n").await;
    assert_eq!(status(&r), "200");
    let (head, body) = r.split_once("\r\n\r\n").unwrap();
    assert!(head.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"), "{head}");
    assert!(head.contains(&format!("Content-Length: {}", body.len())), "{head}");
    assert!(head.contains("Connection: close"));
    assert_eq!(value(&parse_exposition(body), "ketch_ready"), Some(1.0));

    let r = exchange(addr, b"HEAD /metrics HTTP/1.1\r\n\r\n").await;
    assert_eq!(status(&r), "200");
    assert!(r.ends_with("\r\n\r\n"), "HEAD has no body: {r}");

    assert_eq!(status(&exchange(addr, b"GET /nope HTTP/1.1\r\n\r\n").await), "404");
    let r = exchange(addr, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").await;
    assert_eq!(status(&r), "405");
    assert!(r.contains("Allow: GET, HEAD"));
    assert_eq!(status(&exchange(addr, b"\x00\x01\x02\xff\n\n").await), "400");
    assert_eq!(status(&exchange(addr, b"GET /metrics\r\n\r\n").await), "400");

    // A head that does not end within the bound: 431. (Exactly the bound, so no unread byte
    // turns the close into a reset before the client reads the answer.)
    let mut huge = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
    huge.resize(http::MAX_REQUEST_BYTES, b'a');
    assert_eq!(status(&exchange(addr, &huge).await), "431");

    // A client that closes at once, or mid-head, gets nothing and breaks nothing.
    drop(TcpStream::connect(addr).await.unwrap());
    assert_eq!(exchange(addr, b"GET /metr").await, "");

    // A slow client (one byte at a time) is still answered.
    let mut s = TcpStream::connect(addr).await.unwrap();
    for b in b"GET /live HTTP/1.1\r\n\r\n" {
        s.write_all(&[*b]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    assert_eq!(status(&out), "200");

    m.set_readiness(Readiness::Stopping);
    let r = exchange(addr, b"GET /ready HTTP/1.1\r\n\r\n").await;
    assert_eq!(status(&r), "503");
    assert!(r.ends_with("shutting down\n"));
    task.abort();
}
