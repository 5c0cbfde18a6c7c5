//! Real child processes under the supervisor, on the real clock: exit
//! statuses, restart → quarantine → recovery, group kills, the stdio
//! hand-off, and no orphans when the supervising process is killed.
//!
//! Nothing here asserts that a quarantine *holds* at some instant (that needs
//! the real length, see `seed_supervision.rs`); these tests read the event
//! history, which a loaded machine cannot make racy. Every wait is a bounded
//! poll.
#![cfg(target_os = "linux")]

mod common;

use common::{config, within};
use fleetgate_supervise::{
    ChildError, ChildSpec, ChildStdio, Event, EventBus, SpawnedChild, StopSignal, SupervisionConfig, Supervisor,
    TaskState, run_child,
};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const PROBE_DIR_KEY: &str = "FLEETGATE_SUPERVISE_TEST_ORPHAN_PROBE_DIR";

fn sh(script: &str) -> ChildSpec {
    ChildSpec::new("sh").arg("-c").arg(script)
}

/// Fast backoff and a short quarantine: these tests want the expiry.
fn quick() -> Supervisor {
    let config = SupervisionConfig {
        backoff_seconds: vec![0.05],
        failure_budget: 3,
        quarantine_backoff_seconds: vec![0.5],
        ..config()
    };
    Supervisor::new(config.validate().unwrap(), EventBus::default())
}

/// A process is gone when it no longer exists or is a zombie (killed, and
/// waiting for a reaper the test does not control).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
            matches!(state, Some("Z" | "X"))
        }
    }
}

fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

async fn pid_in(path: &Path, what: &str) -> u32 {
    within(Duration::from_secs(20), what, || read_pid(path).is_some()).await;
    read_pid(path).unwrap()
}

async fn until_gone(pid: u32, what: &str) {
    within(Duration::from_secs(5), what, || gone(pid)).await;
}

