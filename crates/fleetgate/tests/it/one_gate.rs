//! One gate, one path (issue 16): the `capability` CLI's answer, the
//! `…resolve_task_capability` control tool and the gateway's `decide` judge a made-up fleet
//! — a real SQLite store, processes, probes and environments from a fake observer, no
//! process spawned — and must agree on every verdict: allowed, role refused, a duplicate
//! closing the gate, a peer's unsupported override, a read-only call.

use fleetgate::cli::gate::capability_reply;
use fleetgate_config::FleetConfig;
use fleetgate_control::gate::{Gate, Observer};
use fleetgate_control::serve::{FleetControl, Identity, Transport};
use fleetgate_core::dialect::{Dialect, Schemas};
use fleetgate_core::env::EnvSnapshot;
use fleetgate_core::inventory::{PeerFacts, PidProbe};
use fleetgate_core::runtime::{Cohort, CohortSource, RuntimeRecord, RuntimeStatus};
use fleetgate_core::{ManualClock, Timestamp};
use fleetgate_gateway::rmcp::model::{JsonObject, Tool, ToolAnnotations};
use fleetgate_gateway::{
    AttachmentId, CallToJudge, ClientAttach, ControlCall, ControlPlane, DownstreamError, DownstreamLink,
    DownstreamStatus, Judgement, Step, Stepwise, ToolCall,
};
use fleetgate_host::procfs::{ProcEntry, ProcessSource};
use fleetgate_host::{HostError, HostErrorKind};
use fleetgate_store::{HostIdentity, Store};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

const HEAD: &str = "82d71b77028a7abd4f8ab4a4e4d89658a187f73d";
const CONFIG: &str = r#"
[fleet]
name = "made-up"
tool_prefix = "gitea_"
process_match = ["mcp_server.py"]

[roles.reviewer]
deny = ["git_add"]

[tools]
read_only = ["git_status"]

[[members]]
namespace = "gitea-author"
profile = "prgs-author"
role = "author"

[[members]]
namespace = "gitea-reviewer"
profile = "prgs-reviewer"
role = "reviewer"
"#;

fn at(seconds: i64) -> Timestamp {
    Timestamp::ymd_hms(2026, 12, 1, 12, 0, 0).plus_seconds(seconds)
}

/// A made-up host: processes with their environments, every probe alive.
#[derive(Debug, Default)]
struct MadeUp {
    processes: Mutex<BTreeMap<i64, (ProcEntry, EnvSnapshot)>>,
}

impl MadeUp {
    fn run(&self, pid: i64, env: &[(&str, &str)]) {
        let entry = ProcEntry {
            pid,
            ppid: 812,
            started_at: at(0),
            argv: vec!["python".into(), "mcp_server.py".into()],
            uid: Some(1000),
        };
        let env = EnvSnapshot::from_pairs(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        self.processes.lock().unwrap().insert(pid, (entry, env));
    }
}

impl ProcessSource for MadeUp {
    fn entries(&self) -> Result<Vec<ProcEntry>, HostError> {
        Ok(self.processes.lock().unwrap().values().map(|(e, _)| e.clone()).collect())
    }
    fn entry(&self, pid: i64) -> Option<ProcEntry> {
        self.processes.lock().unwrap().get(&pid).map(|(e, _)| e.clone())
    }
    fn environ(&self, pid: i64) -> Result<EnvSnapshot, HostError> {
        self.processes
            .lock()
            .unwrap()
            .get(&pid)
            .map(|(_, env)| env.clone())
            .ok_or_else(|| HostError::new(HostErrorKind::Unreadable, format!("no process {pid}")))
    }
}

impl Observer for MadeUp {
    fn processes(&self) -> &dyn ProcessSource {
        self
    }
    fn probe(&self, pid: i64) -> PidProbe {
        if self.processes.lock().unwrap().contains_key(&pid) { PidProbe::Alive } else { PidProbe::Dead }
    }
    fn local_host(&self) -> Option<HostIdentity> {
        Some(HostIdentity { host_id: "made-up-host".into(), boot_id: "b1".into() })
    }
    fn head(&self, _checkout: &Path) -> Result<String, HostError> {
        Ok(HEAD.into())
    }
    fn peer_facts(&self, _: i64, _: &[String], _: &str) -> Result<PeerFacts, String> {
        Err("a made-up fleet has no peer stores".into())
    }
}

fn row(namespace: &str, profile: &str, role: &str, pid: i64, cohort: &str) -> RuntimeRecord {
    RuntimeRecord {
        runtime_id: format!("{namespace}:{pid}:b"),
        namespace: namespace.into(),
        profile: profile.into(),
        role: role.into(),
        remote: None,
        org: None,
        repo: None,
        repository_root: Some("/made-up/checkout".into()),
        pid,
        cohort_id: Some(cohort.into()),
        cohort_source: CohortSource::ExplicitEnv,
        client_provenance: "client_managed".into(),
        boot_id: "b".into(),
        startup_head: Some(HEAD.into()),
        daemon_start_head: Some(HEAD.into()),
        transport: "stdio".into(),
        registered_at: at(10),
        last_heartbeat_at: Some(at(10)),
        status: RuntimeStatus::Running,
        host: None,
    }
}

/// The made-up fleet: its store, its host, and the author's gateway (pid 4100) with one
/// attached client, all on one gate.
struct Fleet {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    host: Arc<MadeUp>,
    gate: Gate,
    control: FleetControl,
    config: FleetConfig,
    worker: String,
    /// The store's location (a path or a URL).
    spec: String,
}

const MANAGED: (&str, &str) = ("GITEA_CLIENT_MANAGED", "1");

fn fleet() -> Fleet {
    fleet_audited(None)
}

/// The made-up fleet, its gate auditing with this wait when one is given.
fn fleet_audited(audit_wait: Option<std::time::Duration>) -> Fleet {
    fleet_of(CONFIG, audit_wait)
}

/// The made-up fleet under the roster `config`.
fn fleet_of(config: &str, audit_wait: Option<std::time::Duration>) -> Fleet {
    fleet_on(config, audit_wait, None)
}

/// The made-up fleet under the roster `config`, on the store at `store_url` (else SQLite).
fn fleet_on(config: &str, audit_wait: Option<std::time::Duration>, store_url: Option<String>) -> Fleet {
    fleet_judged(config, audit_wait, store_url, None)
}

/// [`fleet_on`], its gate judging under `dialect` when one is given.
fn fleet_judged(
    config: &str,
    audit_wait: Option<std::time::Duration>,
    store_url: Option<String>,
    dialect: Option<&'static dyn Dialect>,
) -> Fleet {
    let dir = tempfile::tempdir().unwrap();
    let spec = store_url.unwrap_or_else(|| dir.path().join("s.sqlite3").display().to_string());
    let store = fleetgate_store::open(&spec).unwrap();
    let host = Arc::new(MadeUp::default());
    host.run(4100, &[MANAGED]);
    host.run(4200, &[MANAGED]);
    store.upsert_runtime(&row("gitea-author", "prgs-author", "author", 4100, "fleet-a")).unwrap();
    store.upsert_runtime(&row("gitea-reviewer", "prgs-reviewer", "reviewer", 4200, "fleet-a")).unwrap();
    let config = FleetConfig::parse(config, "made-up.toml").unwrap();
    let mut gate = Gate::new(Arc::new(config.clone()), store.clone(), host.clone());
    if let Some(dialect) = dialect {
        gate = gate.with_dialect(dialect);
    }
    if let Some(wait) = audit_wait {
        gate = gate.with_auditor(fleetgate_control::audit::Auditor::new(store.clone(), wait));
    }
    let member = config.member("prgs-author").unwrap().clone();
    let cohort = Cohort { cohort_id: Some("fleet-a".into()), cohort_source: CohortSource::ExplicitEnv };
    let identity = Identity::new(member, 4100, "b".into(), cohort, (None, Some(HEAD.into())), None);
    let clock = Arc::new(ManualClock::new(at(20)));
    let control = FleetControl::new(identity, Transport::Stdio, EnvSnapshot::default(), clock, gate.clone());
    let client = ClientAttach {
        client_name: "claude-code".into(),
        client_version: "1".into(),
        protocol_version: "2025-11-25".into(),
        principal: None,
        stateless: false,
    };
    control.on_client_attach(AttachmentId(1), &client).unwrap();
    let worker = store.list_workers().unwrap()[0].worker_identity.clone();
    Fleet { _dir: dir, store, host, gate, control, config, worker, spec }
}

/// Run `story` on a fresh made-up fleet, its heartbeat loops on a runtime of the test's own.
fn with_fleet(story: fn(&Fleet)) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    runtime.block_on(async {
        tokio::task::spawn_blocking(move || {
            let f = fleet();
            story(&f);
            f.control.on_shutdown("test");
        })
        .await
        .unwrap();
    });
}

