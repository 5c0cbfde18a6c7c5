//! Pruning history: dead, expired and stopped worker rows and stopped runtime rows
//! older than the age asked for go; a live lease and a running server's row never do.

use crate::engines::Fixture;
use crate::support::{TTL, attach, now, renewal, runtime_row};
use fleetgate_core::runtime::RuntimeStatus;

pub fn pruning_deletes_old_history_and_never_a_live_row(fx: &Fixture) {
    let store = fx.open();
    let (hour, day) = (3_600, 86_400);
    // Registered at `now`; renewed, stopped or left alone, then judged `day` later.
    for id in ["w-live", "w-expired", "w-stopped", "w-recent-stop", "w-young-expiry"] {
        attach(&*store, id);
    }
    let judged_at = now().plus_seconds(day);
    // Renewed a minute before the judgement: live, whatever the age asked.
    assert!(store.heartbeat(&renewal("w-live", 1), judged_at.plus_seconds(-60)).unwrap().renewed);
    store.deregister_worker("w-stopped", now()).unwrap();
    // Stopped a little while ago: its last heartbeat is recent.
    assert!(store.heartbeat(&renewal("w-recent-stop", 1), judged_at.plus_seconds(-600)).unwrap().renewed);
    store.deregister_worker("w-recent-stop", judged_at).unwrap();
    // Expired (silent for more than its TTL), but younger than the age asked.
    let young = judged_at.plus_seconds(-(TTL as i64) - 120);
    assert!(store.heartbeat(&renewal("w-young-expiry", 1), young).unwrap().renewed);

    let pruned = store.prune_workers(hour, judged_at).unwrap();
    assert_eq!(pruned, ["w-expired", "w-stopped"], "the day-old expired and stopped rows");
    let left: Vec<String> = store.list_workers().unwrap().into_iter().map(|w| w.worker_identity).collect();
    assert_eq!(left, ["w-live", "w-recent-stop", "w-young-expiry"]);
    assert!(store.prune_workers(hour, judged_at).unwrap().is_empty(), "nothing more to prune");

    // Age zero: every expired or stopped row, still never the live one.
    let pruned = store.prune_workers(0, judged_at).unwrap();
    assert_eq!(pruned, ["w-recent-stop", "w-young-expiry"]);
    let left: Vec<String> = store.list_workers().unwrap().into_iter().map(|w| w.worker_identity).collect();
    assert_eq!(left, ["w-live"]);
    // The live row renews as before.
    assert!(store.heartbeat(&renewal("w-live", 1), judged_at).unwrap().renewed);
}

pub fn pruning_runtime_rows_deletes_only_old_stopped_ones(fx: &Fixture) {
    let store = fx.open();
    let day = 86_400;
    let (running, stopped, recent) =
        (runtime_row("gitea-author", 1001), runtime_row("gitea-reviewer", 1002), runtime_row("gitea-merger", 1003));
    for row in [&running, &stopped, &recent] {
        store.upsert_runtime(row).unwrap();
    }
    let judged_at = now().plus_seconds(2 * day);
    store.mark_runtime_stopped(&stopped.runtime_id, now()).unwrap();
    assert!(store.touch_runtime(&recent.runtime_id, judged_at.plus_seconds(-60)).unwrap());
    store.mark_runtime_stopped(&recent.runtime_id, judged_at).unwrap();

    // The running row has not been refreshed for two days: stale, but not history.
    assert_eq!(store.prune_runtime(day, judged_at).unwrap(), [stopped.runtime_id.as_str()]);
    let left = store.list_runtime().unwrap();
    assert_eq!(
        left.iter().map(|r| r.runtime_id.as_str()).collect::<Vec<_>>(),
        [&running.runtime_id, &recent.runtime_id]
    );
    assert_eq!(left[0].status, RuntimeStatus::Running);
    assert_eq!(store.prune_runtime(0, judged_at).unwrap(), [recent.runtime_id.as_str()]);
    assert_eq!(store.list_runtime().unwrap().len(), 1, "the running row stays");
}
