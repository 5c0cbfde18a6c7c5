//! Several fleets on one host (issues #19 and 54): an unclaimed gateway is set aside as
//! another fleet's only when the proof it publishes ties it, on any engine, to another store
//! and another repository; every other case stays an unregistered fleet process and closes
//! the gate. The facts are values here, as the shell hands them in; the property tests at
//! the end judge every combination of flaws on both engines against a plain statement of
//! the rule.

use fleetgate_core::Timestamp;
use fleetgate_core::inventory::{
    FleetInventory, GatewayProof, HeldProof, InventoryInput, NamedStore, OurRepository, PROOF_VERSION, PeerEvidence,
    PeerFacts, PeerVerdict, PeerView, PidProbe, REGISTRATION_GRACE_SECONDS, StoreUntold, classify_with_probes,
    judge_peer, our_repository,
};
use fleetgate_core::runtime::{
    Binding, CohortSource, HostIdentity, ObservedProcess, ProcessScan, ProcessStamp, RosterMember, RuntimeRecord,
    RuntimeStatus, StoreIdentity, StoreKey,
};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// The gateway's pid as this host's `/proc` shows it.
const FOREIGN: i64 = 52000;
/// The same process's pid in its own PID namespace (a fleet started in a namespace of its own).
const FOREIGN_IN_NS: i64 = 3;
const FOREIGN_NS: u64 = 4_026_532_999;
const FOREIGN_TICKS: u64 = 8_812_345;
const UID: u32 = 1000;
const OUR_ROOT: &str = "/work/ours";
const THEIR_ROOT: &str = "/work/theirs";
/// A decision long after every gateway here started: no grace applies.
const LATER: Timestamp = Timestamp::from_unix(1_785_207_600); // 2026-07-28T03:00:00Z

fn ts(s: &str) -> Timestamp {
    Timestamp::parse(s).unwrap()
}

fn here() -> HostIdentity {
    HostIdentity { host_id: "machine-a".into(), boot_id: "kernel-boot-2".into() }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    Sqlite,
    Postgres,
}

const ENGINES: [Engine; 2] = [Engine::Sqlite, Engine::Postgres];

/// The store `name` on `engine`: a file, or a database of one server (its oid `n`).
fn store_of(engine: Engine, name: &str, n: u64) -> StoreIdentity {
    match engine {
        Engine::Sqlite => StoreIdentity {
            engine: "sqlite".into(),
            location: format!("/{name}/registry.sqlite3"),
            key: StoreKey::File { device: 2049, inode: n },
        },
        Engine::Postgres => StoreIdentity {
            engine: "postgres".into(),
            location: format!("postgres://fleet@127.0.0.1:5432/{name}"),
            key: StoreKey::Database {
                system: "7716484408466137055".into(),
                database: n.to_string(),
                schema: "public".into(),
            },
        },
    }
}

/// The other fleet's store on `engine`.
fn their_store(engine: Engine) -> StoreIdentity {
    store_of(engine, "theirs", 16390)
}

/// This fleet's store on `engine`: for PostgreSQL, another database of the same server.
fn our_store(engine: Engine) -> StoreIdentity {
    store_of(engine, "ours", 16384)
}

fn roster() -> Vec<RosterMember> {
    vec![RosterMember {
        namespace: "gitea-author".into(),
        profile: "prgs-author".into(),
        role: "author".into(),
        replicas: 1,
    }]
}

fn our_row() -> RuntimeRecord {
    RuntimeRecord {
        runtime_id: "gitea-author:41000:start".into(),
        namespace: "gitea-author".into(),
        profile: "prgs-author".into(),
        role: "author".into(),
        remote: None,
        org: None,
        repo: None,
        repository_root: Some(OUR_ROOT.into()),
        pid: 41000,
        cohort_id: Some("ppid:100".into()),
        cohort_source: CohortSource::ParentProcess,
        client_provenance: "client_managed".into(),
        boot_id: "start".into(),
        startup_head: Some("82d71b77028a7abd4f8ab4a4e4d89658a187f73d".into()),
        daemon_start_head: None,
        transport: "stdio".into(),
        registered_at: ts("2026-07-28T02:00:00Z"),
        last_heartbeat_at: None,
        status: RuntimeStatus::Running,
        host: Some(here()),
    }
}

fn gateway(started: Timestamp) -> ObservedProcess {
    ObservedProcess {
        pid: FOREIGN,
        started_at: started,
        command: "fleetgate --store /other/registry.sqlite3 serve --profile prgs-author".into(),
        uid: Some(UID),
    }
}

