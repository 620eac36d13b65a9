use super::*;

fn entity(pairs: &[(&str, Option<&str>)]) -> Entity {
    pairs.iter().map(|(k, v)| (k.to_string(), v.map(str::to_string))).collect()
}

fn alteration(e: Entity, ops: &[(&str, Option<f64>)]) -> Alteration {
    Alteration { entity: e, ops: ops.iter().map(|(k, v)| (k.to_string(), *v)).collect() }
}

#[test]
fn valid_alterations_become_changes_and_apply() {
    let alice = entity(&[(USER, Some("alice"))]);
    let default_client = entity(&[(CLIENT_ID, None)]);
    let d = decide(
        &Quotas::new(),
        &[
            alteration(alice.clone(), &[(PRODUCER_BYTE_RATE, Some(1024.0)), (REQUEST_PERCENTAGE, Some(12.5))]),
            alteration(default_client.clone(), &[(CONSUMER_BYTE_RATE, Some(2048.0))]),
        ],
    );
    assert!(d.outcomes.iter().all(|(_, o)| o.is_ok()), "{:?}", d.outcomes);
    assert_eq!(d.changes.len(), 3);
    let mut q = Quotas::new();
    apply(&mut q, d.changes);
    assert_eq!(q[&alice][PRODUCER_BYTE_RATE], 1024.0);
    assert_eq!(q[&default_client][CONSUMER_BYTE_RATE], 2048.0);
    // The same value again writes nothing; removing a key that is absent neither.
    let d = decide(&q, &[alteration(alice.clone(), &[(PRODUCER_BYTE_RATE, Some(1024.0)), (CONSUMER_BYTE_RATE, None)])]);
    assert!(d.changes.is_empty() && d.outcomes[0].1.is_ok());
    // Removing every key drops the entity.
    let d = decide(&q, &[alteration(alice.clone(), &[(PRODUCER_BYTE_RATE, None), (REQUEST_PERCENTAGE, None)])]);
    apply(&mut q, d.changes);
    assert!(!q.contains_key(&alice));
}

#[test]
fn kafka_refusals_and_messages() {
    let alice = entity(&[(USER, Some("alice"))]);
    let refused = |e: Entity, ops: &[(&str, Option<f64>)]| {
        let d = decide(&Quotas::new(), &[alteration(e, ops)]);
        assert!(d.changes.is_empty());
        d.outcomes[0].1.clone().unwrap_err()
    };
    assert_eq!(refused(alice.clone(), &[("nope", Some(1.0))]), "Invalid configuration key nope");
    assert_eq!(
        refused(alice.clone(), &[(PRODUCER_BYTE_RATE, Some(0.0))]),
        "Quota producer_byte_rate must be greater than 0"
    );
    assert_eq!(
        refused(alice.clone(), &[(PRODUCER_BYTE_RATE, Some(1.5))]),
        "producer_byte_rate cannot be a fractional value."
    );
    assert_eq!(
        refused(alice.clone(), &[(PRODUCER_BYTE_RATE, Some(1e30))]),
        "Proposed value for producer_byte_rate is too large for a LONG."
    );
    assert_eq!(refused(entity(&[]), &[(PRODUCER_BYTE_RATE, Some(1.0))]), "Invalid empty client quota entity");
    assert_eq!(refused(entity(&[("group", Some("g"))]), &[]), "Unhandled client quota entity type: group");
    assert_eq!(refused(entity(&[(USER, Some(""))]), &[]), "Empty user not supported");
    assert_eq!(
        refused(entity(&[(IP, Some("1.2.3.4")), (USER, Some("a"))]), &[]),
        "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
    );
    assert_eq!(refused(entity(&[(IP, Some("not an ip"))]), &[]), "not an ip is not a valid IP or resolvable host.");
    assert_eq!(
        refused(entity(&[(IP, None)]), &[(PRODUCER_BYTE_RATE, Some(1.0))]),
        "Invalid configuration key producer_byte_rate"
    );
    assert_eq!(
        refused(alice.clone(), &[(PRODUCER_BYTE_RATE, Some(1.0)), (PRODUCER_BYTE_RATE, Some(2.0))]),
        "Ignoring duplicate entity ClientQuotaEntity(entries={user=alice})"
    );
    // An entity named twice: one outcome, refused; the first mention's changes stay (Kafka).
    let both = entity(&[(USER, Some("u")), (CLIENT_ID, None)]);
    let d = decide(
        &Quotas::new(),
        &[alteration(both.clone(), &[(PRODUCER_BYTE_RATE, Some(1.0))]), alteration(both.clone(), &[])],
    );
    assert_eq!(d.outcomes.len(), 1);
    assert_eq!(
        d.outcomes[0].1,
        Err("Ignoring duplicate entity ClientQuotaEntity(entries={client-id=null, user=u})".into())
    );
    assert_eq!(d.changes.len(), 1);
    // One bad op refuses its entity only.
    let d = decide(
        &Quotas::new(),
        &[
            alteration(alice.clone(), &[(PRODUCER_BYTE_RATE, Some(1.0)), ("x", Some(1.0))]),
            alteration(entity(&[(IP, None)]), &[(CONNECTION_CREATION_RATE, Some(10.0))]),
        ],
    );
    assert!(d.outcomes[0].1.is_err() && d.outcomes[1].1.is_ok());
    assert_eq!(d.changes.len(), 1);
}

#[test]
fn describe_filters_match_as_kafka() {
    let c = |k: &str, t: i8, m: Option<&str>| (k.to_string(), t, m.map(str::to_string));
    let alice = entity(&[(USER, Some("alice"))]);
    let alice_app = entity(&[(USER, Some("alice")), (CLIENT_ID, Some("app"))]);
    let default_user = entity(&[(USER, None)]);
    let f = filter(&[c(USER, 0, Some("alice"))]).unwrap();
    assert!(matches(&alice, &f, false) && matches(&alice_app, &f, false) && !matches(&default_user, &f, false));
    assert!(matches(&alice, &f, true) && !matches(&alice_app, &f, true));
    let f = filter(&[c(USER, 1, None)]).unwrap();
    assert!(matches(&default_user, &f, true) && !matches(&alice, &f, true));
    let f = filter(&[c(USER, 2, None)]).unwrap();
    assert!(matches(&default_user, &f, false) && matches(&alice_app, &f, false));
    assert!(matches(&alice_app, &filter(&[]).unwrap(), false));
    assert_eq!(filter(&[c("", 0, Some("x"))]), Err((false, "Invalid empty entity type.".into())));
    assert_eq!(filter(&[c("group", 2, None)]), Err((true, "Unsupported entity type group".into())));
    assert_eq!(
        filter(&[c(USER, 0, None)]),
        Err((false, "Request specified MATCH_TYPE_EXACT, but set match string to null.".into()))
    );
    assert_eq!(
        filter(&[c(USER, 2, None), c(USER, 1, None)]),
        Err((false, "Entity type user cannot appear more than once in the filter.".into()))
    );
    assert!(filter(&[c(IP, 2, None), c(USER, 2, None)]).unwrap_err().1.starts_with("Invalid entity filter component"));
    assert_eq!(filter(&[c(USER, 7, None)]), Err((false, "Unknown match type 7".into())));
}
