//! The downstream guard (`fleetgate debug downstream-guard`, `fleetgate_supervise::guard`)
//! between the supervisor and its command: the supervisor judges a guarded run's exit as if
//! the command were its own child — a status passes through, a signal is re-raised.

use fleetgate_supervise::{ChildError, ChildSpec, StopSignal, run_child};

fn guarded(script: &str) -> ChildSpec {
    ChildSpec::new("sh").arg("-c").arg(script).guard(crate::support::bin(), ["debug", "downstream-guard"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guarded_run_exits_as_its_command_did() {
    assert!(run_child(&guarded("exit 0"), StopSignal::never()).await.is_ok());

    let err = run_child(&guarded("exit 7"), StopSignal::never()).await.unwrap_err();
    assert!(matches!(err, ChildError::Exited { code: 7, .. }), "{err:?}");

    let err = run_child(&guarded("kill -9 $$"), StopSignal::never()).await.unwrap_err();
    assert!(matches!(err, ChildError::Signalled { signal: 9, name: "SIGKILL", .. }), "{err:?}");

    let err = run_child(&guarded("kill -TERM $$"), StopSignal::never()).await.unwrap_err();
    assert!(matches!(err, ChildError::Signalled { signal: 15, name: "SIGTERM", .. }), "{err:?}");

    // A command the guard cannot start: the guard says so and fails; the run fails.
    let missing = ChildSpec::new("/nonexistent/fleetgate-guarded-program")
        .guard(crate::support::bin(), ["debug", "downstream-guard"]);
    let err = run_child(&missing, StopSignal::never()).await.unwrap_err();
    assert!(matches!(err, ChildError::Exited { .. }), "{err:?}");
}

/// Whether `pid` is gone: no such process, or a zombie nobody has reaped yet.
fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_or(true, |stat| fleetgate_host::procfs::parse_pid_stat(&stat).is_none_or(|s| s.zombie))
}

/// A command that ends by itself leaving a process behind in a session of its own: the
/// guard kills it before the run ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_guarded_command_leaves_running_ends_with_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("left.pid");
    let script = format!("setsid sleep 600 & echo $! > {0}.part && mv {0}.part {0}; exit 0", pidfile.display());
    assert!(run_child(&guarded(&script), StopSignal::never()).await.is_ok());
    let left: u32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !gone(left) && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let survived = !gone(left);
    if survived {
        let _ = std::process::Command::new("kill").args(["-KILL", &left.to_string()]).status();
    }
    assert!(!survived, "{left}, started by the command in a session of its own, outlived its run");
}