fn stamp() -> ProcessStamp {
    ProcessStamp { pid: FOREIGN_IN_NS, pid_namespace: Some(FOREIGN_NS), start_ticks: FOREIGN_TICKS }
}

fn proof(engine: Engine) -> GatewayProof {
    GatewayProof {
        version: PROOF_VERSION,
        process: stamp(),
        host: here(),
        store: their_store(engine),
        fleet: "theirs".into(),
        runtime_id: format!("gitea-author:{FOREIGN_IN_NS}:0123456789abcdef"),
        namespace: "gitea-author".into(),
        profile: "prgs-author".into(),
        role: "author".into(),
        repository_root: Some(THEIR_ROOT.into()),
        binding: None,
        transport: if engine == Engine::Postgres { "http" } else { "stdio" }.into(),
        registered_at: ts("2026-07-28T02:00:01Z"),
    }
}

fn held(proof: &GatewayProof) -> HeldProof {
    HeldProof { owner: Some(UID), bytes: proof.to_bytes() }
}

/// Everything a well-behaved gateway of another fleet on `engine` shows.
fn facts(engine: Engine) -> PeerFacts {
    let store = their_store(engine);
    let open_files = match store.key {
        StoreKey::File { device, inode } => BTreeSet::from([(device, inode), (1, 5)]),
        StoreKey::Database { .. } => BTreeSet::from([(1, 5)]),
    };
    PeerFacts {
        stamp: Some(stamp()),
        uid: Some(UID),
        proofs: vec![held(&proof(engine))],
        cwd: Some(THEIR_ROOT.into()),
        open_files,
        named_store: Ok(NamedStore {
            location: store.location.clone(),
            key: (engine == Engine::Sqlite).then(|| store.key.clone()),
        }),
    }
}

fn ours() -> OurRepository {
    our_repository(None, &[our_row()], &|r| r.to_owned())
}

fn bound(repo: &str) -> Binding {
    Binding { remote: "forge".into(), org: "acme".into(), repo: repo.into() }
}

/// Judge `facts` as this fleet (on `our_engine`, repository `ours`) would at `now`.
fn judge_at(
    facts: PeerFacts,
    ours: &OurRepository,
    our_engine: Engine,
    started: Timestamp,
    now: Timestamp,
) -> PeerVerdict {
    let evidence = BTreeMap::from([(FOREIGN, PeerEvidence::Found(Box::new(facts)))]);
    let (here, store) = (here(), our_store(our_engine));
    let view = PeerView { evidence: Some(&evidence), ours: Some(ours), local: Some(&here), store: Some(&store) };
    judge_peer(&gateway(started), &view, now)
}

fn judge(facts: PeerFacts, our_engine: Engine) -> PeerVerdict {
    judge_at(facts, &ours(), our_engine, ts("2026-07-28T01:59:59Z"), LATER)
}

#[track_caller]
fn not_proven(v: PeerVerdict, needle: &str) {
    match v {
        PeerVerdict::NotProven(why) => assert!(why.contains(needle), "{needle:?} not in {why:?}"),
        PeerVerdict::OtherFleet(g) => panic!("wrongly proven another fleet's: {g:?}"),
        PeerVerdict::Pending(g) => panic!("wrongly pending: {g:?}"),
    }
}

/// `facts` with its one proof rewritten by `edit`.
fn with_proof(engine: Engine, edit: impl FnOnce(&mut GatewayProof)) -> PeerFacts {
    let mut p = proof(engine);
    edit(&mut p);
    PeerFacts { proofs: vec![held(&p)], ..facts(engine) }
}

#[test]
fn a_proven_gateway_bound_to_another_repository_is_another_fleets_on_either_engine() {
    for theirs in ENGINES {
        for our_engine in ENGINES {
            let PeerVerdict::OtherFleet(g) = judge(facts(theirs), our_engine) else {
                panic!("{theirs:?} beside {our_engine:?}: not proven")
            };
            assert_eq!((g.pid, g.repository_root.as_str(), g.fleet.as_str()), (FOREIGN, THEIR_ROOT, "theirs"));
            assert_eq!(g.store, their_store(theirs).location);
            assert_eq!(g.engine, their_store(theirs).engine);
            assert_eq!(g.runtime_id, format!("gitea-author:{FOREIGN_IN_NS}:0123456789abcdef"));
        }
        // Both bound, to different repositories, in different checkouts: another fleet's too.
        let ours = our_repository(Some(&bound("ours")), &[our_row()], &|r| r.to_owned());
        let theirs_bound = with_proof(theirs, |p| p.binding = Some(bound("theirs")));
        let v = judge_at(theirs_bound, &ours, Engine::Sqlite, ts("2026-07-28T01:59:59Z"), LATER);
        let PeerVerdict::OtherFleet(g) = v else { panic!("{theirs:?}: {v:?}") };
        assert_eq!(
            (g.remote.as_deref(), g.org.as_deref(), g.repo.as_deref()),
            (Some("forge"), Some("acme"), Some("theirs"))
        );
    }
}