/// Run `story` on a fresh made-up fleet under `config` (audited), on a runtime of its own.
fn with_fleet_of(config: String, story: impl FnOnce(&Fleet) + Send + 'static) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    runtime.block_on(async move {
        tokio::task::spawn_blocking(move || {
            let f = fleet_of(&config, Some(std::time::Duration::from_secs(5)));
            story(&f);
            f.control.on_shutdown("test");
        })
        .await
        .unwrap();
    });
}

/// The structured answer of control tool `name` called on the author's attachment.
fn control_tool(f: &Fleet, name: &str, arguments: Value, known: &(dyn Fn(&str) -> Option<Tool> + Sync)) -> Value {
    let answer = f.control.call_control_tool(ControlCall {
        attachment: AttachmentId(1),
        name,
        arguments: arguments.as_object().unwrap().clone(),
        downstream: &DownstreamStatus::absent(),
        known_tool: known,
        link: None,
    });
    answer.structured_content.unwrap()
}

fn tool(name: &str) -> Tool {
    let mut tool = Tool::new(name.to_owned(), "a tool", Arc::new(JsonObject::new()));
    if name == "git_log" {
        tool = tool.with_annotations(ToolAnnotations::new().read_only(true));
    }
    tool
}

/// The three paths' verdicts for `name` called by the author's attached worker:
/// (allowed, blocker, reasons) from each.
fn three(f: &Fleet, name: &str) -> [(bool, Value, Value); 3] {
    let member = f.config.member("prgs-author").unwrap();
    let hint = (name == "git_log").then_some(true);
    let cli = capability_reply(&f.gate, member, name, Some(&f.worker), hint.is_some(), None, None, at(20)).value;
    let t = tool(name);
    let known = |n: &str| (n == name).then(|| t.clone());
    let control = control_tool(f, "gitea_resolve_task_capability", json!({ "tool": name }), &known);
    let decided = f.control.decide(
        AttachmentId(1),
        &ToolCall { tool: &t, arguments: None, answers: &[], link: None, settles: None, catalogue: None },
    );
    let gateway = (
        decided.decision.allowed,
        json!(decided.decision.blocker_kind.map(|k| k.as_str())),
        json!(decided.decision.reasons),
    );
    let pick = |v: &Value| (v["allowed"].as_bool().unwrap(), v["blocker_kind"].clone(), v["blocked_reasons"].clone());
    [pick(&cli), pick(&control), gateway]
}

fn agree(f: &Fleet, name: &str) -> (bool, Value, Value) {
    let [cli, control, gateway] = three(f, name);
    assert_eq!(cli, control, "`{name}`: the CLI and the control tool disagree");
    assert_eq!(cli, gateway, "`{name}`: the CLI and the gateway disagree");
    cli
}

