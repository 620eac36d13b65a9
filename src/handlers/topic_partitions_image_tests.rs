//! DescribeTopicPartitions from a metadata image: what each partition shows (leader, replicas,
//! ISR, ELR, last known ELR, offline replicas), the cursor and partition limit, unknown and
//! invalid topics, invalid cursors, and authorization.

use kafka_protocol::messages::describe_topic_partitions_request::{self as request, TopicRequest};
use kafka_protocol::messages::BrokerId;
use uuid::Uuid;

use super::super::metadata_image::tests::{broker, image, partition, DIR_A, DIR_B, LISTENER};
use super::*;
use crate::metadata::image::{BrokerImage, PartitionImage};
use crate::security::acl::AclBinding;
use crate::security::acl_store::{AclStore, STANDARD_AUTHORIZER};

fn three_brokers() -> Vec<BrokerImage> {
    (1..=3).map(|id| broker(id, false, &[LISTENER], &[])).collect()
}

/// `n` partitions led by 1, replicas and ISR [1, 2, 3].
fn healthy(n: usize) -> Vec<PartitionImage> {
    (0..n).map(|_| partition(1, &[1, 2, 3], &[1, 2, 3])).collect()
}

fn ask(names: &[&str], limit: i32, cursor: Option<(&str, i32)>) -> DescribeTopicPartitionsRequest {
    DescribeTopicPartitionsRequest::default()
        .with_topics(names.iter().map(|n| TopicRequest::default().with_name(TopicName(str_bytes(n)))).collect())
        .with_response_partition_limit(limit)
        .with_cursor(
            cursor.map(|(t, p)| {
                request::Cursor::default().with_topic_name(TopicName(str_bytes(t))).with_partition_index(p)
            }),
        )
}

fn open() -> Authz<'static> {
    Authz::new(None, "User:ANONYMOUS", "127.0.0.1".parse().unwrap())
}

fn ids(nodes: &[BrokerId]) -> Vec<i32> {
    nodes.iter().map(|b| b.0).collect()
}

fn name(t: &DescribeTopicPartitionsResponseTopic) -> &str {
    t.name.as_ref().map_or("", |n| n.0.as_str())
}

/// (topic, [partition indexes]) of each topic answered, and the next cursor (topic, partition).
type Page = (Vec<(String, Vec<i32>)>, Option<(String, i32)>);

fn pages(r: &DescribeTopicPartitionsResponse) -> Page {
    let topics =
        r.topics.iter().map(|t| (name(t).to_string(), t.partitions.iter().map(|p| p.partition_index).collect()));
    let cursor = r.next_cursor.as_ref().map(|c| (c.topic_name.0.as_str().to_string(), c.partition_index));
    (topics.collect(), cursor)
}

#[test]
fn partitions_show_the_images_leader_replicas_isr_elr_and_offline_replicas() {
    let mut brokers = three_brokers();
    brokers[2].fenced = true; // broker 3: fenced
    brokers.push(broker(5, false, &["OTHER"], &[])); // broker 5: no endpoint on the client's listener
    brokers.push(broker(6, false, &[LISTENER], &[DIR_A])); // broker 6: only DIR_A online
    let mut below_min_isr = partition(1, &[3, 1, 2], &[1]);
    below_min_isr.eligible_leader_replicas = vec![2];
    below_min_isr.last_known_elr = vec![3];
    let mut no_leader = partition(-1, &[2, 3], &[]);
    no_leader.eligible_leader_replicas = vec![2, 3];
    let unreachable_leader = partition(5, &[5, 1], &[5, 1]);
    let mut dirs = partition(6, &[6, 4, 1, 2], &[6, 1]); // broker 4 is not registered
    dirs.directories = vec![DIR_A, DIR_B, Uuid::from_u64_pair(0, 2), Uuid::from_u64_pair(0, 1)];
    let mut dir_gone = partition(6, &[6], &[6]);
    dir_gone.directories = vec![DIR_B];
    let image = image(brokers, vec![("t", vec![below_min_isr, no_leader, unreachable_leader, dirs, dir_gone])]);

    let r = describe(&image, &open(), LISTENER, 2000, &ask(&["t"], 2000, None));
    assert_eq!(r.topics.len(), 1);
    let t = &r.topics[0];
    assert_eq!((t.error_code, name(t), t.topic_id, t.is_internal), (0, "t", Uuid::from_u128(1), false));
    assert_eq!(t.topic_authorized_operations, 3576, "every topic operation, without an authorizer");
    let rows: Vec<_> = t
        .partitions
        .iter()
        .map(|p| {
            let elr = p.eligible_leader_replicas.as_deref().map(ids);
            let last_known = p.last_known_elr.as_deref().map(ids);
            (p.partition_index, p.leader_id.0, ids(&p.replica_nodes), ids(&p.isr_nodes), elr, last_known)
        })
        .collect();
    let some = |v: &[i32]| Some(v.to_vec());
    assert_eq!(
        rows,
        vec![
            (0, 1, vec![3, 1, 2], vec![1], some(&[2]), some(&[3])),
            (1, -1, vec![2, 3], vec![], some(&[2, 3]), some(&[])),
            (2, -1, vec![5, 1], vec![5, 1], some(&[]), some(&[])),
            (3, 6, vec![6, 4, 1, 2], vec![6, 1], some(&[]), some(&[])),
            (4, 6, vec![6], vec![6], some(&[]), some(&[])),
        ],
        "replicas in assignment order, ISR and ELR as they are; the leader -1 when it has no endpoint on the listener"
    );
    let offline: Vec<_> = t.partitions.iter().map(|p| ids(&p.offline_replicas)).collect();
    assert_eq!(
        offline,
        vec![vec![3], vec![3], vec![5], vec![4, 1], vec![6]],
        "fenced, no listener, not registered, on a LOST directory, on a directory its broker does not list"
    );
    assert!(t.partitions.iter().all(|p| p.error_code == 0 && p.leader_epoch == 4));
}