#[test]
fn a_gateway_bound_to_our_checkout_or_working_in_it_is_blocked() {
    for engine in ENGINES {
        let rooted = |root: &str| with_proof(engine, |p| p.repository_root = Some(root.into()));
        not_proven(judge(rooted(OUR_ROOT), engine), "two fleets on one repository");
        // A checkout inside ours, or ours inside its, is the same repository.
        not_proven(judge(rooted("/work/ours/sub"), engine), "this fleet's checkout");
        not_proven(judge(rooted("/work"), engine), "this fleet's checkout");
        // A sibling whose name merely starts alike is not inside it.
        assert!(matches!(judge(rooted("/work/ours2"), engine), PeerVerdict::OtherFleet(_)));
        // Its proof says elsewhere, but it works in our checkout: not believed.
        let inside = PeerFacts { cwd: Some("/work/ours/src".into()), ..facts(engine) };
        not_proven(judge(inside, engine), "it works in this fleet's checkout (/work/ours/src");
        // Started from a directory above ours (a home directory) is not working in it.
        assert!(matches!(
            judge(PeerFacts { cwd: Some("/work".into()), ..facts(engine) }, engine),
            PeerVerdict::OtherFleet(_)
        ));
        not_proven(judge(PeerFacts { cwd: None, ..facts(engine) }, engine), "working directory cannot be read");
    }
}

#[test]
fn a_gateway_bound_to_our_forge_repository_in_another_checkout_is_blocked() {
    for engine in ENGINES {
        let ours = our_repository(Some(&bound("shared")), &[our_row()], &|r| r.to_owned());
        let theirs = with_proof(engine, |p| p.binding = Some(bound("shared")));
        not_proven(judge_at(theirs.clone(), &ours, engine, ts("2026-07-28T01:59:59Z"), LATER), "forge/acme/shared");
        // Our rows' bindings count as ours even when the roster names none.
        let mut bound_row = our_row();
        (bound_row.remote, bound_row.org, bound_row.repo) =
            (Some("forge".into()), Some("acme".into()), Some("shared".into()));
        let ours = our_repository(None, &[bound_row], &|r| r.to_owned());
        not_proven(judge_at(theirs, &ours, engine, ts("2026-07-28T01:59:59Z"), LATER), "two fleets on one repository");
    }
}

#[test]
fn a_proof_that_is_not_this_processes_own_is_blocked() {
    for engine in ENGINES {
        // Written by another user (a file another uid made and handed over).
        let mut foreign_owner = facts(engine);
        foreign_owner.proofs[0].owner = Some(0);
        not_proven(judge(foreign_owner, engine), "belongs to uid 0, the process runs as uid 1000");
        // Another process's: another pid, another namespace, another start (a pid reused).
        for edit in [
            (|s: &mut ProcessStamp| s.pid += 1) as fn(&mut ProcessStamp),
            |s| s.pid_namespace = Some(FOREIGN_NS + 1),
            |s| s.pid_namespace = None,
            |s| s.start_ticks -= 100,
        ] {
            let other = with_proof(engine, |p| edit(&mut p.process));
            not_proven(judge(other, engine), "its proof names another process");
        }
        not_proven(judge(PeerFacts { stamp: None, ..facts(engine) }, engine), "cannot be read");
        // Made on another machine, or in an earlier boot of this one.
        let old_boot = with_proof(engine, |p| p.host.boot_id = "kernel-boot-1".into());
        not_proven(judge(old_boot, engine), "another host or boot");
        // Two proofs: one is not this process's.
        let mut twice = facts(engine);
        twice.proofs.push(twice.proofs[0].clone());
        not_proven(judge(twice, engine), "holds 2 proofs");
        // Not a proof at all, or of a format this release does not read.
        let garbage =
            PeerFacts { proofs: vec![HeldProof { owner: Some(UID), bytes: b"{\"pid\": 3".to_vec() }], ..facts(engine) };
        not_proven(judge(garbage, engine), "does not parse");
        not_proven(judge(with_proof(engine, |p| p.version = 2), engine), "format 2");
        let huge = PeerFacts {
            proofs: vec![HeldProof {
                owner: Some(UID),
                bytes: vec![b' '; fleetgate_core::inventory::PROOF_MAX_BYTES + 1],
            }],
            ..facts(engine)
        };
        not_proven(judge(huge, engine), "more than a proof's");
        let rootless = with_proof(engine, |p| p.repository_root = None);
        not_proven(judge(rootless, engine), "records no repository root");
    }
}

