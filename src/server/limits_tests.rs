use super::*;

fn unlimited() -> Settings {
    Settings {
        max_connections: UNLIMITED,
        listener_max_connections: UNLIMITED,
        max_per_ip: UNLIMITED,
        per_ip_overrides: Arc::new(Vec::new()),
        creation_rate: UNLIMITED,
        listener_creation_rate: UNLIMITED,
    }
}

fn limits(listeners: &[&str], inter_broker: &str) -> (Arc<ConnectionLimits>, Vec<Arc<str>>) {
    let names: Vec<Arc<str>> = listeners.iter().map(|l| Arc::from(*l)).collect();
    (ConnectionLimits::new(&names, inter_broker, Window { samples: 2, window_ms: 1000 }), names)
}

fn check(props: &Properties) -> Result<(), String> {
    crate::dynconf::defs::validate_connection_limits(|k: &str| props.get(k).cloned().unwrap_or_default())
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

async fn admit(limits: &Arc<ConnectionLimits>, listener: &Arc<str>, from: &str, settings: &Settings) -> Admission {
    let settings = settings.clone();
    limits.admit(listener, ip(from), move || settings.clone(), None).await
}

fn slot(admission: Admission) -> Slot {
    match admission {
        Admission::Accepted(slot) => slot,
        Admission::Refused { max } => panic!("refused (max {max})"),
        Admission::Throttled(d) => panic!("throttled for {d:?}"),
    }
}

#[tokio::test]
async fn an_address_at_its_maximum_is_refused_until_one_of_its_connections_closes() {
    let (limits, names) = limits(&["PLAINTEXT"], "PLAINTEXT");
    let settings = Settings { max_per_ip: 2, ..unlimited() };
    let first = slot(admit(&limits, &names[0], "127.0.0.1", &settings).await);
    let _second = slot(admit(&limits, &names[0], "127.0.0.1", &settings).await);
    assert!(matches!(admit(&limits, &names[0], "127.0.0.1", &settings).await, Admission::Refused { max: 2 }));
    // Another address has its own count; a refused connection was never counted.
    let _other = slot(admit(&limits, &names[0], "127.0.0.2", &settings).await);
    assert_eq!(limits.total(), 3);
    drop(first);
    assert_eq!(limits.total(), 2);
    let _third = slot(admit(&limits, &names[0], "127.0.0.1", &settings).await);
}

#[tokio::test]
async fn an_override_replaces_the_default_for_its_address_only() {
    let (limits, names) = limits(&["PLAINTEXT"], "PLAINTEXT");
    let props: Properties = [
        ("max.connections.per.ip".to_string(), "0".to_string()),
        ("max.connections.per.ip.overrides".to_string(), "127.0.0.1:1, [::1]:2".to_string()),
    ]
    .into();
    assert_eq!(check(&props), Ok(()));
    let settings = limits.settings(&props, "PLAINTEXT");
    assert_eq!(settings.max_for(ip("127.0.0.1")), 1);
    assert_eq!(settings.max_for(ip("::1")), 2);
    assert_eq!(settings.max_for(ip("10.0.0.1")), 0);
    let _one = slot(admit(&limits, &names[0], "127.0.0.1", &settings).await);
    assert!(matches!(admit(&limits, &names[0], "127.0.0.1", &settings).await, Admission::Refused { max: 1 }));
    assert!(matches!(admit(&limits, &names[0], "10.0.0.1", &settings).await, Admission::Refused { max: 0 }));
    // An IPv4 client of a dual-stack socket counts as its IPv4 address.
    assert!(matches!(admit(&limits, &names[0], "::ffff:127.0.0.1", &settings).await, Admission::Refused { max: 1 }));
}

#[test]
fn startup_checks_are_kafkas() {
    let props =
        |pairs: &[(&str, &str)]| -> Properties { pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() };
    assert!(check(&props(&[("max.connections.per.ip", "0")])).unwrap_err().contains("can be set to zero only if"));
    assert!(check(&props(&[("max.connections.per.ip.overrides", "127.0.0.1")])).is_err());
    assert!(check(&props(&[("max.connections.per.ip.overrides", "127.0.0.1:x")])).is_err());
    assert_eq!(check(&props(&[("max.connections.per.ip", "5")])), Ok(()));
}

#[tokio::test]
async fn a_full_listener_makes_its_acceptor_wait_for_a_slot() {
    let (limits, names) = limits(&["PLAINTEXT", "OTHER"], "PLAINTEXT");
    let settings = Settings { listener_max_connections: 1, ..unlimited() };
    let first = slot(admit(&limits, &names[1], "127.0.0.1", &settings).await);
    let waiting = {
        let (limits, listener, settings) = (limits.clone(), names[1].clone(), settings.clone());
        tokio::spawn(async move { slot(admit(&limits, &listener, "127.0.0.1", &settings).await) })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "admitted past the listener's max.connections");
    drop(first);
    let second = tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("woken by the close").unwrap();
    assert_eq!(limits.total(), 1);
    drop(second);
}

#[tokio::test]
async fn the_broker_limit_holds_other_listeners_but_the_inter_broker_one_closes_the_least_recently_active() {
    let (limits, names) = limits(&["CLIENTS", "REPLICATION"], "REPLICATION");
    let settings = Settings { max_connections: 2, ..unlimited() };
    let older = slot(admit(&limits, &names[0], "127.0.0.1", &settings).await);
    tokio::time::sleep(Duration::from_millis(5)).await;
    let newer = slot(admit(&limits, &names[0], "127.0.0.1", &settings).await);
    // A third client connection waits ...
    let waiting = {
        let (limits, listener, settings) = (limits.clone(), names[0].clone(), settings.clone());
        tokio::spawn(async move { admit(&limits, &listener, "127.0.0.1", &settings).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "admitted past max.connections");
    waiting.abort();
    // ... an inter-broker one goes in, and the least recently active client connection is asked
    // to close.
    newer.touch();
    let replication = slot(admit(&limits, &names[1], "127.0.0.1", &settings).await);
    assert_eq!(limits.total(), 3);
    tokio::time::timeout(Duration::from_secs(1), older.evicted()).await.expect("the older connection is evicted");
    let newer_evicted = tokio::time::timeout(Duration::from_millis(100), newer.evicted()).await;
    assert!(newer_evicted.is_err(), "only one connection over the limit: only one is closed");
    drop((older, replication));
}

#[tokio::test]
async fn a_single_listener_is_not_protected() {
    let (limits, names) = limits(&["PLAINTEXT"], "PLAINTEXT");
    let settings = Settings { max_connections: 1, ..unlimited() };
    let _first = slot(admit(&limits, &names[0], "127.0.0.1", &settings).await);
    let second = tokio::time::timeout(Duration::from_millis(100), admit(&limits, &names[0], "127.0.0.1", &settings));
    assert!(second.await.is_err(), "admitted past max.connections");
}

#[tokio::test]
async fn over_the_creation_rate_the_acceptor_pauses() {
    let (limits, names) = limits(&["PLAINTEXT"], "PLAINTEXT");
    // 2 samples of 1 s: rates are measured over 1 s at least. The third connection makes 3/s.
    let settings = Settings { creation_rate: 2, ..unlimited() };
    let _a = slot(admit(&limits, &names[0], "127.0.0.1", &settings).await);
    let _b = slot(admit(&limits, &names[0], "127.0.0.1", &settings).await);
    let third = tokio::time::timeout(Duration::from_millis(100), admit(&limits, &names[0], "127.0.0.1", &settings));
    assert!(third.await.is_err(), "accepted at once over max.connection.creation.rate");
}

#[tokio::test]
async fn over_its_ip_rate_a_connection_is_throttled_and_taken_back_from_the_rates() {
    let (limits, names) = limits(&["PLAINTEXT"], "PLAINTEXT");
    let settings = Settings { creation_rate: 2, ..unlimited() };
    let quota = |limits: &Arc<ConnectionLimits>| {
        let (limits, listener, settings) = (limits.clone(), names[0].clone(), settings.clone());
        async move { limits.admit(&listener, ip("127.0.0.1"), move || settings.clone(), Some(1.0)).await }
    };
    let _first = slot(quota(&limits).await);
    match quota(&limits).await {
        // 2 connections over 1 s against 1/s: (2 - 1) / 1 * 1000 ms.
        Admission::Throttled(d) => assert_eq!(d, Duration::from_millis(1000)),
        _ => panic!("not throttled over connection_creation_rate"),
    }
    assert_eq!(limits.total(), 1, "a throttled connection is not counted");
    // The broker-wide rate saw 1 connection, not 2: another address is accepted at once.
    let other = tokio::time::timeout(Duration::from_millis(100), admit(&limits, &names[0], "127.0.0.2", &settings));
    slot(other.await.expect("the throttled connection was taken back from the broker rate"));
}