#[test]
fn the_partition_limit_pages_through_topics_with_the_cursor() {
    let image = image(three_brokers(), vec![("a", healthy(3)), ("b", healthy(2)), ("c", healthy(1))]);
    let page =
        |names: &[&str], limit, cursor| pages(&describe(&image, &open(), LISTENER, 2000, &ask(names, limit, cursor)));
    let owned = |v: Vec<(&str, Vec<i32>)>| v.into_iter().map(|(t, p)| (t.to_string(), p)).collect::<Vec<_>>();
    let at = |t: &str, p| Some((t.to_string(), p));

    // Every topic, two partitions a page.
    assert_eq!(page(&[], 2, None), (owned(vec![("a", vec![0, 1])]), at("a", 2)));
    assert_eq!(page(&[], 2, Some(("a", 2))), (owned(vec![("a", vec![2]), ("b", vec![0])]), at("b", 1)));
    assert_eq!(page(&[], 2, Some(("b", 1))), (owned(vec![("b", vec![1]), ("c", vec![0])]), None));
    // The limit reached at a topic's end: the next topic, from its first partition.
    assert_eq!(page(&[], 3, None), (owned(vec![("a", vec![0, 1, 2])]), at("b", 0)));
    // Named topics the same way; topics before the cursor's are left out.
    assert_eq!(page(&["c", "a", "b"], 4, Some(("b", 0))), (owned(vec![("b", vec![0, 1]), ("c", vec![0])]), None));
    // A cursor past the topic's last partition: none of it.
    assert_eq!(page(&["a"], 5, Some(("a", 7))), (owned(vec![("a", vec![])]), None));
    // At least one partition; the broker's max.request.partition.size.limit caps the request's.
    assert_eq!(page(&["a"], 0, None), (owned(vec![("a", vec![0])]), at("a", 1)));
    let capped = describe(&image, &open(), LISTENER, 2, &ask(&[], 2000, None));
    assert_eq!(pages(&capped), (owned(vec![("a", vec![0, 1])]), at("a", 2)));
}

#[test]
fn unknown_invalid_internal_and_repeated_topics() {
    let image = image(three_brokers(), vec![("__consumer_offsets", healthy(1)), ("t", healthy(1))]);
    let names = ["t", "nope", "t", "bad/name", "__consumer_offsets", "__transaction_state"];
    let r = describe(&image, &open(), LISTENER, 2000, &ask(&names, 2000, None));
    let got: Vec<_> =
        r.topics.iter().map(|t| (name(t), t.error_code, t.topic_id, t.is_internal, t.partitions.len())).collect();
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    let invalid = ResponseError::InvalidTopicException.code();
    assert_eq!(
        got,
        vec![
            ("__consumer_offsets", 0, Uuid::from_u128(1), true, 1),
            ("__transaction_state", unknown, Uuid::nil(), true, 0),
            ("bad/name", invalid, Uuid::nil(), false, 0),
            ("nope", unknown, Uuid::nil(), false, 0),
            ("t", 0, Uuid::from_u128(2), false, 1),
        ],
        "in name order, each once; unknown topics without an id"
    );
    assert!(r.topics.iter().all(|t| t.topic_authorized_operations == 3576));
    assert!(r.next_cursor.is_none());
    let every = describe(&image, &open(), LISTENER, 2000, &ask(&[], 2000, None));
    assert_eq!(every.topics.iter().map(name).collect::<Vec<_>>(), vec!["__consumer_offsets", "t"]);
}