#[test]
fn a_proof_naming_our_store_or_a_sqlite_file_it_does_not_hold_is_blocked() {
    for engine in ENGINES {
        let on_ours = with_proof(engine, |p| p.store = our_store(engine));
        not_proven(judge(on_ours, engine), "this fleet's own store");
    }
    // A PostgreSQL database of ours is ours under any spelling of its URL: the server says so.
    let respelt = with_proof(Engine::Postgres, |p| {
        p.store = StoreIdentity { location: "postgres://fleet@localhost/ours".into(), ..our_store(Engine::Postgres) }
    });
    not_proven(judge(respelt, Engine::Postgres), "this fleet's own store");
    // A SQLite file must be one it holds open; a server's database cannot be told so.
    let unheld = PeerFacts { open_files: BTreeSet::new(), ..facts(Engine::Sqlite) };
    not_proven(judge(unheld, Engine::Sqlite), "does not hold open the store");
    let unheld = PeerFacts { open_files: BTreeSet::new(), ..facts(Engine::Postgres) };
    assert!(matches!(judge(unheld, Engine::Sqlite), PeerVerdict::OtherFleet(_)));
}

#[test]
fn nothing_known_proves_nothing() {
    let unreadable = BTreeMap::from([(FOREIGN, PeerEvidence::Unreadable("its environment cannot be read".into()))]);
    let (here, ours, store) = (here(), ours(), our_store(Engine::Sqlite));
    let view = PeerView { evidence: Some(&unreadable), ours: Some(&ours), local: Some(&here), store: Some(&store) };
    not_proven(judge_peer(&gateway(LATER), &view, LATER), "environment cannot be read");
    not_proven(judge_peer(&gateway(LATER), &PeerView::default(), LATER), "not looked for");
    for engine in ENGINES {
        // This host unknown: no proof can be placed on it.
        let evidence = BTreeMap::from([(FOREIGN, PeerEvidence::Found(Box::new(facts(engine))))]);
        let view = PeerView { evidence: Some(&evidence), ours: Some(&ours), local: None, store: Some(&store) };
        not_proven(judge_peer(&gateway(ts("2026-07-28T01:59:59Z")), &view, LATER), "identity is unknown");
        // Our own repository unknown: nothing to tell it apart from.
        let unknown = OurRepository::default();
        not_proven(
            judge_at(facts(engine), &unknown, engine, ts("2026-07-28T01:59:59Z"), LATER),
            "repository is unknown",
        );
    }
}

/// The inventory of our one member and the gateway `FOREIGN` (started at `started`), judged
/// at `now`, this fleet on `our_engine`.
fn classify_at(evidence: PeerEvidence, our_engine: Engine, started: Timestamp, now: Timestamp) -> FleetInventory {
    classify_bound(evidence, our_engine, None, started, now)
}

/// [`classify_at`], this fleet bound to `binding` by its roster.
fn classify_bound(
    evidence: PeerEvidence,
    our_engine: Engine,
    binding: Option<&Binding>,
    started: Timestamp,
    now: Timestamp,
) -> FleetInventory {
    let rows = vec![our_row()];
    let scan = ProcessScan::of(vec![
        ObservedProcess {
            pid: 41000,
            started_at: ts("2026-07-28T01:00:00Z"),
            command: "fleetgate serve".into(),
            uid: None,
        },
        gateway(started),
    ]);
    let evidence = BTreeMap::from([(FOREIGN, evidence)]);
    let ours = our_repository(binding, &rows, &|r| r.to_owned());
    let (here, store, roster) = (here(), our_store(our_engine), roster());
    classify_with_probes(
        &InventoryInput {
            roster: &roster,
            runtime_rows: &rows,
            process_scan: &scan,
            expected_binding: None,
            now,
            registry_available: true,
            registry_error: None,
            answering_namespace: None,
            hosts: Default::default(),
            peers: PeerView { evidence: Some(&evidence), ours: Some(&ours), local: Some(&here), store: Some(&store) },
        },
        &BTreeMap::from([(41000, PidProbe::Alive)]),
    )
}

