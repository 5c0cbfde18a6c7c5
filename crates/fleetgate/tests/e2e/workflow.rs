//! The pull-request workflow end to end: real gateways — an author, two
//! reviewers, a merger — in front of forge fixture processes on one bare repository, each
//! driven by the official Python SDK client. The story: a PR created, a review lease, an
//! approval, a new head that voids it, a re-review, the merge at exactly the approved head
//! (`git log` says so), and every refusal on the way: an approval without a lease, at an
//! old head, a second reviewer claiming a held lease, a self-approval by the authoring
//! session, a merge after a new push, a merge with no merge lease, the forge read failing,
//! and (with a short TTL) an expired lease taken over. Then the operator's `fleetgate pr`,
//! and a changed tool definition pinned, reported, refused under `enforce` and accepted.

use crate::support::{Client, FleetDir, answer, at, bare_repo, forge_fixture, git, serial, wait_until};
use serde_json::{Value, json};
use std::path::PathBuf;

/// The roles of this fleet; `reviewer2` runs in the author's own client session.
const MEMBERS: [(&str, &str); 4] =
    [("author", "author"), ("reviewer", "reviewer"), ("reviewer2", "reviewer"), ("merger", "merger")];

/// Refused with `blocker`, its reasons containing `needle`: a gated call's refusal text
/// starts with the blocker; a control tool answers it as structured JSON.
pub(crate) fn refused(call: (bool, String, Value), blocker: &str, needle: &str) -> String {
    let (err, text, structured) = call;
    assert!(err, "forwarded, not refused: {text}");
    if structured.is_object() && structured.get("blocker_kind").is_some() {
        assert_eq!(structured["blocker_kind"], blocker, "{structured}");
    } else {
        assert!(text.starts_with(blocker), "expected {blocker}: {text}");
    }
    assert!(text.contains(needle), "{needle:?} is named: {text}");
    text
}

pub(crate) struct Fleet {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) f: FleetDir,
    bare: PathBuf,
    fixture: Vec<String>,
    /// Each member's stdio client; `None` for one served elsewhere ([`Fleet::start_except`]).
    clients: Vec<Option<Client>>,
    /// The forge's server the fixture stands in for.
    pub(crate) forge: crate::surfaces::Forge,
    /// The members (name, role), each with its gateway.
    members: Vec<(&'static str, &'static str)>,
    /// GitHub's REST API over HTTP, for a fleet in front of GitHub's server: where the merges
    /// the gateway makes itself land (`GITHUB_HOST`).
    pub(crate) rest: Option<fleetgate_testkit::RestForge>,
}

impl Fleet {
    pub(crate) fn start(extra: &str) -> Self {
        Self::start_with(extra, &[])
    }

    /// The fleet, the fixture of each member named in `flags` started with those flags.
    pub(crate) fn start_with(extra: &str, flags: &[(&str, &[&str])]) -> Self {
        Self::start_on(extra, flags, None)
    }

    /// The fleet on the store at `store_url` (PostgreSQL), else on a SQLite file.
    pub(crate) fn start_on(extra: &str, flags: &[(&str, &[&str])], store_url: Option<String>) -> Self {
        Self::start_forge(crate::surfaces::Forge::Gitea, extra, flags, store_url)
    }

    /// The fleet without a stdio gateway for the members named in `elsewhere`: the test
    /// serves them itself (over HTTP), each before [`Fleet::downstream`].
    pub(crate) fn start_except(extra: &str, elsewhere: &[&str]) -> Self {
        Self::start_all(crate::surfaces::Forge::Gitea, extra, &[], None, elsewhere)
    }

    /// [`start_except`](Self::start_except) on the store at `store_url`, each member in
    /// `elsewhere` declaring `replicas` replicas.
    pub(crate) fn start_replicated(extra: &str, elsewhere: &[&str], replicas: u32, store_url: Option<String>) -> Self {
        Self::start_full(crate::surfaces::Forge::Gitea, extra, &[], store_url, elsewhere, replicas)
    }

