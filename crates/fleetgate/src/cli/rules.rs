//! `fleetgate rules test|diff`: a rule change previewed against the fleet's own audited
//! traffic (`fleetgate_core::replay`), or two rule sets compared (`rules::diff`); and
//! `fleetgate approvals`, the operator's answers to the calls rules ask about.

use crate::cli::args::{ApprovalsCommand, RulesCommand};
use crate::cli::context::Ctx;
use crate::cli::output::{Exit, Reply, terminal_text};
use anyhow::anyhow;
use fleetgate_config::FleetConfig;
use fleetgate_core::Timestamp;
use fleetgate_core::replay::{ReplayRules, replay};

/// Run one `approvals` command (answers are audited with the OS user who gave them).
pub fn approvals(ctx: &Ctx, cmd: &ApprovalsCommand) -> anyhow::Result<Reply> {
    use fleetgate_control::approvals::{AnswerError, answer, listing};
    let store = ctx.store()?;
    let (id, approve, reason) = match cmd {
        ApprovalsCommand::List { all } => {
            let requests = store.list_approvals(!all)?;
            let text = listing(&requests);
            return Ok(Reply { value: serde_json::json!({ "approvals": requests }), text, exit: Exit::Ok });
        }
        ApprovalsCommand::Approve { id, reason } => (id, true, reason),
        ApprovalsCommand::Deny { id, reason } => (id, false, reason),
        ApprovalsCommand::Watch { count, after } => return watch(ctx, &store, *count, *after),
    };
    // The CLI's operating-system user answers: a principal like any other.
    let approver =
        fleetgate_core::approval::Approver { id: format!("os:{}", fleetgate_host::os_user()), ..Default::default() };
    match answer(&*store, id, (&approver, &ctx.config.people), approve, reason.as_deref(), ctx.now()) {
        Ok(r) => {
            let needed = fleetgate_core::approval::approvals_needed(&r);
            let more = if needed > 0 { format!(" ({needed} more approval(s) needed)") } else { String::new() };
            Ok(Reply::new(&r, format!("{} {}: {} `{}`{more}", r.state, r.id, r.profile, r.tool), Exit::Ok))
        }
        Err(AnswerError::Store(e)) => Err(e.into()),
        Err(e) => Ok(Reply {
            value: serde_json::json!({ "id": id, "error": e.to_string() }),
            text: e.to_string(),
            exit: Exit::No,
        }),
    }
}

/// `fleetgate approvals watch`: every approval event from now (or after `after`), printed as
/// it is recorded — woken by the store's own word (PostgreSQL `NOTIFY`, SQLite inotify), with
/// a short backstop — until `count` events or an interrupt. Approvals past their TTL are
/// expired as it goes, so their expiry is an event too. What each `[[approvals.notify]]`
/// target still owes is printed when it changes (`owed: …`; with `--json` an object of
/// `"kind": "owed"`), so a receiver that is down shows.
fn watch(
    ctx: &Ctx,
    store: &std::sync::Arc<dyn fleetgate_store::Store>,
    count: Option<usize>,
    after: Option<i64>,
) -> anyhow::Result<Reply> {
    use std::io::Write as _;
    let mut cursor = match after {
        Some(id) => id,
        None => store.approval_events(0, usize::MAX)?.last().map_or(0, |e| e.id),
    };
    let mut watch = store.approval_watch()?;
    let ttl = ctx.config.approvals.ttl_seconds;
    let mut seen = 0usize;
    let mut owing: std::collections::HashMap<String, (usize, Option<i64>)> = std::collections::HashMap::new();
    loop {
        let now = ctx.now();
        store.expire_approvals(now.plus_seconds(-ttl), now)?;
        for target in &ctx.config.approvals.notify {
            let owed = fleetgate_control::notify::owed(&**store, target)?;
            let key = (owed.events, owed.oldest.as_ref().map(|o| o.id));
            let before = owing.insert(target.name.clone(), key);
            if before == Some(key) || (before.is_none() && owed.events == 0) {
                continue;
            }
            let mut out = std::io::stdout().lock();
            if ctx.json {
                let mut value = serde_json::to_value(&owed)?;
                value["kind"] = "owed".into();
                writeln!(out, "{value}")?;
            } else {
                writeln!(out, "owed: {}", terminal_text(&owed.line()))?;
            }
            out.flush()?;
        }
        for event in store.approval_events(cursor, 256)? {
            cursor = event.id;
            let mut out = std::io::stdout().lock();
            if ctx.json {
                writeln!(out, "{}", serde_json::to_string(&event)?)?;
            } else {
                writeln!(out, "{}", terminal_text(&fleetgate_control::approvals::event_line(&event)))?;
            }
            out.flush()?;
            seen += 1;
            if count.is_some_and(|c| seen >= c) {
                return Ok(Reply { value: serde_json::Value::Null, text: String::new(), exit: Exit::Ok });
            }
        }
        watch.wait(std::time::Duration::from_secs(2))?;
    }
}