fn classify(evidence: PeerEvidence, our_engine: Engine) -> FleetInventory {
    classify_at(evidence, our_engine, ts("2026-07-28T01:59:59Z"), LATER)
}

#[test]
fn another_fleets_gateway_is_reported_and_leaves_the_gate_open() {
    for engine in ENGINES {
        let inv = classify(PeerEvidence::Found(Box::new(facts(engine))), Engine::Sqlite);
        assert!(inv.mutation_gate_satisfied, "{:?}", inv.blocked_reasons);
        assert!(inv.inventory_complete && inv.unregistered_processes.is_empty() && inv.unproven_gateways.is_empty());
        assert_eq!(inv.other_fleet_gateways.iter().map(|g| g.pid).collect::<Vec<_>>(), [FOREIGN]);
        let json = serde_json::to_value(&inv).unwrap();
        assert_eq!(json["other_fleet_gateways"][0]["repository_root"], THEIR_ROOT);
        assert_eq!(json["other_fleet_gateways"][0]["engine"], their_store(engine).engine);
        let text = fleetgate_core::inventory::render(&inv);
        assert!(text.contains(&format!("other fleet: pid {FOREIGN} prgs-author")), "{text}");
        assert!(text.contains(&format!("checkout {THEIR_ROOT}")), "{text}");
    }
}

#[test]
fn an_unproven_gateway_stays_unregistered_says_why_and_what_to_do() {
    for engine in ENGINES {
        let on_our_checkout = with_proof(engine, |p| p.repository_root = Some(OUR_ROOT.into()));
        let inv = classify(PeerEvidence::Found(Box::new(on_our_checkout)), engine);
        assert!(!inv.mutation_gate_satisfied && !inv.inventory_complete);
        assert!(inv.other_fleet_gateways.is_empty());
        assert_eq!(inv.unregistered_processes.iter().map(|p| p.pid).collect::<Vec<_>>(), [FOREIGN]);
        let reason = inv.blocked_reason.clone().unwrap();
        assert!(reason.starts_with("unregistered fleet process pid 52000"), "{reason}");
        assert!(reason.contains("not another fleet's: it is bound to this fleet's checkout"), "{reason}");
        let unproven = &inv.unproven_gateways;
        assert_eq!(unproven.len(), 1);
        assert_eq!(unproven[0].store.as_deref(), Some(their_store(engine).location.as_str()));
        assert!(unproven[0].why.contains("two fleets on one repository"));
        let action = fleetgate_core::capability::inventory_action(&inv);
        assert!(
            action.contains("stop the gateway pid 52000") && action.contains("two fleets on one repository"),
            "{action}"
        );
        let text = fleetgate_core::inventory::render(&inv);
        assert!(text.contains("unproven: pid 52000"), "{text}");
    }
}

fn without_proof(engine: Engine, named: Result<NamedStore, StoreUntold>) -> PeerEvidence {
    PeerEvidence::Found(Box::new(PeerFacts { proofs: Vec::new(), named_store: named, ..facts(engine) }))
}

fn named(engine: Engine) -> Result<NamedStore, StoreUntold> {
    facts(engine).named_store
}

/// Issues 43 and 54: a neighbour's gateway that has not written its row and published its
/// proof yet — on either engine — is its store's to account for: pending while younger than
/// the grace (its start against the decision clock), a blocker once older and still unproven.
#[test]
fn a_young_gateway_of_another_store_is_pending_and_blocks_only_past_the_grace() {
    let started = ts("2026-07-28T02:00:00Z");
    for engine in ENGINES {
        for our_engine in ENGINES {
            for after in [0, 1, 3, REGISTRATION_GRACE_SECONDS] {
                let inv =
                    classify_at(without_proof(engine, named(engine)), our_engine, started, started.plus_seconds(after));
                assert!(inv.mutation_gate_satisfied, "{engine:?} {after} s after its start: {:?}", inv.blocked_reasons);
                assert!(inv.inventory_complete && inv.unregistered_processes.is_empty(), "{after} s");
                let json = serde_json::to_value(&inv).unwrap();
                assert_eq!(json["pending_gateways"][0]["pid"], FOREIGN, "{json}");
                assert_eq!(json["pending_gateways"][0]["age_seconds"], after, "{json}");
                assert_eq!(json["pending_gateways"][0]["store"], their_store(engine).location, "{json}");
                assert!(json["pending_gateways"][0]["why"].as_str().unwrap().contains("not published its proof"));
            }
            // A clock a little behind the process's start (rounded down to the second): still young.
            assert!(
                classify_at(without_proof(engine, named(engine)), our_engine, started, started.plus_seconds(-1))
                    .mutation_gate_satisfied
            );
            let late = classify_at(without_proof(engine, named(engine)), our_engine, started, started.plus_seconds(30));
            assert!(!late.mutation_gate_satisfied, "it never proved itself: a blocker");
            assert_eq!(late.unregistered_processes.iter().map(|p| p.pid).collect::<Vec<_>>(), [FOREIGN]);
            assert!(late.blocked_reason.unwrap().contains("has published no proof"));
        }
    }
}