    /// The fleet in front of `forge`'s server (the fixture started as that surface).
    pub(crate) fn start_forge(
        forge: crate::surfaces::Forge,
        extra: &str,
        flags: &[(&str, &[&str])],
        store_url: Option<String>,
    ) -> Self {
        Self::start_all(forge, extra, flags, store_url, &[])
    }

    fn start_all(
        forge: crate::surfaces::Forge,
        extra: &str,
        flags: &[(&str, &[&str])],
        store_url: Option<String>,
        elsewhere: &[&str],
    ) -> Self {
        Self::start_full(forge, extra, flags, store_url, elsewhere, 1)
    }

    fn start_full(
        forge: crate::surfaces::Forge,
        extra: &str,
        flags: &[(&str, &[&str])],
        store_url: Option<String>,
        elsewhere: &[&str],
        replicas: u32,
    ) -> Self {
        Self::start_members(forge, &MEMBERS, extra, flags, store_url, elsewhere, replicas, &[])
    }

    /// A fleet of `members` in front of `forge`'s server, the forge with `forks` (each
    /// `owner/name`, a bare clone of the repository beside it, `<owner>-<name>.git`).
    pub(crate) fn start_with_members(
        forge: crate::surfaces::Forge,
        members: &[(&'static str, &'static str)],
        extra: &str,
        forks: &[&str],
    ) -> Self {
        Self::start_members(forge, members, extra, &[], None, &[], 1, forks)
    }

    #[allow(clippy::too_many_arguments)] // One fleet's parts, each its own.
    fn start_members(
        forge: crate::surfaces::Forge,
        members: &[(&'static str, &'static str)],
        extra: &str,
        flags: &[(&str, &[&str])],
        store_url: Option<String>,
        elsewhere: &[&str],
        replicas: u32,
        forks: &[&str],
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut fixture = forge_fixture();
        fixture.extend(forge.fixture_flags().iter().map(|f| (*f).to_owned()));
        let bare = dir.path().join("forge.git");
        for fork in forks {
            let path = dir.path().join(format!("{}.git", fork.replace('/', "-")));
            fixture.extend(["--fork".to_owned(), format!("{fork}={}", path.display())]);
        }
        let bare_s = bare.display().to_string();
        let mut config =
            format!("[fleet]\nname = \"flow\"\ntool_prefix = \"{}\"\nforge = \"{}\"\n", forge.prefix(), forge.name());
        if forge.is_github() {
            // The member's host and token reach its server, and the gateway's own REST merge.
            config.push_str("\n[downstream]\npass_env = [\"GITHUB_HOST\", \"GITHUB_PERSONAL_ACCESS_TOKEN\"]\n");
        }
        for (name, role) in members {
            config.push_str(&format!(
                "\n[[members]]\nnamespace = \"gitea-{name}\"\nprofile = \"prgs-{name}\"\nrole = \"{role}\"\n"
            ));
            if replicas > 1 && elsewhere.contains(name) {
                config.push_str(&format!("replicas = {replicas}\n"));
            }
        }
        let mut command = fixture.clone();
        command.extend(["--repo".to_owned(), bare_s]);
        config.push_str(&format!("\n[workflow]\nforge_command = {command:?}\n{extra}"));
        let mut f = FleetDir::new(&config);
        f.store_url = store_url;
        bare_repo(dir.path(), "forge.git", &f.repo());
        for fork in forks {
            let name = format!("{}.git", fork.replace('/', "-"));
            git(dir.path(), &["clone", "-q", "--bare", "forge.git", &name]);
        }
        // GitHub's REST API on the same forge (and its forks), each member's token standing
        // for its account; `("rest", flags)` gives it flags of its own (`--variant race-merge`).
        let rest = forge.is_github().then(|| {
            let tokens: Vec<(String, String)> = members.iter().map(|(n, _)| (token(n), (*n).to_owned())).collect();
            let tokens: Vec<(&str, &str)> = tokens.iter().map(|(t, l)| (t.as_str(), l.as_str())).collect();
            let own = flags.iter().find(|(n, _)| *n == "rest").map_or(&[][..], |(_, f)| *f);
            let forked: Vec<&str> = fixture.iter().skip_while(|a| *a != "--fork").map(String::as_str).collect();
            let own: Vec<&str> = own.iter().copied().chain(forked).collect();
            fleetgate_testkit::RestForge::start(&fleetgate_testkit::forge_fixture_exe(), &bare, &own, &tokens)
        });
        let mut fleet = Self { dir, f, bare, fixture, clients: Vec::new(), forge, members: members.to_vec(), rest };
        for &(name, _) in members {
            let variant = flags.iter().find(|(n, _)| *n == name).map_or(&[][..], |(_, f)| *f);
            let client = (!elsewhere.contains(&name)).then(|| fleet.gateway(name, variant));
            fleet.clients.push(client);
        }
        let here = members.len() - elsewhere.len();
        assert!(wait_until(20.0, || fleet.f.running_rows() == here), "the fleet did not come up");
        fleet
    }

