//! The page in a real headless Chromium: a healthy fleet with a live PR lease, then a
//! member killed with SIGKILL turning its row stale and the gate banner closed, and the
//! lease released leaving its table — live, without a reload —
//! on a desktop, then on a phone in dark mode. Nothing the page requests leaves its
//! origin.

use crate::support::{Browser, HEAD, Island, get, island, output_dir, serial};
use fleetgate_core::Clock as _;
use fleetgate_core::Timestamp;
use fleetgate_core::audit::AuditEntry;
use fleetgate_core::workflow::{Actor, ClaimPlan, LeaseTerms, PrRef, Purpose};
use fleetgate_host::clock::SystemClock;
use fleetgate_store::{PrClaimOutcome, PrLeaseClaim};

fn refusal_of_a_mutation(island: &Island) {
    island
        .store()
        .append_audit(&AuditEntry {
            id: None,
            at: Timestamp::from_unix(1_800_000_000),
            profile: "prgs-author".into(),
            worker_identity: Some("wrk-claude_code-test".into()),
            tool: "git_commit".into(),
            allowed: false,
            blocker_kind: Some("worker_fenced".into()),
            // A hostile value (issue 43, 7): the page shows its bidi override and variation
            // selector escaped, not reordering or hiding anything.
            reasons: vec![
                "worker wrk-claude_code-test holds epoch 1; the row is at 2".into(),
                "the call named branch ma\u{fe0f}in\u{202e}txt.exe".into(),
            ],
            principal: None,
            call: None,
        })
        .unwrap();
}

const PR: &str = "gitea/acme/widgets#7";
const PR_HEAD: &str = "5f0c2e1d9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d";

/// A review lease on PR 7, claimed now for 15 minutes: its id.
fn lease_under_review(island: &Island) -> String {
    let claim = PrLeaseClaim {
        terms: LeaseTerms {
            pr: PrRef { binding: "gitea/acme/widgets".into(), pr: 7 },
            purpose: Purpose::Review,
            holder: Actor {
                worker: "wrk-claude_code-reviewer".into(),
                profile: "prgs-reviewer".into(),
                client: "claude_code".into(),
                session: "s-1".into(),
                principal: None,
            },
            candidate_head: PR_HEAD.into(),
            target_branch: Some("main".into()),
            target_branch_sha: None,
        },
        ttl_seconds: 900,
        plan: ClaimPlan::Claim { release: vec![] },
    };
    match island.store().claim_pr_lease(&claim, SystemClock.now()).unwrap() {
        PrClaimOutcome::Claimed(lease) => lease.lease_id,
        other => panic!("not claimed: {other:?}"),
    }
}