/// What a young gateway cannot claim: our own store, no store at all, or a proof on our
/// repository — each closes the gate from its first second.
#[test]
fn a_young_gateway_of_our_store_or_of_no_store_or_on_our_repository_blocks_at_once() {
    let started = ts("2026-07-28T02:00:00Z");
    let now = started.plus_seconds(1);
    for engine in ENGINES {
        let ours_named = |key: bool| {
            let s = our_store(engine);
            Ok(NamedStore { location: s.location.clone(), key: key.then_some(s.key) })
        };
        for (evidence, why) in [
            (without_proof(engine, ours_named(true)), "own store"),
            // A server's database is told by its URL, not asked: the same URL is ours.
            (without_proof(engine, ours_named(false)), "own store"),
            (without_proof(engine, Err(StoreUntold::Nothing)), "names no store"),
            (PeerEvidence::Unreadable("its command line does not parse (UnknownArgument)".into()), "does not parse"),
            (
                PeerEvidence::Found(Box::new(with_proof(engine, |p| p.repository_root = Some(OUR_ROOT.into())))),
                "two fleets on one repository",
            ),
        ] {
            let inv = classify_at(evidence, engine, started, now);
            assert!(!inv.mutation_gate_satisfied, "{engine:?}: {why}");
            assert_eq!(inv.unregistered_processes.iter().map(|p| p.pid).collect::<Vec<_>>(), [FOREIGN], "{why}");
            assert!(inv.blocked_reason.unwrap().contains(why), "{why}");
        }
    }
}

#[test]
fn the_grace_is_measured_from_the_start_against_the_decision_clock() {
    let started = ts("2026-07-28T02:00:00Z");
    let grace = REGISTRATION_GRACE_SECONDS;
    for engine in ENGINES {
        let facts = PeerFacts { proofs: Vec::new(), ..facts(engine) };
        match judge_at(facts.clone(), &ours(), Engine::Sqlite, started, started.plus_seconds(grace)) {
            PeerVerdict::Pending(g) => {
                assert_eq!((g.pid, g.until, g.age_seconds), (FOREIGN, started.plus_seconds(grace), grace));
                assert_eq!(g.store, their_store(engine).location);
            }
            other => panic!("not pending at the grace's last second: {other:?}"),
        }
        not_proven(
            judge_at(facts.clone(), &ours(), Engine::Sqlite, started, started.plus_seconds(grace + 1)),
            "no proof",
        );
        not_proven(judge_at(facts, &ours(), Engine::Sqlite, started, started.plus_seconds(-grace - 1)), "no proof");
    }
}

// ---- Property tests: every combination of flaws, both engines. ----

/// Where a proof's repository root lies, against ours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Root {
    Elsewhere,
    Ours,
    InsideOurs,
    AroundOurs,
    Missing,
}

/// Its binding, against ours (`acme/ours`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bound {
    None,
    Theirs,
    Ours,
}

/// What its command line names, when it has no proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Named {
    Theirs,
    Ours,
    Nothing,
}

/// A way a neighbour's proof, or what `/proc` says of it, can fall short.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Flaw {
    /// It holds a second proof.
    TwoProofs,
    /// Its proof does not parse.
    Garbage,
    /// Its proof belongs to another user.
    WrongOwner,
    /// Its proof names another pid, namespace or start.
    WrongPid,
    WrongNamespace,
    WrongStart,
    /// Its pid namespace and start cannot be read.
    StampUnread,
    /// Its proof was made in another boot.
    OtherBoot,
    /// Its proof names our store.
    OurStore,
    /// It holds no file open (a SQLite store's must be).
    Unheld,
    /// It works inside our checkout.
    CwdInOurs,
    /// Its working directory cannot be read.
    CwdUnread,
}

