//! The demo's second and third acts, as the clients and the operator tell them.
//!
//! Second act, the pull-request workflow: a PR created, a review lease, an approval, a new
//! head that voids it, a re-review — and one refused attempt per blocker on the way.
//! Third act, an operator's approval of one exact call: a rule asks before any merge; the
//! merger's merge waits and is refused `approval_pending`; the operator lists it and approves
//! it from the CLI; the merger's retry with other arguments is not covered (a new request);
//! the identical retry passes, once, and lands exactly the approved head.

use crate::flow::Flow;
use crate::{Error, Result};
use fleetgate_core::dialect::{Dialect, Op};
use serde_json::{Value, json};
use std::path::Path;

/// Appended to the demo's roster: every merge asks the operator, and a gateway holds a call
/// one second before it refuses it `approval_pending` (the request stays open). The rule
/// names the forge's merge call as its dialect spells it.
fn ask_before_merge(dialect: &dyn Dialect) -> String {
    let (tool, args) = dialect.call(&Op::Merge { pr: 1, squash: false });
    let method = args.get("method").and_then(Value::as_str);
    let args = method.map(|m| format!("args = {{ \"/method\" = [{m:?}] }}\n")).unwrap_or_default();
    format!(
        "\n[approvals]\nwait_seconds = 1\n\n[[rules]]\ntool = {tool:?}\n{args}roles = [\"merger\"]\ndecision = \"ask\"\n"
    )
}

fn claim(pr: i64, head: &str, purpose: &str) -> Value {
    json!({ "pr": pr, "head": head, "purpose": purpose })
}

fn number(pr: i64) -> u64 {
    u64::try_from(pr).unwrap_or_default()
}

/// The second act, up to the merge: the PR and the head a reviewer approved last.
async fn workflow(act: &mut Flow) -> Result<(i64, String)> {
    let claim_tool = act.control("claim_pr_lease");
    act.act("author", Op::CreateBranch { branch: "feature" }).await?;
    let h1 = act.push("one\n", "The feature", true).await?;
    let create = Op::OpenPr { head: "feature", base: "main", title: "Feature", body: "Adds it." };
    let (_, answer) = act.act("author", create).await?;
    let pr = act.opened(&answer)?;
    let merge = Op::Merge { pr: number(pr), squash: false };
    let approve = Op::Approve { pr: number(pr) };
    act.act("reviewer", merge).await?; // role_not_permitted
    act.act("reviewer", approve).await?; // review_lease_required
    act.call("reviewer", &claim_tool, claim(pr, &h1, "review")).await?;
    act.call("reviewer2", &claim_tool, claim(pr, &h1, "review")).await?; // review_lease_held
    act.act("reviewer", approve).await?;
    let h2 = act.push("two\n", "Second thoughts", false).await?;
    act.act("reviewer", approve).await?; // stale_head
    act.call("merger", &claim_tool, claim(pr, &h2, "merge")).await?;
    act.act("merger", merge).await?; // approval_required: historical
    act.call("reviewer", &claim_tool, claim(pr, &h2, "review")).await?;
    act.act("reviewer", approve).await?;
    Ok((pr, h2))
}

/// The third act: the merge waits for the operator, who approves exactly it.
async fn operator_approval(act: &mut Flow, pr: i64) -> Result<()> {
    let merge = Op::Merge { pr: number(pr), squash: false };
    act.act("merger", merge).await?; // approval_pending
    let (_, listed) = act.operator(&["approvals", "list"]).await?;
    let id = listed["approvals"]
        .get(0)
        .and_then(|r| r["id"].as_str())
        .ok_or_else(|| Error::new(format!("no approval request was listed: {listed}")))?
        .to_owned();
    let (approved, answer) = act.operator(&["approvals", "approve", &id, "--reason", "release 1.0"]).await?;
    if !approved {
        return Err(Error::new(format!("the operator could not approve {id}: {answer}")));
    }
    act.act("merger", Op::Merge { pr: number(pr), squash: true }).await?; // approval_pending: not what was approved
    act.act("merger", merge).await?; // the approved call, once
    Ok(())
}

fn outcome(act: &Flow, head: &str) -> Result<String> {
    let parents = act.git(&["rev-list", "--parents", "-n", "1", "main"])?;
    Ok(if parents.split(' ').nth(2) == Some(head) {
        format!("main's merge commit has the approved head {} as its second parent", &head[..12.min(head.len())])
    } else {
        format!("main is at {parents}: NOT the approved head {head}")
    })
}

/// Tell the second and third acts in `dir` (`exe` the fleetgate binary, `forge` the forge
/// stand-in's, `checkout` the repository the forge starts from, `dialect` the forge's server
/// it plays): the lines to show and the steps as JSON. Every process it starts is stopped
/// before it returns.
pub fn run(
    exe: &Path,
    forge: &Path,
    dir: &Path,
    checkout: &Path,
    dialect: &'static dyn Dialect,
) -> Result<(Vec<String>, Value)> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::new(format!("cannot start the demo's runtime: {e}")))?;
    let (steps, split, outcome) = runtime.block_on(async {
        let mut act = Flow::start(exe, forge, dir, checkout, &ask_before_merge(dialect), dialect).await?;
        let told = async {
            let (pr, head) = workflow(&mut act).await?;
            let split = act.steps.len();
            operator_approval(&mut act, pr).await?;
            Ok::<_, Error>((split, outcome(&act, &head)?))
        }
        .await;
        let steps = std::mem::take(&mut act.steps);
        act.stop().await;
        let (split, outcome) = told?;
        Ok::<_, Error>((steps, split, outcome))
    })?;
    let show = |s: &crate::flow::Step| {
        let mark = if s.allowed { "ok     " } else { "REFUSED" };
        format!("{mark} {:9} {}\n        {}", s.who, s.what, s.said)
    };
    let mut lines =
        vec![format!("== the pull-request workflow, four gateways over one forge ({})", dialect.server().title)];
    lines.extend(steps[..split].iter().map(show));
    lines.push(String::new());
    lines.push("== a rule asks the operator before any merge; the operator approves one exact call".to_owned());
    lines.extend(steps[split..].iter().map(show));
    lines.push(format!("== {outcome}"));
    let json_of =
        |s: &crate::flow::Step| json!({ "who": s.who, "call": s.what, "allowed": s.allowed, "answer": s.said });
    let value = json!({
        "steps": steps[..split].iter().map(json_of).collect::<Vec<_>>(),
        "approval": steps[split..].iter().map(json_of).collect::<Vec<_>>(),
        "outcome": outcome,
    });
    Ok((lines, value))
}