#[test]
fn the_cli_the_control_tool_and_the_gateway_give_one_verdict() {
    with_fleet(|f| {
        assert_eq!(agree(f, "git_add"), (true, Value::Null, json!([])), "a healthy fleet, an owned session");
        assert!(agree(f, "git_log").0, "read-only");

        // A second author from another cohort closes the gate, the same way on every path.
        f.host.run(4300, &[MANAGED]);
        f.store.upsert_runtime(&row("gitea-author", "prgs-author", "author", 4300, "fleet-b")).unwrap();
        let (allowed, blocker, reasons) = agree(f, "git_add");
        assert!(!allowed);
        assert_eq!(blocker, "fleet_inventory_blocked");
        assert!(reasons.to_string().contains("duplicate prgs-author"), "{reasons}");
        assert!(agree(f, "git_log").0, "reads answer to role policy alone");

        // A peer's unsupported override is a hard diagnostic on every path.
        f.host.run(4300, &[MANAGED, ("GITEA_MCP_CLIENT_SOMETHING_ELSE", "x")]);
        let (_, blocker, reasons) = agree(f, "git_add");
        assert_eq!(blocker, "runtime_reconnect_required");
        assert!(reasons.to_string().contains("unsupported-env:"), "{reasons}");
    });
}

#[test]
fn a_role_refusal_is_the_same_everywhere_and_needs_no_evidence() {
    with_fleet(|f| {
        let reviewer = f.config.member("prgs-reviewer").unwrap();
        let refused = capability_reply(&f.gate, reviewer, "git_add", None, false, None, None, at(20)).value;
        assert_eq!(refused["blocker_kind"], "role_not_permitted");
        // No evidence was needed: an empty host changes nothing.
        f.host.processes.lock().unwrap().clear();
        let again = capability_reply(&f.gate, reviewer, "git_add", None, false, None, None, at(20)).value;
        assert_eq!(refused, again);
    });
}

#[test]
fn a_store_deleted_or_replaced_under_the_gateway_refuses_mutations_until_it_is_back() {
    with_fleet(|f| {
        let (path, aside) = (f._dir.path().join("s.sqlite3"), f._dir.path().join("aside.sqlite3"));
        let health = || control_tool(f, "gitea_get_runtime_context", json!({}), &|_| None)["store_health"].clone();
        assert!(agree(f, "git_add").0, "a healthy fleet");
        assert_eq!(health()["ok"], true);

        // Deleted from its path (here: moved aside, so it can come back).
        std::fs::rename(&path, &aside).unwrap();
        let (allowed, blocker, reasons) = agree(f, "git_add");
        assert!(!allowed);
        assert_eq!(blocker, "store_replaced");
        assert!(reasons.to_string().contains("s.sqlite3 is no longer the file this process opened"), "{reasons}");
        assert!(reasons.to_string().contains("it was deleted"), "{reasons}");
        assert!(agree(f, "git_log").0, "reads answer to role policy alone");
        let h = health();
        assert_eq!((h["ok"].clone(), h["blocker_kind"].clone()), (json!(false), json!("store_replaced")), "{h}");
        assert!(h["operator_action"].as_str().unwrap().contains("put that file back"), "{h}");

        // Another file at the same path (what the next CLI call would have created).
        std::fs::copy(&aside, &path).unwrap();
        let (allowed, blocker, reasons) = agree(f, "git_add");
        assert_eq!((allowed, blocker), (false, json!("store_replaced")));
        assert!(reasons.to_string().contains("replaced by another file"), "{reasons}");

        // The file it opened back at its path: mutations are decided as before.
        std::fs::rename(&aside, &path).unwrap();
        assert_eq!(agree(f, "git_add"), (true, Value::Null, json!([])));
        assert_eq!(health()["ok"], true);
    });
}

#[test]
fn a_read_is_decided_at_once_and_a_mutation_only_with_its_audit_entry_committed() {
    use std::time::{Duration, Instant};
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    runtime.block_on(async {
        tokio::task::spawn_blocking(|| {
            let f = fleet_audited(Some(Duration::from_millis(300)));
            let (read, add) = (tool("git_log"), tool("git_add"));
            let call =
                |t| ToolCall { tool: t, arguments: None, answers: &[], link: None, settles: None, catalogue: None };
            assert_eq!(f.control.decide_now(AttachmentId(1), &call(&read)), None, "a definition not yet pinned");
            assert!(f.control.decide(AttachmentId(1), &call(&read)).decision.allowed);
            assert!(f.control.decide(AttachmentId(1), &call(&add)).decision.allowed);
            let quick = f.control.decide_now(AttachmentId(1), &call(&read)).expect("a pinned read-only call");
            assert!(quick.decision.allowed);
            assert_eq!(f.control.decide_now(AttachmentId(1), &call(&add)), None, "a mutation needs the store");

            // An operator (or a stalled process) holds the store's write lock.
            let path = f._dir.path().join("s.sqlite3");
            let lock = rusqlite::Connection::open(&path).unwrap();
            lock.execute_batch("BEGIN EXCLUSIVE").unwrap();
            let started = Instant::now();
            let refused = f.control.decide(AttachmentId(1), &call(&add));
            assert!(!refused.decision.allowed, "no mutation goes ahead unaudited");
            assert_eq!(refused.decision.blocker_kind, Some(fleetgate_core::BlockerKind::AuditUnavailable));
            assert!(refused.decision.operator_action.as_deref().unwrap().contains("store"));
            assert!(started.elapsed() < fleetgate_store::sqlite::BUSY_TIMEOUT, "took {:?}", started.elapsed());
            let read_now = f.control.decide_now(AttachmentId(1), &call(&read)).unwrap();
            assert!(read_now.decision.allowed, "reads go on under the lock");
            lock.execute_batch("COMMIT").unwrap();

            assert!(f.gate.flush_audit(Duration::from_secs(20)));
            let trail = f.store.list_audit(None, 100).unwrap();
            let tools: Vec<&str> = trail.iter().map(|e| e.tool.as_str()).collect();
            assert_eq!(tools, ["git_log", "git_add", "git_log", "git_add", "git_log"]);
            assert!(trail[3].reasons.iter().any(|r| r.contains("not confirmed within 300 ms")), "{:?}", trail[3]);
            assert_eq!(trail[3].blocker_kind.as_deref(), Some("audit_unavailable"));
            assert!(!trail[3].allowed && trail[1].allowed && trail[4].allowed);
            f.control.on_shutdown("test");
        })
        .await
        .unwrap();
    });
}