const FLAWS: [Flaw; 12] = [
    Flaw::TwoProofs,
    Flaw::Garbage,
    Flaw::WrongOwner,
    Flaw::WrongPid,
    Flaw::WrongNamespace,
    Flaw::WrongStart,
    Flaw::StampUnread,
    Flaw::OtherBoot,
    Flaw::OurStore,
    Flaw::Unheld,
    Flaw::CwdInOurs,
    Flaw::CwdUnread,
];

/// One neighbour: its engine and ours, and each way its facts can fall short.
#[derive(Clone, Debug)]
struct Case {
    engine: Engine,
    our_engine: Engine,
    /// No proof at all (a gateway just started, an older release, a look-alike).
    no_proof: bool,
    named: Named,
    /// Seconds from its start to the decision.
    age: i64,
    flaws: BTreeSet<Flaw>,
    root: Root,
    bound: Bound,
}

impl Case {
    fn has(&self, flaw: Flaw) -> bool {
        self.flaws.contains(&flaw)
    }
}

fn engine() -> impl Strategy<Value = Engine> {
    prop_oneof![Just(Engine::Sqlite), Just(Engine::Postgres)]
}

fn case() -> impl Strategy<Value = Case> {
    let named = prop_oneof![Just(Named::Theirs), Just(Named::Ours), Just(Named::Nothing)];
    let root = prop_oneof![
        4 => Just(Root::Elsewhere),
        1 => Just(Root::Ours),
        1 => Just(Root::InsideOurs),
        1 => Just(Root::AroundOurs),
        1 => Just(Root::Missing),
    ];
    let bound = prop_oneof![Just(Bound::None), Just(Bound::Theirs), Just(Bound::Ours)];
    // No flaw at all a third of the time: the proven case must come up often.
    let flaws = proptest::collection::btree_set(proptest::sample::select(FLAWS.to_vec()), 0..=2);
    (engine(), engine(), (0..3).prop_map(|n| n == 0), named, -3_i64..40, flaws, root, bound).prop_map(
        |(engine, our_engine, no_proof, named, age, flaws, root, bound)| Case {
            engine,
            our_engine,
            no_proof,
            named,
            age,
            flaws,
            root,
            bound,
        },
    )
}

/// The facts the case describes.
fn facts_of(c: &Case) -> PeerFacts {
    let mut p = proof(c.engine);
    p.process.pid += i64::from(c.has(Flaw::WrongPid));
    if c.has(Flaw::WrongNamespace) {
        p.process.pid_namespace = Some(FOREIGN_NS + 7);
    }
    p.process.start_ticks += u64::from(c.has(Flaw::WrongStart));
    if c.has(Flaw::OtherBoot) {
        p.host.boot_id = "kernel-boot-1".into();
    }
    if c.has(Flaw::OurStore) {
        p.store = our_store(c.our_engine);
    }
    p.repository_root = match c.root {
        Root::Elsewhere => Some(THEIR_ROOT.into()),
        Root::Ours => Some(OUR_ROOT.into()),
        Root::InsideOurs => Some(format!("{OUR_ROOT}/vendor/theirs")),
        Root::AroundOurs => Some("/work".into()),
        Root::Missing => None,
    };
    p.binding = match c.bound {
        Bound::None => None,
        Bound::Theirs => Some(bound("theirs")),
        Bound::Ours => Some(bound("ours")),
    };
    let mut f = facts(c.engine);
    let mut one = held(&p);
    if c.has(Flaw::Garbage) {
        one.bytes.truncate(one.bytes.len() / 2);
    }
    if c.has(Flaw::WrongOwner) {
        one.owner = Some(UID + 1);
    }
    f.proofs = if c.no_proof { Vec::new() } else { vec![one.clone()] };
    if c.has(Flaw::TwoProofs) && !c.no_proof {
        f.proofs.push(one);
    }
    if c.has(Flaw::StampUnread) {
        f.stamp = None;
    }
    if c.has(Flaw::Unheld) {
        f.open_files.clear();
    }
    f.cwd = if c.has(Flaw::CwdUnread) {
        None
    } else if c.has(Flaw::CwdInOurs) {
        Some(format!("{OUR_ROOT}/src"))
    } else {
        Some(THEIR_ROOT.into())
    };
    f.named_store = match c.named {
        Named::Theirs => named(c.engine),
        Named::Ours => {
            let s = our_store(c.our_engine);
            Ok(NamedStore { location: s.location, key: (c.our_engine == Engine::Sqlite).then_some(s.key) })
        }
        Named::Nothing => Err(StoreUntold::Nothing),
    };
    f
}

