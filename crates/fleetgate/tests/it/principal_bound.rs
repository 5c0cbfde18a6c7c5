//! A principal's bound across a member's replicas (issue 46), raced: two replicas of one
//! member on one store each admit a principal's first attachment before either is registered
//! — the window a count taken before registering cannot see — and the count taken again after
//! registering leaves no set over the bound standing. A stateless client's shared worker,
//! found by the second replica, is no new attachment.

use fleetgate_config::FleetConfig;
use fleetgate_control::gate::Gate;
use fleetgate_control::serve::{FleetControl, Identity, Transport};
use fleetgate_core::ManualClock;
use fleetgate_core::Timestamp;
use fleetgate_core::env::EnvSnapshot;
use fleetgate_core::runtime::{Cohort, CohortSource};
use fleetgate_gateway::{AttachmentId, ClientAttach, ControlPlane};
use fleetgate_store::Store;
use std::sync::Arc;

const CONFIG: &str = "[fleet]\nname = \"bound\"\n\n[[members]]\nnamespace = \"gitea-author\"\nprofile = \
                      \"prgs-author\"\nrole = \"author\"\nreplicas = 2\n";

/// Two replicas of the author on one SQLite store, both HTTP gateways.
fn replicas(dir: &std::path::Path) -> (Arc<dyn Store>, [FleetControl; 2]) {
    let store = fleetgate_store::open(&dir.join("s.sqlite3").display().to_string()).unwrap();
    let config = FleetConfig::parse(CONFIG, "bound.toml").unwrap();
    let clock = Arc::new(ManualClock::new(Timestamp::ymd_hms(2026, 12, 6, 12, 0, 0)));
    let gate = Gate::new(Arc::new(config.clone()), store.clone(), Arc::new(crate::rules::Nothing));
    let member = config.member("prgs-author").unwrap().clone();
    let replica = |pid: i64| {
        let cohort = Cohort { cohort_id: Some("bound-a".into()), cohort_source: CohortSource::ExplicitEnv };
        let identity = Identity::new(member.clone(), pid, "b".into(), cohort, (None, None), None);
        FleetControl::new(identity, Transport::Http, EnvSnapshot::default(), clock.clone(), gate.clone())
    };
    (store, [replica(5100), replica(5101)])
}

fn client(name: &str, stateless: bool) -> ClientAttach {
    ClientAttach {
        client_name: name.into(),
        client_version: "1".into(),
        protocol_version: if stateless { "2026-07-28" } else { "2025-11-25" }.into(),
        principal: Some("alice".into()),
        stateless,
    }
}

/// On a runtime of the test's own (the heartbeats run on it).
fn on_runtime(story: impl FnOnce() + Send + 'static) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    runtime.block_on(async { tokio::task::spawn_blocking(story).await.unwrap() });
}

#[test]
fn first_attachments_racing_on_two_replicas_never_both_stand_over_the_bound() {
    on_runtime(|| {
        let dir = tempfile::tempdir().unwrap();
        let (store, [one, two]) = replicas(dir.path());
        // Alice may hold one attachment of the member. Both first requests are counted before
        // either is registered: both pass.
        assert_eq!(one.admit_principal("alice", 1, None), Ok(()));
        assert_eq!(two.admit_principal("alice", 1, None), Ok(()));
        one.on_client_attach(AttachmentId(1), &client("cursor", false)).unwrap();
        two.on_client_attach(AttachmentId(1), &client("claude-code", false)).unwrap();
        // Counted again once registered: the set of two over the bound does not stand.
        let confirmed =
            [one.confirm_principal(AttachmentId(1), "alice", 1), two.confirm_principal(AttachmentId(1), "alice", 1)];
        let standing = confirmed.iter().filter(|c| c.is_ok()).count();
        assert!(standing <= 1, "both attachments stand over a bound of one: {confirmed:?}");
        for (control, confirmed) in [&one, &two].into_iter().zip(&confirmed) {
            if let Err(why) = confirmed {
                assert!(why.to_string().contains("maximum of 1 attachments across the member's 2 replicas"), "{why}");
                // The gateway then ends the attachment: its worker is retired.
                control.on_detach(AttachmentId(1), "principal_bound");
            }
        }
        let live = store.list_workers().unwrap().into_iter().filter(|w| w.status.as_str() == "active").count();
        assert_eq!(live, standing, "no refused attachment's worker stays active");
        // With what stands counted, the next one is judged by the bound as it is.
        one.on_client_attach(AttachmentId(2), &client("codex", false)).unwrap();
        let next = one.confirm_principal(AttachmentId(2), "alice", 1);
        assert_eq!(next.is_ok(), standing == 0, "{next:?}");
        one.on_shutdown("test");
        two.on_shutdown("test");
    });
}

#[test]
fn a_shared_worker_found_by_another_replica_is_no_new_attachment() {
    on_runtime(|| {
        let dir = tempfile::tempdir().unwrap();
        let (store, [one, two]) = replicas(dir.path());
        one.on_client_attach(AttachmentId(1), &client("cursor", true)).unwrap();
        assert_eq!(one.confirm_principal(AttachmentId(1), "alice", 1), Ok(()), "the first, within the bound");
        two.on_client_attach(AttachmentId(1), &client("cursor", true)).unwrap();
        assert_eq!(two.confirm_principal(AttachmentId(1), "alice", 1), Ok(()), "the same worker, found");
        assert_eq!(store.list_workers().unwrap().len(), 1, "one shared worker");
        // A second stateless client of hers, made on the other replica, is one too many; the
        // shared worker it made is retired with it, not left for the TTL to end.
        two.on_client_attach(AttachmentId(2), &client("windsurf", true)).unwrap();
        let over = two.confirm_principal(AttachmentId(2), "alice", 1);
        assert!(over.is_err(), "{over:?}");
        two.on_detach(AttachmentId(2), "principal_bound");
        let active: Vec<_> =
            store.list_workers().unwrap().into_iter().filter(|w| w.status.as_str() == "active").collect();
        assert_eq!(active.len(), 1, "{active:?}");
        one.on_shutdown("test");
        two.on_shutdown("test");
    });
}
