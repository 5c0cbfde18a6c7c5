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
