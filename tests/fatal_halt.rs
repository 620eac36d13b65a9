//! The `ketch` process halts when one of its parts panics (`ketch::fatal`), as Kafka's fatal
//! fault handler halts it, and goes on when a client connection's work panics. Each case runs in
//! a child process of this test binary (`KETCH_FATAL_CASE` names it), with the panic hook the
//! binary installs; the parent checks how the child ended. A child is this test binary run with
//! only its own test selected (a halt ends the whole process).

use std::process::Command;
use std::time::Duration;

const CASE: &str = "KETCH_FATAL_CASE";

#[test]
fn thread_halts() {
    run("thread_halts", "thread", true);
}

#[test]
fn task_halts() {
    run("task_halts", "task", true);
}

#[test]
fn blocking_halts() {
    run("blocking_halts", "blocking", true);
}

#[test]
fn client_task_ends_alone() {
    run("client_task_ends_alone", "client_task", false);
}

#[test]
fn client_spawned_without_scope_halts() {
    run("client_spawned_without_scope_halts", "client_spawned_without_scope", true);
}

/// In the child (`KETCH_FATAL_CASE` set) runs the case; in the parent runs this test binary again
/// with only this test selected and checks how that child ended.
fn run(test: &str, case: &str, halts: bool) {
    if let Ok(wanted) = std::env::var(CASE) {
        assert_eq!(wanted, case, "the child runs only its own test");
        child(case);
        return;
    }
    let exe = std::env::current_exe().expect("own path");
    let out = Command::new(&exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CASE, case)
        .output()
        .expect("child runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let halted = out.status.code() == Some(1) && stderr.contains("encountered fatal fault: a panic in thread");
    let survived = out.status.success() && stderr.contains("boom") && !stderr.contains("fatal fault");
    let ok = if halts { halted } else { survived };
    assert!(ok, "{case} (halts: {halts}): {:?}\n{stderr}", out.status);
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