    /// The downstream command line `name`'s gateway runs: the forge fixture on this fleet's
    /// repository, as `name`'s forge account.
    pub(crate) fn downstream(&self, name: &str) -> Vec<String> {
        let mut downstream = self.fixture.clone();
        downstream.extend(["--repo".to_owned(), self.bare.display().to_string(), "--user".to_owned(), name.to_owned()]);
        downstream
    }

    fn client(&mut self, name: &str) -> &mut Client {
        let i = self.who(name);
        self.clients[i].as_mut().unwrap_or_else(|| panic!("{name} is served elsewhere"))
    }

    /// A gateway for `name` before its own fixture process (with `variant` flags).
    fn gateway(&self, name: &str, variant: &[&str]) -> Client {
        let bare = self.bare.display().to_string();
        let mut downstream: Vec<&str> = self.fixture.iter().map(String::as_str).collect();
        downstream.extend(["--repo", bare.as_str()]);
        // A forge account per member (Gitea refuses an approval by the PR's own poster),
        // unless the variant names one.
        if !variant.contains(&"--user") {
            downstream.extend(["--user", name]);
        }
        downstream.extend_from_slice(variant);
        let mut argv = self.f.serve_argv(&format!("prgs-{name}"), "flow-a", &downstream);
        // The author's client session is shared by reviewer2: its approvals are not independent.
        let session = if name == "reviewer2" { "author" } else { name };
        argv.insert(0, format!("GITEA_MCP_CLIENT_SESSION=sess-{session}"));
        if let Some(rest) = &self.rest {
            argv.insert(0, format!("GITHUB_HOST={}", rest.url));
            argv.insert(0, format!("GITHUB_PERSONAL_ACCESS_TOKEN={}", token(name)));
        }
        Client::start(&argv)
    }

    fn who(&self, name: &str) -> usize {
        self.members.iter().position(|(n, _)| *n == name).unwrap()
    }

    pub(crate) fn call(&mut self, name: &str, tool: &str, args: Value) -> (bool, String, Value) {
        self.client(name).call(tool, at(args))
    }

    /// `name`'s client and the fleet's directory apart: a call may be held on one thread
    /// while the operator answers through the CLI on another.
    pub(crate) fn client_and_dir(&mut self, name: &str) -> (&mut Client, &FleetDir) {
        let i = self.who(name);
        (self.clients[i].as_mut().unwrap_or_else(|| panic!("{name} is served elsewhere")), &self.f)
    }

    /// The call exactly as given: no owner and repo added.
    pub(crate) fn call_as_is(&mut self, name: &str, tool: &str, args: Value) -> (bool, String, Value) {
        self.client(name).call(tool, args)
    }

    pub(crate) fn claim(&mut self, name: &str, pr: i64, head: &str, purpose: &str) -> (bool, String, Value) {
        let tool = format!("{}claim_pr_lease", self.forge.prefix());
        self.call(name, &tool, json!({ "pr": pr, "head": head, "purpose": purpose }))
    }

    fn release(&mut self, name: &str, lease_id: &str) -> (bool, String, Value) {
        let tool = format!("{}release_pr_lease", self.forge.prefix());
        self.client(name).call(&tool, json!({ "lease_id": lease_id }))
    }

    pub(crate) fn git(&self, args: &[&str]) -> String {
        git(&self.bare, args).trim().to_owned()
    }

    /// The author commits `content` to `feature`; the new head.
    pub(crate) fn push(&mut self, content: &str, message: &str) -> String {
        self.push_to("feature", content, message)
    }