#[test]
fn an_invalid_cursor_is_an_invalid_request() {
    let image = image(three_brokers(), vec![("a", healthy(2)), ("b", healthy(2))]);
    let invalid = ResponseError::InvalidRequest.code();
    for req in [ask(&["a", "b"], 10, Some(("a", -1))), ask(&["b", "a"], 10, Some(("c", 0)))] {
        let r = describe(&image, &open(), LISTENER, 2000, &req);
        let got: Vec<_> = r.topics.iter().map(|t| (name(t), t.error_code, t.partitions.len())).collect();
        assert_eq!(got.iter().map(|g| g.1).collect::<Vec<_>>(), vec![invalid, invalid], "{got:?}");
        assert_eq!(
            got.iter().map(|g| g.0).collect::<Vec<_>>(),
            req.topics.iter().map(|t| t.name.0.as_str()).collect::<Vec<_>>()
        );
        assert!(r.topics.iter().all(|t| t.topic_id.is_nil() && t.partitions.is_empty()) && r.next_cursor.is_none());
    }
    let r = describe(&image, &open(), LISTENER, 2000, &ask(&[], 10, Some(("a", -1))));
    assert!(r.topics.is_empty() && r.next_cursor.is_none());
    // Listing every topic, the cursor's topic need not exist: the topics after it.
    let r = describe(&image, &open(), LISTENER, 2000, &ask(&[], 10, Some(("aa", 0))));
    assert_eq!(r.topics.iter().map(name).collect::<Vec<_>>(), vec!["b"]);
}

#[test]
fn topics_need_describe() {
    let dir = tempfile::tempdir().unwrap();
    let mut props = crate::config::Properties::new();
    props.insert("authorizer.class.name".into(), STANDARD_AUTHORIZER.into());
    let store = AclStore::open(&props, dir.path()).unwrap().unwrap();
    let allow = |name: &str, op| AclBinding {
        id: Uuid::nil(),
        resource_type: acl::TOPIC,
        resource_name: name.into(),
        pattern_type: acl::LITERAL,
        principal: "User:alice".into(),
        host: "*".into(),
        operation: op,
        permission: acl::ALLOW,
    };
    assert!(store
        .create(vec![allow("a", acl::DESCRIBE), allow("c", acl::DESCRIBE), allow("c", acl::READ)])
        .iter()
        .all(Result::is_ok));
    let alice = Authz::new(Some(&store), "User:alice", "127.0.0.1".parse().unwrap());
    let image = image(three_brokers(), vec![("a", healthy(1)), ("b", healthy(1)), ("c", healthy(2))]);

    let every = describe(&image, &alice, LISTENER, 2000, &ask(&[], 2000, None));
    assert_eq!(every.topics.iter().map(name).collect::<Vec<_>>(), vec!["a", "c"], "the others left out");
    let ops: Vec<_> = every.topics.iter().map(|t| t.topic_authorized_operations).collect();
    assert_eq!(ops, vec![1 << acl::DESCRIBE, (1 << acl::DESCRIBE) | (1 << acl::READ)]);

    let named = describe(&image, &alice, LISTENER, 2000, &ask(&["b", "zz", "c", "a"], 2000, None));
    let got: Vec<_> = named.topics.iter().map(|t| (name(t), t.error_code, t.topic_id)).collect();
    let refused = ResponseError::TopicAuthorizationFailed.code();
    assert_eq!(
        got,
        vec![
            ("a", 0, Uuid::from_u128(1)),
            ("c", 0, Uuid::from_u128(3)),
            ("b", refused, Uuid::nil()),
            ("zz", refused, Uuid::nil())
        ],
        "refused topics after the others, without id, whether they exist or not"
    );
    assert_eq!(named.topics[2].topic_authorized_operations, i32::MIN);

    // Paging: the cursor lands on the next topic allowed; a refused one is reported on the page
    // that reached it.
    let paged = describe(&image, &alice, LISTENER, 2000, &ask(&["a", "b", "c"], 1, None));
    let got: Vec<_> = paged.topics.iter().map(|t| (name(t), t.error_code)).collect();
    assert_eq!(got, vec![("a", 0), ("b", refused)]);
    let cursor = paged.next_cursor.as_ref().map(|c| (c.topic_name.0.as_str(), c.partition_index));
    assert_eq!(cursor, Some(("c", 0)));
}
