//! The `ketch` process halts when one of its parts panics (`ketch::fatal`), as Kafka's fatal
//! fault handler halts it, and goes on when a client connection's work panics. Each case runs in
//! a child process of this test binary (`KETCH_FATAL_CASE` names it), with the panic hook the
//! binary installs; the parent checks how the child ended. No libtest harness: the children
//! must run exactly one case, and a halt ends the whole process.

use std::process::Command;
use std::time::Duration;

const CASE: &str = "KETCH_FATAL_CASE";

/// The cases: (name, halts).
const CASES: &[(&str, bool)] = &[
    ("thread", true),
    ("task", true),
    ("blocking", true),
    ("client_task", false),
    ("client_spawned_without_scope", true),
];

fn main() {
    match std::env::var(CASE) {
        Ok(case) => child(&case),
        Err(_) => parent(),
    }
}

fn parent() {
    let exe = std::env::current_exe().expect("own path");
    let mut failures = Vec::new();
    for (case, halts) in CASES {
        let out = Command::new(&exe).env(CASE, case).output().expect("child runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let halted = out.status.code() == Some(1) && stderr.contains("encountered fatal fault: a panic in thread");
        let survived = out.status.success() && stderr.contains("boom") && !stderr.contains("fatal fault");
        let ok = if *halts { halted } else { survived };
        println!("case {case}: {}", if ok { "ok" } else { "FAILED" });
        if !ok {
            failures.push(format!("{case} (halts: {halts}): {:?}\n{stderr}", out.status));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!("test result: ok. {} cases passed", CASES.len());
}

fn child(case: &str) {
    ketch::fatal::install();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        match case {
            "thread" => {
                let _ = std::thread::Builder::new().name("component".into()).spawn(|| panic!("boom")).unwrap().join();
            }
            "task" => {
                let _ = tokio::spawn(async { panic!("boom") }).await;
            }
            "blocking" => {
                let _ = tokio::task::spawn_blocking(|| panic!("boom")).await;
            }
            "client_task" => {
                let done = tokio::spawn(ketch::fatal::client_scope(async { panic!("boom") })).await;
                assert!(done.unwrap_err().is_panic(), "the client's task ended with its panic");
            }
            "client_spawned_without_scope" => {
                // A task a client's work spawns is not in its scope unless wrapped again.
                let _ = tokio::spawn(ketch::fatal::client_scope(async {
                    let _ = tokio::spawn(async { panic!("boom") }).await;
                }))
                .await;
            }
            other => panic!("no case {other}"),
        }
        // A halting case never gets here.
        tokio::time::sleep(Duration::from_millis(50)).await;
    });
}
