//! Delegation token decisions, checked against Kafka's `DelegationTokenControlManager` rules.

use super::*;
use kafka_protocol::messages::create_delegation_token_request::CreatableRenewers;

const DAY_MS: i64 = 86_400_000;

fn settings() -> TokenSettings {
    TokenSettings {
        secret: Some("key".into()),
        max_lifetime_ms: 7 * DAY_MS,
        expiry_time_ms: DAY_MS,
        check_interval_ms: 1,
    }
}

fn renewer(kind: &str, name: &str) -> CreatableRenewers {
    CreatableRenewers::default().with_principal_type(str_bytes(kind)).with_principal_name(str_bytes(name))
}

/// Creates a token as `requester` at `now` and returns the tokens with it, and its HMAC.
fn created(requester: &str, req: CreateDelegationTokenRequest, now: i64) -> (Tokens, Vec<u8>) {
    let (records, response) = create(&settings(), true, requester, &req, 3, now);
    assert_eq!(response.error_code, 0);
    let mut tokens = Tokens::new();
    apply(&mut tokens, &records);
    (tokens, response.hmac.to_vec())
}

#[test]
fn hmac_is_hmac_sha512_of_the_id_keyed_with_the_secret() {
    // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
    let expected = "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737";
    let got: String = hmac("Jefe", "what do ya want for nothing?").iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(got, expected);
    assert_eq!(password(&[0xff, 0x00]), "/wA=", "standard base64, padded");
}

