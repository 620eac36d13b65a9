//! The `ketch` binary reads `KETCH_<NAME>` environment variables as broker properties (between
//! the properties file and `--override`), and `ketch --health-check HOST:PORT` reports whether a
//! broker accepts connections there: what the container image relies on.

mod common;

use std::process::Command;

use common::{call, TestBroker};
use kafka_protocol::messages::describe_configs_request::{DescribeConfigsRequest, DescribeConfigsResource};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;

/// (value, source) of each broker config named, from DescribeConfigs on broker 1.
fn broker_configs(broker: &TestBroker, names: &[&str]) -> Vec<(String, Option<String>, i8)> {
    let mut s = broker.connect();
    let request = DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
        .with_resource_type(4)
        .with_resource_name(StrBytes::from_static_str("1"))
        .with_configuration_keys(Some(names.iter().map(|n| StrBytes::from_string(n.to_string())).collect()))]);
    let ResponseKind::DescribeConfigs(response) =
        call(&mut s, ApiKey::DescribeConfigs, 4, RequestKind::DescribeConfigs(request))
    else {
        panic!("not a DescribeConfigs response")
    };
    let mut out: Vec<_> = response.results[0]
        .configs
        .iter()
        .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string()), c.config_source))
        .collect();
    out.sort();
    out
}

#[test]
fn environment_variables_set_properties_and_overrides_win() {
    let broker = TestBroker::start_with_env(
        tempfile::tempdir().unwrap(),
        &["log.retention.hours=48"],
        &[
            ("KETCH_NUM_PARTITIONS", "3"),
            ("KETCH_LOG_RETENTION_HOURS", "24"),
            ("KETCH_KETCH_ACKS_ALL_FSYNC", "false"),
            ("KETCH_NO_SUCH_CONFIG", "1"),
        ],
    );
    let got =
        broker_configs(&broker, &["num.partitions", "log.retention.hours", "ketch.acks.all.fsync", "no.such.config"]);
    let static_config = 4;
    assert_eq!(
        got,
        vec![
            ("ketch.acks.all.fsync".to_string(), Some("false".to_string()), static_config),
            ("log.retention.hours".to_string(), Some("48".to_string()), static_config),
            ("num.partitions".to_string(), Some("3".to_string()), static_config),
        ],
        "KETCH_* variables are static configs, --override beats them, unknown names are not properties"
    );
}

#[test]
fn health_check_reports_whether_a_broker_listens() {
    let broker = TestBroker::start(&[]);
    let check =
        |addr: String| Command::new(env!("CARGO_BIN_EXE_ketch")).args(["--health-check", &addr]).status().unwrap();
    assert!(check(format!("127.0.0.1:{}", broker.port)).success(), "a running broker is healthy");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap(); // bound, then dropped
    assert!(!check(closed.to_string()).success(), "nothing listens on {closed}: unhealthy");
}