/// A call held for an operator's approval whose caller goes away (its attachment ends)
/// withdraws its request, audited; the hold ends unanswered, the call is never forwarded.
#[test]
fn a_held_call_is_withdrawn_when_its_caller_goes_away() {
    let asking = format!(
        "{CONFIG}\n[approvals]\nwait_seconds = 60\n\n[[rules]]\ntool = \"git_commit\"\nroles = [\"author\"]\ndecision = \"ask\"\n"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    runtime.block_on(async move {
        let f = Arc::new(
            tokio::task::spawn_blocking(move || fleet_of(&asking, Some(std::time::Duration::from_secs(5))))
                .await
                .unwrap(),
        );
        let t = tool("git_commit");
        let call = ToolCall { tool: &t, arguments: None, answers: &[], link: None, settles: None, catalogue: None };
        let verdict = f.control.decide(AttachmentId(1), &call);
        assert_eq!(verdict.decision.blocker_kind.map(|k| k.as_str()), Some("approval_pending"));
        let id = verdict.held.clone().expect("the gateway may hold it");
        let hold = f.control.hold(AttachmentId(1), &id, std::time::Instant::now()).expect("held");
        let detaching = Arc::clone(&f);
        tokio::task::spawn_blocking(move || {
            detaching.control.on_detach(AttachmentId(1), "the client closed its session")
        })
        .await
        .unwrap();
        let answered = tokio::time::timeout(std::time::Duration::from_secs(20), hold).await.expect("the hold ended");
        assert!(!answered, "a withdrawn request answers nothing");
        let f2 = Arc::clone(&f);
        tokio::task::spawn_blocking(move || {
            let requests = f2.store.list_approvals(false).unwrap();
            assert_eq!(requests[0].state, fleetgate_core::approval::ApprovalState::Withdrawn, "{requests:?}");
            assert!(f2.gate.flush_audit(std::time::Duration::from_secs(5)));
            let audit = serde_json::to_string(&f2.store.list_audit(None, 100).unwrap()).unwrap();
            assert!(audit.contains("withdrawn: the caller went away"), "{audit}");
            f2.control.on_shutdown("test");
        })
        .await
        .unwrap();
    });
}

/// A held call waits on the store's word: an answer given by another connection (here a
/// second store handle, as the operator's `fleetgate approvals approve` would) ends the hold
/// at once — on SQLite by the file changing, on PostgreSQL by `NOTIFY` — and the call decided
/// again passes once. Run several times: an answer committed is an answer seen.
fn a_held_call_wakes_on_the_answer(store_url: Option<String>) {
    let asking = format!(
        "{CONFIG}\n[approvals]\nwait_seconds = 120\n\n[[rules]]\ntool = \"git_commit\"\nroles = [\"author\"]\ndecision = \"ask\"\n"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async move {
        let f = Arc::new(
            tokio::task::spawn_blocking(move || fleet_on(&asking, Some(std::time::Duration::from_secs(5)), store_url))
                .await
                .unwrap(),
        );
        for round in 0..4 {
            let t = tool("git_commit");
            let mut arguments = JsonObject::new();
            arguments.insert("round".into(), json!(round));
            let (g, tt, aa) = (Arc::clone(&f), t.clone(), arguments.clone());
            let verdict = tokio::task::spawn_blocking(move || {
                g.control.decide(
                    AttachmentId(1),
                    &ToolCall {
                        tool: &tt,
                        arguments: Some(&aa),
                        answers: &[],
                        link: None,
                        settles: None,
                        catalogue: None,
                    },
                )
            })
            .await
            .unwrap();
            let id = verdict.held.clone().expect("held");
            let started = std::time::Instant::now();
            let hold = f.control.hold(AttachmentId(1), &id, started).expect("held");
            // The operator answers from another handle on the same store.
            let (spec, answer_id) = (f.spec.clone(), id.clone());
            tokio::task::spawn_blocking(move || {
                let operator = fleetgate_store::open(&spec).unwrap();
                assert!(matches!(
                    operator.answer_approval(&answer_id, (&alice(), &Default::default()), true, None, at(21)).unwrap(),
                    fleetgate_store::Answered::Recorded(_)
                ));
            })
            .await
            .unwrap();
            let answered = tokio::time::timeout(std::time::Duration::from_secs(8), hold).await;
            assert_eq!(answered, Ok(true), "round {round}: the answer ended the hold well inside the backstop");
            let g = Arc::clone(&f);
            let again = tokio::task::spawn_blocking(move || {
                g.control.decide(
                    AttachmentId(1),
                    &ToolCall {
                        tool: &t,
                        arguments: Some(&arguments),
                        answers: &[],
                        link: None,
                        settles: None,
                        catalogue: None,
                    },
                )
            })
            .await
            .unwrap();
            assert!(again.decision.allowed, "round {round}: the approved call passes: {:?}", again.decision);
        }
        let g = Arc::clone(&f);
        tokio::task::spawn_blocking(move || g.control.on_shutdown("test")).await.unwrap();
    });
}

#[test]
fn a_held_call_wakes_on_the_answer_on_sqlite() {
    a_held_call_wakes_on_the_answer(None);
}

#[test]
fn a_held_call_wakes_on_the_answer_on_postgres() {
    let Some(db) = fleetgate_testkit::pg::PgDatabase::fresh("fg_held") else { return };
    a_held_call_wakes_on_the_answer(Some(db.url.clone()));
}

/// The preview (`capability`, the control tool) and the real call give one decision,
/// approvals and overrides on record included: a role refusal an operator may override, the
/// override approved (the preview sees it as the call would), used by the real call (the
/// preview then sees it used).
#[test]
fn the_preview_is_the_real_call_with_the_approvals_on_record() {
    let config = format!(
        "{CONFIG}\n[roles.author]\ndeny = [\"git_push\"]\n\n[approvals]\nwait_seconds = 0\nmay_override = [\"role_not_permitted\"]\n"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    runtime.block_on(async move {
        tokio::task::spawn_blocking(move || {
            let f = fleet_of(&config, Some(std::time::Duration::from_secs(5)));
            let member = f.config.member("prgs-author").unwrap();
            let preview =
                || capability_reply(&f.gate, member, "git_push", Some(&f.worker), false, None, None, at(20)).value;
            let t = tool("git_push");
            let real = || {
                f.control.decide(
                    AttachmentId(1),
                    &ToolCall { tool: &t, arguments: None, answers: &[], link: None, settles: None, catalogue: None },
                )
            };
            assert_eq!(preview()["blocker_kind"], "role_not_permitted");
            let refused = real();
            assert_eq!(refused.decision.blocker_kind.map(|k| k.as_str()), Some("role_not_permitted"));
            let id = f.store.list_approvals(true).unwrap()[0].id.clone();
            assert!(matches!(
                f.store.answer_approval(&id, (&alice(), &Default::default()), true, None, at(20)).unwrap(),
                fleetgate_store::Answered::Recorded(_)
            ));
            let seen = preview();
            assert_eq!(seen["allowed"], true, "the preview reads the approval on record: {seen}");
            assert_eq!(
                f.store.approval(&id).unwrap().unwrap().state,
                fleetgate_core::approval::ApprovalState::Approved,
                "a preview uses nothing"
            );
            assert!(real().decision.allowed, "the real call uses it");
            assert_eq!(preview()["blocker_kind"], "role_not_permitted", "used: the preview sees it gone");
            f.control.on_shutdown("test");
        })
        .await
        .unwrap();
    });
}

/// `[approvals] may_override = ["role_not_permitted"]`: a call the role may not make is not
/// refused from memory (`decide_now` defers it) but by the full gate, which records the
/// request; once an operator approves it, the identical call passes once.
#[test]
fn a_role_refusal_the_operator_may_override_passes_once_approved() {
    let config = format!(
        "{CONFIG}\n[roles.author]\ndeny = [\"git_push\"]\n\n[approvals]\nmay_override = [\"role_not_permitted\"]\n"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    runtime.block_on(async move {
        tokio::task::spawn_blocking(move || {
            let f = fleet_of(&config, Some(std::time::Duration::from_secs(5)));
            let t = tool("git_push");
            let call = ToolCall { tool: &t, arguments: None, answers: &[], link: None, settles: None, catalogue: None };
            let refused = f.control.decide(AttachmentId(1), &call);
            // Its definition known now, the call is still not refused from memory: only the
            // full gate records the request an operator may grant.
            let now = f.control.decide_now(AttachmentId(1), &call);
            assert!(now.is_none(), "an overridable refusal is not judged from memory");
            assert_eq!(refused.decision.blocker_kind.map(|k| k.as_str()), Some("role_not_permitted"));
            let requests = f.store.list_approvals(true).unwrap();
            assert_eq!(requests.len(), 1, "{requests:?}");
            assert!(requests[0].why.starts_with("overrides role_not_permitted"), "{:?}", requests[0].why);
            let text = refused.decision.reasons.join(" ");
            assert!(text.contains(&requests[0].id), "{text}");
            assert!(matches!(
                f.store.answer_approval(&requests[0].id, (&alice(), &Default::default()), true, None, at(20)).unwrap(),
                fleetgate_store::Answered::Recorded(_)
            ));
            let allowed = f.control.decide(AttachmentId(1), &call);
            assert!(allowed.decision.allowed, "{:?}", allowed.decision);
            let again = f.control.decide(AttachmentId(1), &call);
            assert_eq!(again.decision.blocker_kind.map(|k| k.as_str()), Some("role_not_permitted"), "once");
            f.control.on_shutdown("test");
        })
        .await
        .unwrap();
    });
}

/// A read-only call a rule asks about is never answered from memory: only the full gate
/// records the request an operator answers (from memory it would wait for no one).
#[test]
fn a_read_only_call_a_rule_asks_about_is_judged_by_the_full_gate() {
    let asking = format!(
        "{CONFIG}\n[approvals]\nwait_seconds = 0\n\n[[rules]]\ntool = \"git_log\"\nroles = [\"author\"]\nclass = \"read_only\"\ndecision = \"ask\"\n"
    );
    with_fleet_of(asking, |f| {
        let t = tool("git_log");
        let call = ToolCall { tool: &t, arguments: None, answers: &[], link: None, settles: None, catalogue: None };
        let asked = f.control.decide(AttachmentId(1), &call);
        assert_eq!(asked.decision.blocker_kind.map(|k| k.as_str()), Some("approval_pending"));
        assert_eq!(f.store.list_approvals(true).unwrap().len(), 1, "a request an operator can answer");
        assert!(f.control.decide_now(AttachmentId(1), &call).is_none(), "never from memory");
    });
}

/// A denial stands for the exact call whoever asks it (issue 53): a new session of the same
/// member asking the identical call is refused `approval_denied`, naming the denial, and no
/// new request is recorded (so no one is notified again); other arguments are another call.
#[test]
fn a_denial_stands_for_the_exact_call_in_a_new_session() {
    let asking = format!(
        "{CONFIG}\n[approvals]\nwait_seconds = 0\n\n[[rules]]\ntool = \"git_log\"\nroles = [\"author\"]\nclass = \"read_only\"\ndecision = \"ask\"\n"
    );
    with_fleet_of(asking, |f| {
        let t = tool("git_log");
        let args = json!({ "max_count": 3 }).as_object().cloned().unwrap();
        let call =
            ToolCall { tool: &t, arguments: Some(&args), answers: &[], link: None, settles: None, catalogue: None };
        let asked = f.control.decide(AttachmentId(1), &call);
        assert_eq!(asked.decision.blocker_kind.map(|k| k.as_str()), Some("approval_pending"));
        let id = f.store.list_approvals(true).unwrap()[0].id.clone();
        assert!(matches!(
            f.store.answer_approval(&id, (&alice(), &Default::default()), false, Some("not today"), at(20)).unwrap(),
            fleetgate_store::Answered::Recorded(_)
        ));
        // A new session: another attachment, another worker.
        let client = ClientAttach {
            client_name: "codex".into(),
            client_version: "1".into(),
            protocol_version: "2025-11-25".into(),
            principal: None,
            stateless: false,
        };
        f.control.on_client_attach(AttachmentId(2), &client).unwrap();
        assert_eq!(f.store.list_workers().unwrap().len(), 2, "two workers");
        let again = f.control.decide(AttachmentId(2), &call);
        assert_eq!(again.decision.blocker_kind.map(|k| k.as_str()), Some("approval_denied"), "{:?}", again.decision);
        assert!(again.decision.reasons.join(" ").contains(&id), "{:?}", again.decision.reasons);
        assert_eq!(f.store.list_approvals(false).unwrap().len(), 1, "no new request");
        let other = json!({ "max_count": 4 }).as_object().cloned().unwrap();
        let call = ToolCall { arguments: Some(&other), ..call };
        let asked = f.control.decide(AttachmentId(2), &call);
        assert_eq!(asked.decision.blocker_kind.map(|k| k.as_str()), Some("approval_pending"), "another call");
        assert_eq!(f.store.list_approvals(true).unwrap().len(), 1);
    });
}

/// The operator answering in these tests.
fn alice() -> fleetgate_core::approval::Approver {
    fleetgate_core::approval::Approver { id: "os:alice".into(), ..Default::default() }
}

/// gitea-mcp's dialect, counting how often it is asked what a call does (`establish`,
/// `evident`); every other question is passed through uncounted.
#[derive(Debug)]
struct Counting {
    inner: &'static dyn Dialect,
    asked: std::sync::atomic::AtomicUsize,
}

impl Counting {
    fn asked(&self) -> usize {
        self.asked.load(std::sync::atomic::Ordering::SeqCst)
    }
}

use fleetgate_core::dialect::kit::{self, Vocabulary};
use fleetgate_core::dialect::{DialectError, Op, PendingAt, PrFacts, PrTarget, Pushed, RestCall, Server, ToolAnswer};
use fleetgate_core::effect::{Answered, Effect, Read};
use fleetgate_core::rules::Rule;
use fleetgate_core::workflow::ReviewVerdict;

impl Dialect for Counting {
    fn vocabulary(&self) -> &'static Vocabulary {
        self.inner.vocabulary()
    }
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn server(&self) -> &'static Server {
        self.inner.server()
    }
    fn rules(&self) -> Vec<Rule> {
        self.inner.rules()
    }
    fn alias_groups(&self) -> &'static [&'static [&'static str]] {
        self.inner.alias_groups()
    }
    fn number_keys(&self) -> &'static [&'static str] {
        self.inner.number_keys()
    }
    fn check_parse(&self, tool: &str, args: &JsonObject) -> Result<(), fleetgate_core::forge_call::Ambiguity> {
        self.inner.check_parse(tool, args)
    }
    fn grammar(&self) -> &fleetgate_core::textref::Grammar {
        self.inner.grammar()
    }
    fn state(&self, call: &kit::Call<'_>, cx: kit::Cx<'_>) -> kit::Step<Effect> {
        self.inner.state(call, cx)
    }
    fn shown(&self, call: &kit::Call<'_>) -> Effect {
        self.inner.shown(call)
    }
    fn establish(
        &self,
        tool: &str,
        args: &JsonObject,
        schema: Option<&JsonObject>,
        schemas: &dyn Schemas,
        answers: &[Answered],
    ) -> Result<Effect, Vec<Read>> {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.establish(tool, args, schema, schemas, answers)
    }
    fn evident(&self, tool: &str, args: &JsonObject, schema: Option<&JsonObject>) -> Effect {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.evident(tool, args, schema)
    }
    fn pr_target(&self, tool: &str, args: &JsonObject) -> Option<PrTarget> {
        self.inner.pr_target(tool, args)
    }
    fn review_verdict(&self, tool: &str, args: &JsonObject) -> Option<ReviewVerdict> {
        self.inner.review_verdict(tool, args)
    }
    fn review_is_pinned(&self, tool: &str, args: &JsonObject) -> bool {
        self.inner.review_is_pinned(tool, args)
    }
    fn pr_read(&self, target: &PrTarget, schemas: &dyn Schemas) -> Result<Read, DialectError> {
        self.inner.pr_read(target, schemas)
    }
    fn pr_facts(&self, answer: &Value) -> Result<PrFacts, DialectError> {
        self.inner.pr_facts(answer)
    }
    fn merge_pin(&self) -> Option<&'static str> {
        self.inner.merge_pin()
    }
    fn review_pin(&self) -> Option<&'static str> {
        self.inner.review_pin()
    }
    fn pinned_merge(&self, target: &PrTarget, head: &str, args: &JsonObject) -> Option<RestCall> {
        self.inner.pinned_merge(target, head, args)
    }
    fn rest_base(&self, host: Option<&str>) -> Result<String, DialectError> {
        self.inner.rest_base(host)
    }
    fn rest_answer(&self, call: &RestCall, url: &str, status: u16, body: &str) -> ToolAnswer {
        self.inner.rest_answer(call, url, status, body)
    }
    fn pending_review(
        &self,
        tool: &str,
        args: &JsonObject,
        schemas: &dyn Schemas,
        answers: &[Answered],
    ) -> Result<PendingAt, Vec<Read>> {
        self.inner.pending_review(tool, args, schemas, answers)
    }
    fn pending_review_note(&self) -> &'static str {
        self.inner.pending_review_note()
    }
    fn repository(&self, args: &JsonObject) -> Option<(String, String)> {
        self.inner.repository(args)
    }
    fn created_pr(&self, answer: &Value) -> Option<u64> {
        self.inner.created_pr(answer)
    }
    fn pushed(&self, tool: &str, args: &JsonObject) -> Option<Pushed> {
        self.inner.pushed(tool, args)
    }
    fn tip_read(&self, owner: &str, repo: &str, branch: &str, schemas: &dyn Schemas) -> Result<Read, DialectError> {
        self.inner.tip_read(owner, repo, branch, schemas)
    }
    fn tip_of(&self, answer: &Value) -> Option<String> {
        self.inner.tip_of(answer)
    }
    fn closes(&self, tool: &str, args: &JsonObject) -> Option<PrTarget> {
        self.inner.closes(tool, args)
    }
    fn action_call(&self, action: &str) -> Option<(&'static str, JsonObject)> {
        self.inner.action_call(action)
    }
    fn is_not_found(&self, error: &str) -> bool {
        self.inner.is_not_found(error)
    }
    fn call(&self, op: &Op<'_>) -> (&'static str, JsonObject) {
        self.inner.call(op)
    }
    fn surface(&self) -> &'static fleetgate_core::dialect::table::Surface {
        self.inner.surface()
    }
    fn reference(&self) -> String {
        self.inner.reference()
    }
    fn tools(&self) -> Vec<&'static str> {
        self.inner.tools()
    }
}