/// Run one `rules` command.
pub fn run(ctx: &Ctx, cmd: &RulesCommand) -> anyhow::Result<Reply> {
    match cmd {
        RulesCommand::Test { since, until, profile } => {
            let time = |flag: &str, t: &Option<String>| {
                t.as_deref().map(Timestamp::parse).transpose().map_err(|e| anyhow!("invalid {flag}: {e}"))
            };
            let (since, until) = (time("--since", since)?, time("--until", until)?);
            let store = ctx.store()?;
            let digest = ctx.config.rules_digest();
            let lifted = ctx.config.lifted();
            let new = ReplayRules {
                members: &ctx.config.members,
                roles: &ctx.config.roles,
                rules: &ctx.config.rules,
                digest: &digest,
                invariants: ctx.config.dialect().map(|dialect| fleetgate_core::replay::ReplayInvariants {
                    dialect,
                    protection: &ctx.config.workflow.protection,
                    lifted: &lifted,
                }),
            };
            // The whole log, a page at a time: bounded memory at any size.
            let mut scan = scan(&*store);
            let window = scan.by_ref().filter(|e| {
                since.is_none_or(|s| e.at >= s)
                    && until.is_none_or(|u| e.at < u)
                    && profile.as_deref().is_none_or(|p| e.profile == p)
            });
            let report = replay(window, &new);
            end_progress();
            scan.finish()?;
            let header = format!("replayed against the rules of {} ({digest})", ctx.config.source);
            let exit = if report.flipped == 0 { Exit::Ok } else { Exit::No };
            Ok(Reply { text: report.text(&header), value: serde_json::to_value(&report)?, exit })
        }
        RulesCommand::ShadowReport { since, profile } => {
            let since =
                since.as_deref().map(Timestamp::parse).transpose().map_err(|e| anyhow!("invalid --since: {e}"))?;
            let store = ctx.store()?;
            let mut scan = scan(&*store);
            let report = fleetgate_control::gate::shadow_report(
                scan.by_ref()
                    .filter(|e| since.is_none_or(|s| e.at >= s) && profile.as_deref().is_none_or(|p| e.profile == p)),
            );
            end_progress();
            scan.finish()?;
            let exit = if report.flips == 0 { Exit::Ok } else { Exit::No };
            Ok(Reply { text: report.text(), value: serde_json::to_value(&report)?, exit })
        }
        RulesCommand::Diff { old, new } => {
            let load = |path| FleetConfig::load(Some(path), &ctx.env);
            let (old, new) = (load(old)?, load(new)?);
            let diff = fleetgate_core::rules::diff(&old.rules, &new.rules).with_lifts(&old.lifted(), &new.lifted());
            let exit = if diff.is_empty() { Exit::Ok } else { Exit::No };
            Ok(Reply { text: diff.text(), value: serde_json::to_value(&diff)?, exit })
        }
    }
}

/// The audit log a page at a time; on a terminal, how far the read has got, on stderr.
fn scan(store: &dyn fleetgate_store::Store) -> fleetgate_control::audit::AuditScan<'_> {
    use std::io::{IsTerminal as _, Write as _};
    let scan = fleetgate_control::audit::AuditScan::new(store, fleetgate_control::audit::SCAN_PAGE);
    if !std::io::stderr().is_terminal() {
        return scan;
    }
    scan.with_progress(|read| {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\rread {read} audit entries");
        let _ = err.flush();
    })
}

/// The progress line ends (on a terminal).
fn end_progress() {
    use std::io::IsTerminal as _;
    if std::io::stderr().is_terminal() {
        eprintln!();
    }
}