    /// The author commits `content` to `f.txt` on `branch`; the new head.
    pub(crate) fn push_to(&mut self, branch: &str, content: &str, message: &str) -> String {
        let existing = self.call("author", "get_file_contents", json!({ "ref": branch, "path": "f.txt" }));
        let sha = (!existing.0).then(|| serde_json::from_str::<Value>(&existing.1).unwrap()["sha"].clone());
        let (tool, commit) = self.forge.write_file(branch, "f.txt", content, message, sha);
        answer(self.call("author", tool, commit));
        self.git(&["rev-parse", branch])
    }

    /// Close `name`'s gateway and start it again: a new worker for the same member.
    pub(crate) fn restart(&mut self, name: &str) {
        let i = self.who(name);
        let fresh = self.gateway(name, &[]);
        if let Some(old) = self.clients[i].replace(fresh) {
            old.close();
        }
    }

    /// Close every stdio gateway, keeping the fleet's directory and store.
    pub(crate) fn stop_gateways(&mut self) {
        for client in self.clients.iter_mut().filter_map(Option::take) {
            client.close();
        }
    }

    pub(crate) fn stop(self) {
        for c in self.clients.into_iter().flatten() {
            c.close();
        }
    }
}

/// `name`'s forge token (the REST stand-in maps it to the login `name`).
fn token(name: &str) -> String {
    format!("tok-{name}")
}

pub(crate) fn approve(pr: i64) -> Value {
    json!({ "method": "create", "pull_number": pr, "state": "APPROVED", "body": "LGTM" })
}

