use super::*;
use crate::quota::entity::{Alteration, Entity, CLIENT_ID, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, USER};

fn entity(pairs: &[(&str, Option<&str>)]) -> Entity {
    pairs.iter().map(|(k, v)| (k.to_string(), v.map(str::to_string))).collect()
}

fn set(store: &QuotaStore, e: Entity, key: &str, value: f64) {
    let out = store.alter(&[Alteration { entity: e, ops: vec![(key.to_string(), Some(value))] }], false);
    assert!(out.iter().all(|(_, o)| o.is_ok()), "{out:?}");
}

#[test]
fn quotas_survive_a_reopen_and_validate_only_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = QuotaStore::open(dir.path(), Window::default()).unwrap();
    set(&store, entity(&[(USER, Some("alice"))]), PRODUCER_BYTE_RATE, 1000.0);
    let e = entity(&[(CLIENT_ID, None)]);
    let out = store.alter(&[Alteration { entity: e.clone(), ops: vec![(CONSUMER_BYTE_RATE.into(), Some(5.0))] }], true);
    assert!(out[0].1.is_ok());
    let reopened = QuotaStore::open(dir.path(), Window::default()).unwrap();
    reopened.with_quotas(|q| {
        assert_eq!(q.len(), 1);
        assert_eq!(q[&entity(&[(USER, Some("alice"))])][PRODUCER_BYTE_RATE], 1000.0);
    });
    assert_eq!(reopened.records().len(), 1);
}

#[test]
fn the_most_specific_entity_decides_the_limit_and_who_shares_the_rate() {
    let dir = tempfile::tempdir().unwrap();
    let store = QuotaStore::open(dir.path(), Window::default()).unwrap();
    let alice = Client { user: "alice", client_id: "app" };
    let bob = Client { user: "bob", client_id: "app" };
    assert!(store.limit_for(Kind::Produce, &alice).is_none(), "no quota, no limit");
    set(&store, entity(&[(CLIENT_ID, None)]), PRODUCER_BYTE_RATE, 100.0);
    set(&store, entity(&[(USER, Some("alice"))]), PRODUCER_BYTE_RATE, 1000.0);
    store.with_quotas(|q| {
        assert_eq!(limit_of(q, Kind::Produce, &alice).unwrap().bound, 1000.0);
        assert_eq!(limit_of(q, Kind::Produce, &bob).unwrap().bound, 100.0);
        // Alice's rate is hers across client ids; bob's is the client id's.
        assert_eq!(tags(q, PRODUCER_BYTE_RATE, "alice", "app"), ("alice".to_string(), String::new()));
        assert_eq!(tags(q, PRODUCER_BYTE_RATE, "bob", "app"), (String::new(), "app".to_string()));
        assert!(limit_of(q, Kind::Fetch, &alice).is_none(), "quotas are per type");
    });
    let limit = store.limit_for(Kind::Produce, &alice).unwrap();
    // 10 kB within 10 s (the window a new rate assumes) is 1000/s: alice at her quota.
    assert_eq!(store.record(&limit, 10_000, 0), 0);
    // 10 kB more: 2000/s, throttled for (2000 - 1000) / 1000 * 10 s.
    assert_eq!(store.record(&limit, 10_000, 0), 10_000);
    store.unrecord(&limit, 10_000, 0);
    assert_eq!(store.record(&limit, 0, 0), 0);
    assert_eq!(store.max_bytes_in_window(&limit), 10_000);
    assert!(store.limit_for(Kind::Fetch, &alice).is_none());
}

#[test]
fn user_and_client_levels_follow_kafkas_order() {
    let mut q = Quotas::new();
    let put = |q: &mut Quotas, pairs: &[(&str, Option<&str>)], v: f64| {
        q.entry(entity(pairs)).or_default().insert(PRODUCER_BYTE_RATE.to_string(), v);
    };
    put(&mut q, &[(USER, None), (CLIENT_ID, None)], 5.0);
    put(&mut q, &[(USER, None), (CLIENT_ID, Some("c"))], 4.0);
    put(&mut q, &[(USER, Some("u")), (CLIENT_ID, None)], 2.0);
    let l = |q: &Quotas, u, c| limit_of(q, Kind::Produce, &Client { user: u, client_id: c }).map(|x| x.bound);
    assert_eq!(l(&q, "u", "c"), Some(2.0));
    assert_eq!(l(&q, "v", "c"), Some(4.0));
    assert_eq!(l(&q, "v", "d"), Some(5.0));
    put(&mut q, &[(USER, Some("u")), (CLIENT_ID, Some("c"))], 1.0);
    assert_eq!(l(&q, "u", "c"), Some(1.0));
}
