//! [`CallJudge`]: the gate's judgement of one call on a gateway, as the gateway's
//! [`Journey`] asks for it. The call is parsed once and what it does stated once — each round
//! of forge reads fed in once ([`Statement`]) — and the verdict from memory, the serial key,
//! the reads still needed and, on the blocking pool, the decision
//! ([`FleetControl::decide_judged`](fleetgate_gateway::ControlPlane::decide_judged)) are all
//! read off that one statement. Nothing here does I/O but the decision's store.

use super::attachments::AttachedWorker;
use super::workflow::Prefetched;
use crate::gate::workflow::{ForgeErrorKind, ForgeReader};
use crate::gate::{Call, Caller, Gate, Statement};
use fleetgate_config::Member;
use fleetgate_core::Clock;
use fleetgate_core::effect::{Answered, ReadFailed};
use fleetgate_gateway::{AttachmentId, CallToJudge, DownstreamRead, Journey, Judge, ReadAnswer, Verdict};
use std::sync::Arc;

/// Who makes a call on an attachment, as the gate knows it: its worker — this process's, of
/// this generation; or a stateless client's shared one, served by this process.
#[derive(Clone, Debug)]
pub(super) struct Maker {
    pub(super) attachment: AttachmentId,
    pub(super) worker: Option<AttachedWorker>,
    pub(super) generation: Arc<str>,
    pub(super) pid: i64,
}

impl Maker {
    /// The caller the gate judges.
    pub(super) fn caller(&self) -> Caller<'_> {
        caller_for(self.attachment, self.worker.as_ref(), &self.generation, self.pid)
    }
}

/// Who makes a call on `attachment`: its `worker` — of this process's `generation`; or a
/// stateless client's shared one, served by this process (`pid`).
pub(super) fn caller_for<'a>(
    attachment: AttachmentId,
    worker: Option<&'a AttachedWorker>,
    generation: &'a str,
    pid: i64,
) -> Caller<'a> {
    match worker {
        Some(w) => Caller::Worker {
            identity: &w.identity,
            generation: Some(if w.shared { super::attachments::SHARED_GENERATION } else { generation }),
            principal: w.principal.as_deref(),
            served_by: w.shared.then_some(pid),
        },
        None => Caller::Nobody(format!("no worker is attached to this gateway for {attachment}")),
    }
}

/// One call's judge: the gate (for what it knows without the store), the member and the
/// caller, the call, and its [`Statement`].
pub(super) struct CallJudge {
    pub(super) gate: Gate,
    pub(super) member: Arc<Member>,
    pub(super) maker: Maker,
    pub(super) call: CallToJudge,
    pub(super) statement: Statement,
    /// The tool's definition is pinned already, or pins are off: a verdict may be given from
    /// memory (a definition seen for the first time is pinned on the blocking pool).
    pub(super) pinned: bool,
    pub(super) clock: Arc<dyn Clock>,
    /// Where a verdict given from memory is counted, and its profile label.
    pub(super) metrics: Option<(crate::metrics::GatewayMetrics, Arc<str>)>,
}

impl std::fmt::Debug for CallJudge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallJudge").field("call", &self.call).field("maker", &self.maker).finish_non_exhaustive()
    }
}

impl CallJudge {
    /// The call as the gate takes it, reading the forge through `forge`.
    pub(super) fn gate_call<'a>(&'a self, forge: Option<&'a dyn ForgeReader>) -> Call<'a> {
        call_of(&self.member, &self.call, self.maker.caller(), forge)
    }
}

/// `call` of `member` by `caller` as the gate takes it, reading the forge through `forge`.
pub(super) fn call_of<'a>(
    member: &'a Member,
    call: &'a CallToJudge,
    caller: Caller<'a>,
    forge: Option<&'a dyn ForgeReader>,
) -> Call<'a> {
    Call {
        member,
        tool: &call.tool.name,
        read_only_hint: call.tool.annotations.as_ref().and_then(|a| a.read_only_hint),
        arguments: call.arguments.as_ref(),
        schema: Some(&call.tool.input_schema),
        caller,
        forge,
        schemas: Some(&*call.catalogue),
    }
}

impl Judge for CallJudge {
    fn now(&mut self) -> Option<Verdict> {
        if !self.pinned {
            return None;
        }
        let (span, started) = (super::plane::gate_span(&self.call.tool.name), std::time::Instant::now());
        let _entered = span.enter();
        let principal = self.maker.worker.as_ref().and_then(|w| w.principal.clone());
        let call = self.gate_call(None);
        let verdict = self.gate.decide_now_stated(&call, &self.statement, self.clock.now(), principal)?;
        let verdict = super::plane::gateway_verdict(verdict);
        super::plane::count(self.metrics.as_ref().map(|(m, l)| (m, l)), &span, started, &verdict);
        Some(verdict)
    }

    fn key(&mut self) -> Option<String> {
        self.gate.dialect()?;
        let args = self.statement.arguments(self.call.arguments.as_ref())?;
        let text = |k: &str| args.get(k).and_then(serde_json::Value::as_str).filter(|s| !s.is_empty());
        let (owner, repo) = (text("owner")?, text("repo")?);
        // A call that only reads, its effect known from its arguments, runs alongside any.
        if self.statement.stated.as_ref().is_some_and(|s| s.effect.is_read()) {
            return None;
        }
        Some(format!("{owner}/{repo}").to_lowercase())
    }

    fn reads(&mut self, answers: &[ReadAnswer]) -> Vec<DownstreamRead> {
        let made = Prefetched(answers);
        // The answers to what the statement asked, fed in once.
        let fed: Vec<Answered> = self
            .statement
            .asked()
            .iter()
            .filter_map(|read| match made.read(&read.tool, read.arguments.clone()) {
                Err(e) if e.kind == ForgeErrorKind::NotConfigured => None,
                answer => Some((read.clone(), answer.map_err(|e| ReadFailed(e.message)))),
            })
            .collect();
        if !fed.is_empty() {
            let call = call_of(&self.member, &self.call, self.maker.caller(), None);
            self.gate.feed(&call, &mut self.statement, fed);
        }
        let call = self.gate_call(Some(&made));
        let reads = self.gate.pending_reads(&call, &self.statement);
        reads.into_iter().map(|r| DownstreamRead { tool: r.tool, arguments: r.arguments }).collect()
    }

    fn restart(&mut self) {
        let call = call_of(&self.member, &self.call, self.maker.caller(), None);
        self.gate.restate(&call, &mut self.statement);
    }
}

/// The journey of one call judged by `judge`.
pub(super) fn journey(judge: CallJudge) -> Journey<CallJudge> {
    Journey::new(judge)
}