#[test]
fn the_workflow_merges_only_the_independently_approved_head() {
    let _serial = serial();
    let mut fleet = Fleet::start("");
    let main_before = fleet.git(&["rev-parse", "main"]);
    answer(fleet.call("author", "create_branch", json!({ "branch": "feature" })));
    let h1 = fleet.push("one\n", "First");
    let create = json!({ "method": "create", "title": "Feature", "body": "b", "head": "feature", "base": "main" });
    let pr = answer(fleet.call("author", "pull_request_write", create))["number"].as_i64().unwrap();

    // An approval without a lease; a claim at a head that is not the PR's.
    refused(
        fleet.call("reviewer", "pull_request_review_write", approve(pr)),
        "review_lease_required",
        "live review lease",
    );
    refused(fleet.claim("reviewer", pr, &"0".repeat(40), "review"), "stale_head", &h1[..12]);
    // The forge cannot answer for a PR that does not exist: the claim fails closed.
    refused(fleet.claim("reviewer", pr + 100, &h1, "review"), "forge_unavailable", "reading PR");
    let (err, text, lease) = fleet.claim("reviewer", pr, &h1, "review");
    assert!(!err, "{text}");
    assert_eq!(lease["lease"]["candidate_head"], h1.as_str());
    // A second reviewer may not claim the live lease.
    refused(fleet.claim("reviewer2", pr, &h1, "review"), "review_lease_held", "worker");
    assert_eq!(answer(fleet.call("reviewer", "pull_request_review_write", approve(pr)))["state"], "APPROVED");

    // A new head voids the approval: the reviewer's lease is stale, the merge needs approval.
    let h2 = fleet.push("two\n", "Second");
    refused(fleet.call("reviewer", "pull_request_review_write", approve(pr)), "stale_head", &h2[..12]);
    let merge = json!({ "method": "merge", "pull_number": pr });
    refused(fleet.call("merger", "pull_request_write", merge.clone()), "approval_required", "no live merge lease");
    assert!(!fleet.claim("merger", pr, &h2, "merge").0);
    let text = refused(
        fleet.call("merger", "pull_request_write", merge.clone()),
        "approval_required",
        "no independent approval",
    );
    assert!(text.contains("historical"), "the old approval is named historical: {text}");

    // The author's own session approving does not count.
    assert!(!fleet.claim("reviewer", pr, &h2, "review").0, "the reviewer renews at the new head");
    let id = fleet_lease(&mut fleet, pr, "review");
    let (_, _, released) = fleet.release("reviewer", &id);
    assert_eq!(released["released"], true, "{released}");
    assert!(!fleet.claim("reviewer2", pr, &h2, "review").0);
    answer(fleet.call("reviewer2", "pull_request_review_write", approve(pr)));
    refused(
        fleet.call("merger", "pull_request_write", merge.clone()),
        "approval_required",
        "session that created the PR",
    );

    // The independent reviewer re-reviews at the new head; the merge goes through at it.
    let id = fleet_lease(&mut fleet, pr, "review");
    assert_eq!(fleet.release("reviewer2", &id).2["released"], true);
    assert!(!fleet.claim("reviewer", pr, &h2, "review").0);
    answer(fleet.call("reviewer", "pull_request_review_write", approve(pr)));
    let assessed = fleet.call("merger", "gitea_assess_pr", json!({ "pr": pr })).2;
    assert_eq!(
        (assessed["approved_at_head"].as_bool(), assessed["current_head"].as_str()),
        (Some(true), Some(h2.as_str())),
        "{assessed}"
    );
    assert_eq!(answer(fleet.call("merger", "pull_request_write", merge.clone()))["merged"], true);
    // The allowed merge is audited with what it was judged as: the PR, the head, the base.
    let judged = format!("judged merge (merge) of forge/fleet/forge#{pr} at head {} onto main", &h2[..12]);
    let audit = fleet.f.audit_until(|e| e.iter().any(|x| x.to_string().contains(&judged)));
    assert!(audit.to_string().contains(&judged), "{judged}: {audit}");
    let parents = fleet.git(&["rev-list", "--parents", "-n", "1", "main"]);
    assert_eq!(
        parents.split(' ').collect::<Vec<_>>()[1..],
        [main_before.as_str(), h2.as_str()],
        "merged exactly the approved head"
    );
    // The merge released the PR's leases.
    let listed = fleet.f.cli(&["pr", "list", "--json"]);
    assert_eq!(listed["leases"].as_array().unwrap().len(), 0, "{listed}");
    let shown = fleet.f.cli(&["pr", "show", &pr.to_string(), "--owner", "fleet", "--repo", "forge", "--json"]);
    assert_eq!(shown["current_head"], h2.as_str(), "{shown}");
    assert_eq!(shown["historical_decisions"].as_array().unwrap().len(), 1, "{shown}");

    // The operator's releases: by id with a reason, and --stale (the forge says merged).
    assert!(!fleet.claim("reviewer", pr, &h2, "review").0, "a lease on the merged PR, left behind");
    assert!(!fleet.claim("merger", pr, &h2, "merge").0);
    let merge_lease = fleet_lease(&mut fleet, pr, "merge");
    let released = fleet.f.cli(&["pr", "release", &merge_lease, "--reason", "operator cleanup", "--json"]);
    assert_eq!(released["released"][0], merge_lease.as_str(), "{released}");
    let stale = fleet.f.cli(&["pr", "release", "--stale", "--json"]);
    assert_eq!(stale["released"].as_array().unwrap().len(), 1, "the review lease of a merged PR: {stale}");
    assert_eq!(fleet.f.cli(&["pr", "list", "--json"])["leases"].as_array().unwrap().len(), 0);
    let all = fleet.f.cli(&["pr", "list", "--all", "--json"]);
    let reasons: Vec<&str> =
        all["leases"].as_array().unwrap().iter().filter_map(|l| l["released_reason"].as_str()).collect();
    assert!(reasons.contains(&"operator cleanup") && reasons.contains(&"stale: merged"), "{all}");

    // Every workflow decision is audited with the PR and the head.
    let wanted = ["review_lease_required", "stale_head", "review_lease_held", "approval_required", "forge_unavailable"];
    let audit = fleet.f.audit_until(|e| wanted.iter().all(|w| e.iter().any(|x| x["blocker_kind"] == *w)));
    let kinds: Vec<&str> =
        audit["entries"].as_array().unwrap().iter().filter_map(|e| e["blocker_kind"].as_str()).collect();
    for kind in ["review_lease_required", "stale_head", "review_lease_held", "approval_required", "forge_unavailable"] {
        assert!(kinds.contains(&kind), "{kind} audited: {kinds:?}");
    }
    fleet.stop();
}