/// The rule, stated plainly: what the case must be judged.
#[derive(Debug, PartialEq, Eq)]
enum Expected {
    OtherFleet,
    Pending,
    NotProven,
}

fn expected(c: &Case) -> Expected {
    let young = (-REGISTRATION_GRACE_SECONDS..=REGISTRATION_GRACE_SECONDS).contains(&c.age);
    if c.no_proof {
        return if c.named == Named::Theirs && young { Expected::Pending } else { Expected::NotProven };
    }
    // Only a file can be held open; a server's database is not judged so.
    let unheld_file = c.has(Flaw::Unheld) && c.engine == Engine::Sqlite && !c.has(Flaw::OurStore);
    let flawed = c.flaws.iter().any(|f| *f != Flaw::Unheld)
        || unheld_file
        || c.root != Root::Elsewhere
        || c.bound == Bound::Ours;
    if flawed { Expected::NotProven } else { Expected::OtherFleet }
}

fn verdict_of(c: &Case) -> PeerVerdict {
    let ours = our_repository(Some(&bound("ours")), &[our_row()], &|r| r.to_owned());
    let started = ts("2026-07-28T02:00:00Z");
    judge_at(facts_of(c), &ours, c.our_engine, started, started.plus_seconds(c.age))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Every neighbour, on either engine, beside this fleet on either engine, is judged as the
    /// rule says: another fleet's only with its own proof and no flaw, pending only without
    /// a proof, naming another store, within the grace; everything else fails closed.
    #[test]
    fn each_neighbour_is_judged_by_the_rule_on_either_engine(c in case()) {
        let got = verdict_of(&c);
        let kind = match &got {
            PeerVerdict::OtherFleet(_) => Expected::OtherFleet,
            PeerVerdict::Pending(_) => Expected::Pending,
            PeerVerdict::NotProven(_) => Expected::NotProven,
        };
        prop_assert_eq!(kind, expected(&c), "{:?}: {:?}", c, got);
    }

    /// The engine changes nothing but what only a file can show (held open): the same
    /// neighbour on the other engine, or beside a fleet on the other engine, is judged alike.
    #[test]
    fn the_engine_is_no_reason(c in case()) {
        let c = Case { flaws: c.flaws.iter().copied().filter(|f| *f != Flaw::Unheld).collect(), ..c };
        let kind = |c: &Case| std::mem::discriminant(&verdict_of(c));
        let flipped = Case { engine: match c.engine { Engine::Sqlite => Engine::Postgres, Engine::Postgres => Engine::Sqlite }, ..c.clone() };
        prop_assert_eq!(kind(&c), kind(&flipped), "{:?}", c);
        let ours_flipped = Case {
            our_engine: match c.our_engine { Engine::Sqlite => Engine::Postgres, Engine::Postgres => Engine::Sqlite },
            ..c.clone()
        };
        prop_assert_eq!(kind(&c), kind(&ours_flipped), "{:?}", c);
    }

    /// In the whole inventory: the gate stays open exactly for a proven or pending
    /// neighbour, and an unproven one is both unregistered and reported with its reason.
    #[test]
    fn the_gate_closes_exactly_for_an_unproven_neighbour(c in case()) {
        let started = ts("2026-07-28T02:00:00Z");
        let verdict = verdict_of(&c);
        let evidence = PeerEvidence::Found(Box::new(facts_of(&c)));
        let inv = classify_bound(evidence, c.our_engine, Some(&bound("ours")), started, started.plus_seconds(c.age));
        match verdict {
            PeerVerdict::NotProven(why) => {
                prop_assert!(!inv.mutation_gate_satisfied);
                prop_assert_eq!(inv.unregistered_processes.iter().map(|p| p.pid).collect::<Vec<_>>(), vec![FOREIGN]);
                prop_assert_eq!(inv.unproven_gateways.len(), 1);
                prop_assert_eq!(&inv.unproven_gateways[0].why, &why);
            }
            _ => {
                prop_assert!(inv.mutation_gate_satisfied, "{:?}", inv.blocked_reasons);
                prop_assert!(inv.unproven_gateways.is_empty());
            }
        }
    }
}