#[test]
fn a_killed_member_turns_stale_and_closes_the_gate_without_a_reload() {
    let _serial = serial();
    let island = island(1, &["--interval", "0.25"]);
    island.register(1);
    refusal_of_a_mutation(&island);
    let lease_id = lease_under_review(&island);
    let pid = island.inner_pid(1);
    let out = output_dir();
    let mut b = Browser::start();
    b.open(&island.url("/"));

    // Healthy: the gate banner open, the one member running with its pid, cohort and revision.
    let running = format!("tr[data-pid=\"{pid}\"][data-health=\"running\"]");
    b.wait(
        &format!(
            "return document.getElementById('gate').dataset.open === 'true' && !!document.querySelector('{running}')"
        ),
        15.0,
    );
    let row = b.eval(&format!("return document.querySelector('{running}').innerText")).as_str().unwrap().to_owned();
    for expected in ["prgs-author", "gitea-author", "author", "running", &pid.to_string(), "island", &HEAD[..12]] {
        assert!(row.contains(expected), "{expected:?} not in the row {row:?}");
    }
    assert_eq!(b.eval("return document.getElementById('gate-title').innerText"), "Mutation gate open");
    let refusal = b.eval("return document.querySelector('#refusals li').innerText").as_str().unwrap().to_owned();
    assert!(refusal.contains("worker_fenced") && refusal.contains("git_commit"), "{refusal}");
    assert!(refusal.contains("Operator action: stop this server"), "{refusal}");
    assert!(refusal.contains(r"branch ma\u{fe0f}in\u{202e}txt.exe"), "{refusal}");
    assert!(!refusal.contains(['\u{fe0f}', '\u{202e}']), "{refusal}");
    // The live PR lease: PR, purpose, holder, head, and a countdown to its expiry.
    let lease = b.eval(&format!("return document.querySelector('#leases tr[data-pr=\"{PR}\"]').innerText"));
    let lease = lease.as_str().unwrap().to_owned();
    for expected in [PR, "review", "wrk-claude_code-reviewer", "claude_code", &PR_HEAD[..12]] {
        assert!(lease.contains(expected), "{expected:?} not in the lease row {lease:?}");
    }
    assert!(lease.contains(" min") || lease.contains(" s"), "no expiry countdown in {lease:?}");
    // The PR's computed state: under review at the lease's head, the reviewer next.
    let state = b.eval(&format!("return document.querySelector('#prs tr[data-pr=\"{PR}\"]').innerText"));
    let state = state.as_str().unwrap().to_owned();
    for expected in [PR, "ready_for_review", "reviewer", &PR_HEAD[..12], "none"] {
        assert!(state.contains(expected), "{expected:?} not in the PR row {state:?}");
    }
    // The row tables built from the one template: in page order, each titled, labelled by its
    // heading, with its columns and its note.
    let sections = b.eval(
        "return [...document.querySelectorAll('#row-sections > section')].map((s) => \
           [s.id, s.querySelector('.title').innerText, \
            document.getElementById(s.getAttribute('aria-labelledby')).tagName, \
            [...s.querySelectorAll('thead th')].map((th) => th.textContent).join('|')])",
    );
    assert_eq!(
        sections,
        serde_json::json!([
            ["", "Workers", "H2", "Worker|Client|Profile|PID|Epoch|Lease age / TTL|State"],
            ["pr-leases", "PR leases", "H2", "PR|Purpose|Holder|Head|Expires in"],
            ["pr-states", "Pull requests", "H2", "PR|State|Next|Head|Review"],
            ["review-locks", "Review-decision locks", "H2", "PR|Session|Decision|Head"],
        ])
    );
    assert_eq!(b.eval("return document.getElementById('pr-leases-note').innerText"), "1 live");
    assert_eq!(b.eval("return document.getElementById('pr-leases-error').hidden"), true);
    let locks = b.eval("return document.querySelector('#locks tbody').innerText");
    assert_eq!(locks, "no live review-decision locks", "the empty line spans the table's columns");
    assert_eq!(b.eval("return document.querySelector('#locks tbody td').colSpan"), 4);
    // The roster's forge dialect: its keywords shown as what they are, not as a lift.
    let note = b.eval("return document.querySelector('#policy li[data-kind=\"keywords\"]').innerText");
    let note = note.as_str().unwrap().to_owned();
    assert!(note.starts_with("forge keywords gitea-mcp reads as closing an issue: "), "{note}");
    assert_eq!(b.eval("return document.querySelectorAll('#policy li.hard').length"), 0, "nothing is lifted");
    assert_eq!(b.eval("return document.getElementById('policy-section').hidden"), false);
    b.screenshot(&out.join("healthy.png"));

    // Kill the member; the page must follow on its own.
    b.eval("window.fleetgateSameDocument = 'yes'; return true");
    let version = b.eval("return Number(document.body.dataset.version)").as_i64().unwrap();
    island.kill(1);
    let stale = format!("tr[data-pid=\"{pid}\"][data-health=\"stale\"]");
    let took = b.wait(
        &format!(
            "return document.getElementById('gate').dataset.open === 'false' && !!document.querySelector('{stale}')"
        ),
        10.0,
    );
    assert!(took < 10.0, "the page took {took:.1} s");
    assert_eq!(b.eval("return window.fleetgateSameDocument"), "yes", "the page was reloaded");
    assert!(b.eval("return Number(document.body.dataset.version)").as_i64().unwrap() > version);
    let title = b.eval("return document.getElementById('gate-title').innerText").as_str().unwrap().to_owned();
    assert_eq!(title, "Mutation gate CLOSED — fleet_inventory_blocked");
    let action = b.eval("return document.getElementById('gate-action').innerText").as_str().unwrap().to_owned();
    assert_eq!(action, "Operator action: start the prgs-author server (gitea-author) from the fleet's client");
    let stale_row = b.eval(&format!("return document.querySelector('{stale}').innerText")).as_str().unwrap().to_owned();
    assert!(stale_row.contains("stale · dead"), "{stale_row}");
    // The closed gate is the first thing on the page.
    assert_eq!(b.eval("return document.querySelector('main').firstElementChild.id"), "gate");
    assert!(b.eval("return document.getElementById('gate').getBoundingClientRect().top").as_f64().unwrap() < 60.0);
    b.screenshot(&out.join("closed.png"));

    // The lease released: its row goes, live too.
    assert!(island.store().release_pr_lease(&lease_id, None, "released", SystemClock.now()).unwrap());
    b.wait("return document.querySelector('#leases tbody').innerText.includes('no live PR leases')", 10.0);

    // A phone, in dark mode: no sideways scrolling, dark background, the banner still first.
    b.step(serde_json::json!({ "op": "viewport", "width": 390, "height": 844 }));
    b.step(serde_json::json!({ "op": "color_scheme", "value": "dark" }));
    let overflow = b.eval("return document.documentElement.scrollWidth - window.innerWidth").as_f64().unwrap();
    assert!(overflow <= 0.0, "the page scrolls sideways by {overflow} px on a phone");
    let dark = b.eval(
        "const [r, g, b] = getComputedStyle(document.body).backgroundColor.match(/\\d+/g).map(Number); \
         return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255",
    );
    assert!(dark.as_f64().unwrap() < 0.2, "the background is not dark: luminance {dark}");
    assert_eq!(b.eval("return getComputedStyle(document.querySelector('#roster thead')).display"), "none");
    b.screenshot(&out.join("closed-phone-dark.png"));

    // Nothing the page requested, and nothing on the network at all, went anywhere but the
    // dashboard's own origin (the browser's own chrome:// pages are not the network).
    let origin = island.url("");
    let requests = b.step(serde_json::json!({ "op": "requests" }))["urls"].clone();
    let requests: Vec<serde_json::Value> = serde_json::from_value(requests).unwrap();
    let url = |r: &serde_json::Value| r["url"].as_str().unwrap().to_owned();
    let ours: Vec<String> =
        requests.iter().filter(|r| r["document"].as_str().unwrap().starts_with(&origin)).map(url).collect();
    for path in ["/", "/assets/app.js", "/assets/style.css", "/events"] {
        assert!(ours.contains(&format!("{origin}{path}")), "{path} not among {ours:?}");
    }
    for u in &ours {
        assert!(u.starts_with(&origin) || u.starts_with("data:"), "the page requested {u} (origin {origin})");
    }
    let network = ["http:", "https:", "ws:", "wss:", "ftp:"];
    for u in requests.iter().map(url).filter(|u| network.iter().any(|s| u.starts_with(s))) {
        assert!(u.starts_with(&origin), "the browser requested {u} during the test (origin {origin})");
    }
    for asset in ["/", "/assets/app.js", "/assets/style.css"] {
        let body = get(island.addr, asset, &[]).body;
        assert!(
            !body.contains("http://") && !body.contains("https://") && !body.contains("//cdn"),
            "{asset} names an external URL"
        );
    }
}