/// No schema listed: every read under the dialect's newest names.
struct NoneListed;

impl Schemas for NoneListed {
    fn schema(&self, _tool: &str) -> Option<JsonObject> {
        None
    }
}

/// A downstream that must not be read: the call judged here needs no read of the forge.
#[derive(Debug)]
struct NoReads;

impl DownstreamLink for NoReads {
    fn call_tool(
        &self,
        name: &str,
        _arguments: JsonObject,
    ) -> Result<fleetgate_gateway::rmcp::model::CallToolResult, DownstreamError> {
        panic!("`{name}` was read, but the call needs no read")
    }
}

/// Drive `judgement` as the gateway's one loop does, deciding on `control`; the verdict.
fn drive(control: &FleetControl, mut judgement: Box<dyn Judgement>) -> fleetgate_gateway::Verdict {
    loop {
        match judgement.next() {
            Step::Serialize(_) => {}
            Step::Read(reads) => panic!("reads asked: {reads:?}"),
            Step::Decide => {
                let verdict = control.decide_judged(AttachmentId(1), &*judgement, &NoReads);
                judgement.decided(verdict);
            }
            Step::Hold(_) => judgement.held(false),
            Step::Done(verdict) => return verdict,
        }
    }
}

/// Issue 56: a forwarded mutating call is parsed once and the dialect is asked what it does
/// once, the answer carried from the serial key through the decision. The same control plane
/// asked the way the gateway asked before (`decide_now`, `serial_key`, `reads`, `decide`,
/// each working it out again: [`Stepwise`]) asks the dialect four times.
#[test]
fn the_dialect_is_asked_once_per_forwarded_mutating_call() {
    let config = CONFIG.replace("[fleet]\n", "[fleet]\nforge = \"gitea-mcp\"\n");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    runtime.block_on(async move {
        tokio::task::spawn_blocking(move || {
            let inner = fleetgate_core::dialect::by_name("gitea-mcp").unwrap();
            let counting: &'static Counting =
                Box::leak(Box::new(Counting { inner, asked: std::sync::atomic::AtomicUsize::new(0) }));
            let Fleet { _dir, control, .. } =
                fleet_judged(&config, Some(std::time::Duration::from_secs(5)), None, Some(counting));
            let control = Arc::new(control);
            let arguments = json!({"method": "create", "owner": "o", "repo": "r", "title": "t", "body": "b"});
            let call = CallToJudge {
                tool: tool("issue_write"),
                arguments: arguments.as_object().cloned(),
                catalogue: Arc::new(NoneListed),
            };
            // Judged as the gateway judges it now: the control plane's own judgement.
            let judgement = control.judge(AttachmentId(1), &call).expect("the fleet's control plane judges");
            let verdict = drive(&control, judgement);
            assert!(verdict.decision.allowed, "{verdict:?}");
            assert_eq!(verdict.class, fleetgate_gateway::ToolClass::Mutating);
            assert_eq!(counting.asked(), 1, "the dialect was asked what the call does more than once");

            // The same call the way the gateway asked before: each trip works it out again.
            let before = counting.asked();
            let stepwise = Stepwise::journey(control.clone(), AttachmentId(1), call);
            let verdict = drive(&control, Box::new(stepwise));
            assert!(verdict.decision.allowed, "{verdict:?}");
            assert_eq!(counting.asked() - before, 4, "decide_now, serial_key, reads and decide each ask");
            control.on_shutdown("test");
        })
        .await
        .unwrap();
    });
}