/// The id of `purpose`'s live lease on `pr`, from `fleetgate pr list`.
pub(crate) fn fleet_lease(fleet: &mut Fleet, pr: i64, purpose: &str) -> String {
    let listed = fleet.f.cli(&["pr", "list", "--json"]);
    let lease = listed["leases"].as_array().unwrap().iter().find(|l| l["pr"] == pr && l["purpose"] == purpose).cloned();
    lease.unwrap_or_else(|| panic!("no live {purpose} lease: {listed}"))["lease_id"].as_str().unwrap().to_owned()
}

#[test]
fn an_expired_lease_is_taken_over_and_its_old_holder_refused() {
    let _serial = serial();
    let mut fleet = Fleet::start("lease_ttl_seconds = 2\n");
    answer(fleet.call("author", "create_branch", json!({ "branch": "feature" })));
    let h1 = fleet.push("one\n", "First");
    let create = json!({ "method": "create", "title": "Feature", "body": "b", "head": "feature", "base": "main" });
    let pr = answer(fleet.call("author", "pull_request_write", create))["number"].as_i64().unwrap();
    assert!(!fleet.claim("reviewer", pr, &h1, "review").0);
    // The short TTL in config runs out (polled, bounded); then the lease may be taken over.
    assert!(wait_until(10.0, || fleet.f.cli(&["pr", "list", "--json"])["leases"].as_array().unwrap().is_empty()));
    let (err, text, _) = fleet.claim("reviewer2", pr, &h1, "review");
    assert!(!err, "{text}");
    refused(
        fleet.call("reviewer", "pull_request_review_write", approve(pr)),
        "review_lease_required",
        "held by worker",
    );
    let all = fleet.f.cli(&["pr", "list", "--all", "--json"]);
    let reasons: Vec<&str> =
        all["leases"].as_array().unwrap().iter().filter_map(|l| l["released_reason"].as_str()).collect();
    assert_eq!(reasons, ["taken_over"], "{all}");
    fleet.stop();
}

#[test]
fn a_changed_tool_definition_is_reported_refused_under_enforce_and_accepted() {
    let _serial = serial();
    let mut fleet = Fleet::start("");
    // Reconfigure to enforce, restart the author before a changed server.
    let config = std::fs::read_to_string(fleet.f.config())
        .unwrap()
        .replace("[workflow]", "[tools]\npin = \"enforce\"\n\n[workflow]");
    std::fs::write(fleet.f.config(), config).unwrap();
    fleet.client("author").tools();
    let pinned = fleet.f.cli(&["tools", "list", "--json"]);
    assert_eq!(pinned["changed"], 0, "{pinned}");
    let author = fleet.clients.remove(0);
    author.expect("the author's stdio client").close();
    let mut changed = fleet.gateway("author", &["--variant", "changed-description"]);
    changed.tools();
    let listed = fleet.f.cli(&["tools", "list", "--profile", "prgs-author", "--json"]);
    assert_eq!(listed["changed"], 1, "{listed}");
    let (_, _, ctx) = changed.call("gitea_get_runtime_context", json!({}));
    assert_eq!(ctx["tool_changes"][0]["tool"], "pull_request_write", "{ctx}");
    let create = at(json!({ "method": "create", "title": "t", "body": "b", "head": "main", "base": "main" }));
    refused(changed.call("pull_request_write", create.clone()), "tool_definition_changed", "pull_request_write");
    let accepted = fleet.f.cli(&["tools", "accept", "--profile", "prgs-author", "pull_request_write", "--json"]);
    assert_eq!(accepted["accepted"].as_array().unwrap().len(), 1, "{accepted}");
    let (err, text, _) = changed.call("pull_request_write", create);
    assert!(!text.starts_with("tool_definition_changed"), "accepted: {err} {text}");
    let audit = fleet.f.audit_until(|e| e.iter().any(|x| x["blocker_kind"] == "tool_definition_changed"));
    assert!(
        audit["entries"].as_array().unwrap().iter().any(|e| e["blocker_kind"] == "tool_definition_changed"),
        "{audit}"
    );
    changed.close();
    fleet.stop();
}