/// Best-effort cleanup so a failing test does not leak a process.
struct KillOnDrop(Vec<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_statuses_map_to_finished_or_failed() {
    let never = StopSignal::never;
    assert!(run_child(&sh("exit 0"), never()).await.is_ok());

    let err = run_child(&sh("exit 7"), never()).await.unwrap_err();
    assert!(matches!(err, ChildError::Exited { code: 7, .. }), "{err:?}");
    assert_eq!(err.to_string(), "`sh` exited with status 7");

    let err = run_child(&sh("kill -9 $$"), never()).await.unwrap_err();
    assert!(matches!(err, ChildError::Signalled { signal: 9, name: "SIGKILL", .. }), "{err:?}");
    assert_eq!(err.to_string(), "`sh` was killed by signal 9 (SIGKILL)");

    let err = run_child(&sh("exit 0").permanent(true), never()).await.unwrap_err();
    assert!(matches!(err, ChildError::ExitedPermanent { .. }), "{err:?}");
    assert_eq!(err.to_string(), "`sh` exited with status 0, but a permanent child must keep running");

    let missing = "/nonexistent/fleetgate-test-program";
    let err = run_child(&ChildSpec::new(missing), never()).await.unwrap_err();
    assert!(matches!(err, ChildError::Spawn { .. }), "{err:?}");
    assert!(err.to_string().starts_with(&format!("spawn `{missing}`: ")), "{err}");

    // The spec's environment and working directory reach the child.
    let dir = tempfile::tempdir().unwrap();
    let spec = sh(r#"[ "$PROBE" = yes ] && [ "$(pwd -P)" = "$WANT" ] && [ -z "$HOME" ]"#)
        .env_clear()
        .env("PROBE", "yes")
        .env("WANT", dir.path().canonicalize().unwrap())
        .env("PATH", "/usr/bin:/bin")
        .current_dir(dir.path());
    run_child(&spec, never()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashing_child_is_restarted_quarantined_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    // Crashes on its first three runs (the budget), then stays up.
    let script = r#"n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count
        if [ "$n" -le 3 ]; then exit 3; fi
        echo $$ > pid.tmp && mv pid.tmp pid; exec sleep 1000"#;
    let supervisor = quick();
    supervisor.spawn_child("downstream", "gitea", sh(script).current_dir(dir.path())).unwrap();
    let pid = pid_in(&dir.path().join("pid"), "the fourth run's pid").await;
    let _cleanup = KillOnDrop(vec![pid]);
    within(Duration::from_secs(5), "the fourth run to be running", || {
        supervisor.task("downstream").is_some_and(|t| t.state == TaskState::Running && t.restarts == 3)
    })
    .await;
    assert!(!gone(pid));

    let events: Vec<Event> = supervisor.bus().recent();
    let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
    assert_eq!(
        kinds,
        [
            "task_started",
            "task_crashed",
            "task_restarting",
            "task_started",
            "task_crashed",
            "task_restarting",
            "task_started",
            "task_crashed",
            "flow_quarantined",
            "flow_quarantine_expired",
            "task_restarting",
            "task_started",
        ]
    );
    let crashes: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::TaskCrashed { error, .. } => Some(error.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(crashes, ["`sh` exited with status 3"; 3]);
    assert!(events.contains(&Event::FlowQuarantined {
        flow: "gitea".into(),
        task: "downstream".into(),
        retry_in_s: 0.5
    }));
    assert_eq!(
        events.last(),
        Some(&Event::TaskStarted { task: "downstream".into(), flow: "gitea".into(), attempt: 4 })
    );
    assert_eq!(supervisor.task("downstream").unwrap().budget_left, 3);

    let report = supervisor.cancel_flow("gitea").await;
    assert_eq!(report.stopped, ["downstream"]);
    until_gone(pid, "the child after its flow was cancelled").await;
    assert_eq!(std::fs::read_to_string(dir.path().join("count")).unwrap().trim(), "4", "no run after the cancel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_kills_the_whole_group_grandchildren_included() {
    let dir = tempfile::tempdir().unwrap();
    // The grandchild ignores SIGTERM, so only the group SIGKILL that ends
    // every run can take it down.
    let script = r#"(trap '' TERM; exec sleep 1000) & echo $! > gc.tmp && mv gc.tmp grandchild
        echo $$ > c.tmp && mv c.tmp child; wait"#;
    let supervisor = quick();
    supervisor.spawn_child("worker", "f", sh(script).current_dir(dir.path())).unwrap();
    let child = pid_in(&dir.path().join("child"), "the child's pid").await;
    let grandchild = pid_in(&dir.path().join("grandchild"), "the grandchild's pid").await;
    let _cleanup = KillOnDrop(vec![child, grandchild]);
    assert!(!gone(child) && !gone(grandchild));
    let report = supervisor.cancel_flow("f").await;
    assert_eq!(report.stopped, ["worker"]);
    until_gone(child, "the child").await;
    until_gone(grandchild, "the grandchild").await;
    assert_eq!(supervisor.bus().recent().iter().filter(|e| e.kind() == "task_crashed").count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_ignores_sigterm_is_killed_after_its_grace() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"trap '' TERM; echo $$ > c.tmp && mv c.tmp child; while :; do sleep 1; done"#;
    let grace = Duration::from_millis(300);
    let supervisor = quick();
    supervisor.spawn_child("stubborn", "f", sh(script).current_dir(dir.path()).term_grace(grace)).unwrap();
    let child = pid_in(&dir.path().join("child"), "the child's pid").await;
    let _cleanup = KillOnDrop(vec![child]);
    let started = Instant::now();
    let report = supervisor.cancel_flow("f").await;
    assert!(started.elapsed() >= grace, "SIGKILL came before the grace ran out");
    assert_eq!(report.stopped, ["stubborn"], "{report:?}");
    until_gone(child, "the child").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_run_hands_its_pipes_to_the_caller() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<SpawnedChild>();
    let spec = ChildSpec::new("cat").stdin(ChildStdio::Piped).stdout(ChildStdio::Piped).permanent(true).on_spawn(
        move |child| {
            let _ = tx.send(child);
        },
    );
    let supervisor = quick();
    supervisor.spawn_child("echo", "f", spec).unwrap();
    let recv = async |rx: &mut tokio::sync::mpsc::UnboundedReceiver<SpawnedChild>| {
        tokio::time::timeout(Duration::from_secs(20), rx.recv()).await.expect("a run's pipes").unwrap()
    };
    let first = recv(&mut rx).await;
    let (mut stdin, stdout) = (first.stdin.unwrap(), first.stdout.unwrap());
    stdin.write_all(b"hello\n").await.unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).await.unwrap();
    assert_eq!(line, "hello\n");
    // Closing stdin makes `cat` exit 0: for a permanent child that is a
    // failure, and the restarted run hands over fresh pipes.
    drop(stdin);
    let second = recv(&mut rx).await;
    assert_ne!(second.pid, first.pid);
    assert!(second.stdin.is_some() && second.stdout.is_some());
    let crash = supervisor.bus().recent().into_iter().find(|e| e.kind() == "task_crashed").unwrap();
    assert!(matches!(&crash, Event::TaskCrashed { error, .. } if error.contains("permanent child")), "{crash:?}");
    let _cleanup = KillOnDrop(vec![second.pid]);
    supervisor.cancel_all().await;
    until_gone(second.pid, "the second run").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_supervising_process_leaves_no_child_behind() {
    let dir = tempfile::tempdir().unwrap();
    let mut helper = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["orphan_probe_helper", "--exact", "--ignored", "--nocapture", "--test-threads", "1"])
        .env(PROBE_DIR_KEY, dir.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _helper_cleanup = KillOnDrop(vec![helper.id()]);
    let child = pid_in(&dir.path().join("child"), "the helper's child pid").await;
    let _cleanup = KillOnDrop(vec![child]);
    assert!(!gone(child), "the supervised child should be running");
    // SIGKILL: the supervising process gets no chance to clean up.
    helper.kill().unwrap();
    helper.wait().unwrap();
    until_gone(child, "the orphaned child (parent-death signal)").await;
}

/// Run by `killing_the_supervising_process_leaves_no_child_behind` in a
/// process of its own: supervise a long-lived child, write its pid, wait to
/// be killed. Does nothing when run any other way.
#[test]
#[ignore = "helper process, re-executed by killing_the_supervising_process_leaves_no_child_behind"]
fn orphan_probe_helper() {
    #[expect(clippy::disallowed_methods, reason = "test harness re-exec: the parent test passes its tempdir here")]
    let Some(dir) = std::env::var_os(PROBE_DIR_KEY) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    runtime.block_on(async move {
        let supervisor = Supervisor::new(config().validate().unwrap(), EventBus::default());
        let spec = sh("echo $$ > c.tmp && mv c.tmp child; exec sleep 1000").current_dir(&dir);
        supervisor.spawn_child("sleeper", "probe", spec).unwrap();
        tokio::time::sleep(Duration::from_secs(1000)).await;
    });
}