/// A forge of one repository, `org/repo` (default branch `main`): PR 1 `feature` → `main`
/// and PR 2 `feature` → `dev`, both open at [`HEAD`], nobody's review on them.
struct OnePr;

impl fleetgate_control::gate::workflow::ForgeReader for OnePr {
    fn read(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<Value, fleetgate_control::gate::workflow::ForgeError> {
        let pr = arguments.get("pull_number").or_else(|| arguments.get("index")).and_then(Value::as_u64);
        let base = match pr {
            Some(1) => "main",
            Some(2) => "dev",
            _ => "",
        };
        match (tool, arguments.get("method").and_then(Value::as_str)) {
            ("search_repos", _) => Ok(json!([{ "full_name": "org/repo", "default_branch": "main" }])),
            ("list_pull_requests", _) if arguments.get("page").and_then(Value::as_u64) == Some(1) => Ok(
                json!([{ "number": 1, "head": "feature", "base": "main" }, { "number": 2, "head": "feature", "base": "dev" }]),
            ),
            ("list_pull_requests" | "issue_read", _) => Ok(json!([])),
            ("pull_request_read", Some("get_review_comments" | "get_reviews")) => Ok(json!([])),
            ("pull_request_read", _) if !base.is_empty() => Ok(json!({
                "number": pr, "state": "open",
                "head": { "ref": "feature", "sha": HEAD, "repo": { "full_name": "org/repo" } },
                "base": { "ref": base, "repo": { "full_name": "org/repo", "default_branch": "main" } },
            })),
            (other, _) => Err(fleetgate_control::gate::workflow::ForgeError::new(
                fleetgate_control::gate::workflow::ForgeErrorKind::Refused,
                format!("no {other} {arguments:?}"),
            )),
        }
    }
}

/// The hostile sequence around the PR workflow when it cannot judge the merger (no worker
/// owns the calling session, so no actor): the roster lets an operator override
/// `session_attachment_missing`, the operator approves the exact call, and the merger then
/// merges without the head pin (`head_commit_id`) the workflow would have added. Onto the
/// protected default branch nothing an operator approves stands in for the review the
/// workflow could not look for (`reviewed-merge`, refused at once, no request recorded);
/// onto an unprotected branch the approved override is used, and the merge is still never
/// forwarded at whatever head the PR has then (`unpinned-merge`).
#[test]
fn a_merge_the_workflow_could_not_judge_is_never_forwarded_unreviewed_or_unpinned() {
    let config = format!(
        "{}\n[[members]]\nnamespace = \"gitea-merger\"\nprofile = \"prgs-merger\"\nrole = \"merger\"\n\n\
         [approvals]\nwait_seconds = 0\nmay_override = [\"session_attachment_missing\"]\n",
        CONFIG.replace("[fleet]\n", "[fleet]\nforge = \"gitea-mcp\"\n")
    );
    with_fleet_of(config, |f| {
        f.host.run(4300, &[MANAGED]);
        f.store.upsert_runtime(&row("gitea-merger", "prgs-merger", "merger", 4300, "fleet-a")).unwrap();
        let gitea = fleetgate_core::dialect::by_name("gitea-mcp").unwrap();
        // The running roster in shadow too: a candidate judges the call as the live gate does.
        let shadow = fleetgate_control::gate::ShadowRules::new(Arc::new(f.config.clone()));
        let gate = f.gate.clone().with_dialect(gitea).with_shadow(shadow);
        let merger = f.config.member("prgs-merger").unwrap();
        let decide = |pr: u64| {
            let args =
                json!({ "method": "merge", "owner": "org", "repo": "repo", "pull_number": pr, "style": "merge" });
            let args = args.as_object().cloned().unwrap();
            let call = fleetgate_control::gate::Call {
                member: merger,
                tool: "pull_request_write",
                read_only_hint: Some(false),
                arguments: Some(&args),
                schema: None,
                caller: fleetgate_control::gate::Caller::Nobody("no worker owns this session".into()),
                forge: Some(&OnePr),
                schemas: None,
            };
            gate.decide(&call, at(30), None)
        };
        // Onto `main`: the merge's review is the invariant's, so no request an operator could
        // approve is recorded.
        let protected = decide(1);
        assert!(!protected.allowed, "{protected:?}");
        let text = protected.blocked_reasons.join("; ");
        assert!(text.contains("reviewed-merge"), "{text}");
        assert!(f.store.list_approvals(true).unwrap().is_empty(), "nothing to approve: {:?}", protected);
        // Onto `dev`: the override is asked for and approved, and used...
        let first = decide(2);
        assert_eq!(first.blocker_kind.map(|k| k.as_str()), Some("session_attachment_missing"), "{first:?}");
        let requests = f.store.list_approvals(true).unwrap();
        assert_eq!(requests.len(), 1, "{requests:?}");
        assert!(matches!(
            f.store.answer_approval(&requests[0].id, (&alice(), &Default::default()), true, None, at(31)).unwrap(),
            fleetgate_store::Answered::Recorded(_)
        ));
        // ...but a merge the workflow made no pin for is not forwarded.
        let unpinned = decide(2);
        assert_eq!(unpinned.blocker_kind.map(|k| k.as_str()), Some("invariant_violated"), "{unpinned:?}");
        let text = unpinned.blocked_reasons.join("; ");
        assert!(text.contains("carries no head pin (`head_commit_id`)"), "{text}");
        assert_eq!(unpinned.shadow, None, "the same roster in shadow decides it the same: no flip");
    });
}