#[test]
fn token_ids_are_kafka_uuid_strings() {
    for _ in 0..200 {
        let id = new_token_id();
        assert_eq!(id.len(), 22);
        assert!(!id.starts_with('-'));
        assert!(id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{id}");
    }
}

#[test]
fn creation_bounds_the_lifetimes_and_names_owner_and_requester() {
    let now = 1_000_000;
    let req = CreateDelegationTokenRequest::default()
        .with_max_lifetime_ms(2 * DAY_MS)
        .with_renewers(vec![renewer("User", "bob")]);
    let (records, response) = create(&settings(), true, "User:alice", &req, 3, now);
    let MetadataRecord::DelegationToken(token) = &records[0] else { panic!("{records:?}") };
    assert_eq!((token.owner.as_str(), token.requester.as_str()), ("User:alice", "User:alice"));
    assert_eq!(token.renewers, ["User:bob"]);
    assert_eq!(
        (token.issue_timestamp, token.max_timestamp, token.expiration_timestamp),
        (now, now + 2 * DAY_MS, now + DAY_MS)
    );
    assert_eq!(response.hmac.to_vec(), hmac("key", &token.token_id));
    assert_eq!(response.token_id.as_str(), token.token_id);
    assert_eq!(
        (response.principal_name.as_str(), response.token_requester_principal_name.as_str()),
        ("alice", "alice")
    );

    // A shorter max lifetime than the expiry time caps the expiry; a longer one than the
    // broker's is cut to it; 0 or less means the broker's.
    let short = CreateDelegationTokenRequest::default().with_max_lifetime_ms(1000);
    let (records, _) = create(&settings(), true, "User:alice", &short, 3, now);
    let MetadataRecord::DelegationToken(t) = &records[0] else { panic!() };
    assert_eq!((t.max_timestamp, t.expiration_timestamp), (now + 1000, now + 1000));
    for asked in [0, -1, 30 * DAY_MS] {
        let req = CreateDelegationTokenRequest::default().with_max_lifetime_ms(asked);
        let (records, _) = create(&settings(), true, "User:alice", &req, 3, now);
        let MetadataRecord::DelegationToken(t) = &records[0] else { panic!() };
        assert_eq!(t.max_timestamp, now + 7 * DAY_MS, "{asked}");
    }

    // Another owner, named by the request; the requester stays the caller.
    let other = CreateDelegationTokenRequest::default()
        .with_owner_principal_type(Some(str_bytes("User")))
        .with_owner_principal_name(Some(str_bytes("carol")));
    let (records, response) = create(&settings(), true, "User:admin", &other, 3, now);
    let MetadataRecord::DelegationToken(t) = &records[0] else { panic!() };
    assert_eq!((t.owner.as_str(), t.requester.as_str()), ("User:carol", "User:admin"));
    assert_eq!(response.token_requester_principal_name.as_str(), "admin");
    let (_, v2) = create(&settings(), true, "User:admin", &other, 2, now);
    assert!(v2.token_requester_principal_name.is_empty(), "no requester fields below version 3");
}

#[test]
fn creation_is_refused_without_a_secret_below_the_metadata_version_and_for_group_renewers() {
    let req = CreateDelegationTokenRequest::default();
    let off = TokenSettings { secret: None, ..settings() };
    let cases = [
        (create(&off, true, "User:a", &req, 3, 0), ResponseError::DelegationTokenAuthDisabled),
        (create(&settings(), false, "User:a", &req, 3, 0), ResponseError::UnsupportedVersion),
        (
            create(&settings(), true, "User:a", &req.clone().with_renewers(vec![renewer("Group", "g")]), 3, 0),
            ResponseError::InvalidPrincipalType,
        ),
    ];
    for ((records, response), error) in cases {
        assert!(records.is_empty());
        assert_eq!(response.error_code, error.code());
        assert_eq!(response.issue_timestamp_ms, ERROR_TIMESTAMP_MS);
        assert!(response.hmac.is_empty() && response.token_id.is_empty());
    }
}

#[test]
fn renewal_by_owner_or_renewer_up_to_the_max_timestamp() {
    let now = 0;
    let req = CreateDelegationTokenRequest::default().with_renewers(vec![renewer("User", "bob")]);
    let (tokens, mac) = created("User:alice", req, now);
    let renew_req =
        |period| RenewDelegationTokenRequest::default().with_hmac(mac.clone().into()).with_renew_period_ms(period);

    let (records, response) = renew(&settings(), true, &tokens, "User:bob", &renew_req(1000), now + 10);
    assert_eq!((response.error_code, response.expiry_timestamp_ms), (0, now + 1010));
    let MetadataRecord::DelegationToken(t) = &records[0] else { panic!() };
    assert_eq!(t.expiration_timestamp, now + 1010);
    // Past the max timestamp's reach: capped at it.
    let (short, short_mac) =
        created("User:alice", CreateDelegationTokenRequest::default().with_max_lifetime_ms(DAY_MS + 100), now);
    let req = RenewDelegationTokenRequest::default().with_hmac(short_mac.into());
    let (_, response) = renew(&settings(), true, &short, "User:alice", &req, now + DAY_MS - 5);
    assert_eq!(response.expiry_timestamp_ms, now + DAY_MS + 100);

    let refusals = [
        (
            renew(&settings(), true, &tokens, "User:mallory", &renew_req(0), now),
            ResponseError::DelegationTokenOwnerMismatch,
        ),
        (
            renew(&settings(), true, &tokens, "User:alice", &renew_req(0), now + DAY_MS + 1),
            ResponseError::DelegationTokenExpired,
        ),
        (
            renew(
                &settings(),
                true,
                &tokens,
                "User:alice",
                &RenewDelegationTokenRequest::default().with_hmac(vec![1, 2].into()),
                now,
            ),
            ResponseError::DelegationTokenNotFound,
        ),
        (
            renew(
                &TokenSettings { secret: Some("other".into()), ..settings() },
                true,
                &tokens,
                "User:alice",
                &renew_req(0),
                now,
            ),
            ResponseError::DelegationTokenNotFound,
        ),
    ];
    for ((records, response), error) in refusals {
        assert!(records.is_empty());
        assert_eq!(response.error_code, error.code());
    }
}

#[test]
fn expiry_now_removes_and_a_period_moves_the_expiry() {
    let (tokens, mac) = created("User:alice", CreateDelegationTokenRequest::default(), 0);
    let id = tokens.keys().next().unwrap().clone();
    let req = |period| {
        ExpireDelegationTokenRequest::default().with_hmac(mac.clone().into()).with_expiry_time_period_ms(period)
    };

    let (records, response) = expire(&settings(), true, &tokens, "User:alice", &req(-1), 50);
    assert_eq!((response.error_code, response.expiry_timestamp_ms), (0, 50));
    assert!(matches!(&records[..], [MetadataRecord::RemoveDelegationToken(r)] if r.token_id == id));

    let (records, response) = expire(&settings(), true, &tokens, "User:alice", &req(100), 50);
    assert_eq!(response.expiry_timestamp_ms, 150);
    let mut after = tokens.clone();
    apply(&mut after, &records);
    assert_eq!(after[&id].expiration_timestamp, 150);

    let (records, response) = expire(&settings(), true, &tokens, "User:bob", &req(-1), 50);
    assert!(records.is_empty());
    assert_eq!(response.error_code, ResponseError::DelegationTokenOwnerMismatch.code());
    // An expired token can still be removed at once, not moved.
    let late = DAY_MS + 1;
    assert_eq!(
        expire(&settings(), true, &tokens, "User:alice", &req(5), late).1.error_code,
        ResponseError::DelegationTokenExpired.code()
    );
    assert_eq!(expire(&settings(), true, &tokens, "User:alice", &req(-1), late).1.error_code, 0);
}

#[test]
fn the_sweep_removes_only_expired_tokens() {
    let (mut tokens, _) = created("User:alice", CreateDelegationTokenRequest::default(), 0);
    let (more, _) = created("User:bob", CreateDelegationTokenRequest::default(), 10 * DAY_MS);
    tokens.extend(more);
    let swept = sweep(&tokens, 2 * DAY_MS);
    assert_eq!(swept.len(), 1);
    apply(&mut tokens, &swept);
    assert_eq!(tokens.values().map(|t| t.owner.as_str()).collect::<Vec<_>>(), ["User:bob"]);
    assert!(sweep(&tokens, 10 * DAY_MS).is_empty());
}

#[test]
fn token_requests_are_refused_where_kafka_refuses_them() {
    use SecurityProtocol::*;
    assert!(allow_token_requests(SaslSsl, "User:alice", false, false));
    assert!(allow_token_requests(SaslPlaintext, "User:alice", false, false));
    assert!(allow_token_requests(Ssl, "User:CN=client", false, false));
    assert!(!allow_token_requests(Ssl, "User:ANONYMOUS", false, false));
    assert!(!allow_token_requests(Plaintext, "User:ANONYMOUS", false, false));
    assert!(!allow_token_requests(SaslSsl, "User:alice", true, false), "a token login");
    assert!(!allow_token_requests(Plaintext, "User:alice", true, true), "a token login, forwarded");
    assert!(allow_token_requests(Plaintext, "User:alice", false, true), "forwarded over PLAINTEXT");
}

#[test]
fn describe_shows_own_requested_renewable_and_authorized_tokens() {
    let req = CreateDelegationTokenRequest::default()
        .with_owner_principal_type(Some(str_bytes("User")))
        .with_owner_principal_name(Some(str_bytes("carol")))
        .with_renewers(vec![renewer("User", "bob")]);
    let (tokens, _) = created("User:admin", req, 0);
    let t = tokens.values().next().unwrap();
    let no = |_: &str| false;
    for who in ["User:carol", "User:admin", "User:bob"] {
        assert!(visible(t, who, None, no, no), "{who}");
    }
    assert!(!visible(t, "User:eve", None, no, no));
    assert!(visible(t, "User:eve", None, |id| id == t.token_id, no), "DESCRIBE on the token");
    assert!(visible(t, "User:eve", None, no, |owner| owner == "User:carol"), "DESCRIBE_TOKENS on its owner");
    let owners = ["User:dave".to_string()];
    assert!(!visible(t, "User:carol", Some(&owners), no, no), "not an owner asked for");
    let owners = ["User:bob".to_string()];
    assert!(visible(t, "User:carol", Some(&owners), no, no), "a renewer counts as an owner asked for");
}
