//! One call's journey through the gate as a state machine that does no I/O, in the style of
//! quinn-proto: a [`Judgement`] is started from the call (the control plane's own,
//! [`ControlPlane::judge`], or a [`Journey`] over the control plane's one-question methods),
//! answers what it needs next ([`Step`]: a serial key, forge reads, a decision on the blocking
//! pool, a hold on a request, or the verdict) and is fed the answers. The gateway's
//! `call_tool` is the one loop that does the I/O.
//!
//! [`ControlPlane::judge`]: crate::ControlPlane::judge

use crate::control::{
    AttachmentId, CallToJudge, ControlPlane, DownstreamRead, Judgement, MAX_READ_ROUNDS, ReadAnswer, Step, Verdict,
};
use std::any::Any;
use std::fmt;

/// The questions a [`Journey`] puts to whoever judges the call, none of them I/O.
pub trait Judge: Send + 'static {
    /// The verdict from memory alone, when it can be given at once (asked once, first).
    fn now(&mut self) -> Option<Verdict>;
    /// The key the call runs under alone (asked once, after [`now`](Self::now)).
    fn key(&mut self) -> Option<String>;
    /// The reads still needed, given every answer made so far in this round of judging.
    fn reads(&mut self, answers: &[ReadAnswer]) -> Vec<DownstreamRead>;
    /// The call is judged again from the start (a held call whose request was answered).
    fn restart(&mut self) {}
    /// The call, when this judge is the gateway's own over the control plane's one-question
    /// methods ([`Judgement::stepwise`]).
    fn stepwise(&self) -> Option<&CallToJudge> {
        None
    }
}

/// Where a [`Journey`] stands.
#[derive(Debug)]
enum Phase {
    /// Not asked anything yet.
    Start,
    /// To take the serial key (again, after a hold), then read.
    Serialize,
    /// Reading, this many rounds made.
    Reading(usize),
    /// Waiting for the decision.
    Deciding,
    /// Held for a request, with the verdict that held it.
    Holding(Box<Verdict>),
    /// Decided: the verdict to hand out.
    Decided(Box<Verdict>),
    /// Done (the verdict was handed out).
    Done,
}

/// The one sequence every call goes through: the verdict from memory when there is one; else
/// the serial key, the reads round by round (at most [`MAX_READ_ROUNDS`]), the decision, and —
/// for a call held for an operator — the wait, then all of it again once answered.
#[derive(Debug)]
pub struct Journey<J> {
    judge: J,
    answers: Vec<ReadAnswer>,
    key: Option<String>,
    phase: Phase,
}

impl<J: Judge> Journey<J> {
    /// A journey judged by `judge`.
    pub fn new(judge: J) -> Self {
        Self { judge, answers: Vec::new(), key: None, phase: Phase::Start }
    }

    /// Who judges it.
    pub fn judge(&self) -> &J {
        &self.judge
    }

    /// The reads made so far in this round of judging.
    pub fn answers(&self) -> &[ReadAnswer] {
        &self.answers
    }
}

impl<J: Judge> Judgement for Journey<J> {
    fn next(&mut self) -> Step {
        loop {
            match std::mem::replace(&mut self.phase, Phase::Done) {
                Phase::Start => {
                    if let Some(verdict) = self.judge.now() {
                        return Step::Done(verdict);
                    }
                    self.key = self.judge.key();
                    self.phase = Phase::Serialize;
                }
                Phase::Serialize => {
                    self.phase = Phase::Reading(0);
                    if let Some(key) = &self.key {
                        return Step::Serialize(key.clone());
                    }
                }
                Phase::Reading(round) => {
                    let reads: Vec<DownstreamRead> = if round < MAX_READ_ROUNDS {
                        let asked = self.judge.reads(&self.answers);
                        asked.into_iter().filter(|r| !self.answers.iter().any(|a| a.read == *r)).collect()
                    } else {
                        Vec::new()
                    };
                    if reads.is_empty() {
                        self.phase = Phase::Deciding;
                        return Step::Decide;
                    }
                    self.phase = Phase::Reading(round + 1);
                    return Step::Read(reads);
                }
                Phase::Deciding => {
                    self.phase = Phase::Deciding;
                    return Step::Decide;
                }
                Phase::Holding(verdict) => {
                    let request = verdict.held.clone().unwrap_or_default();
                    self.phase = Phase::Holding(verdict);
                    return Step::Hold(request);
                }
                Phase::Decided(verdict) => return Step::Done(*verdict),
                Phase::Done => unreachable!("a judgement is asked nothing after its verdict"),
            }
        }
    }

    fn answered(&mut self, answers: Vec<ReadAnswer>) {
        self.answers.extend(answers);
    }

    fn decided(&mut self, verdict: Verdict) {
        let verdict = Box::new(verdict);
        self.phase = if verdict.held.is_some() { Phase::Holding(verdict) } else { Phase::Decided(verdict) };
    }

    fn held(&mut self, answered: bool) {
        let Phase::Holding(verdict) = std::mem::replace(&mut self.phase, Phase::Done) else { return };
        self.phase = if answered {
            self.answers.clear();
            self.judge.restart();
            Phase::Serialize
        } else {
            Phase::Decided(verdict)
        };
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn stepwise(&self) -> Option<(&CallToJudge, &[ReadAnswer])> {
        self.judge.stepwise().map(|call| (call, &*self.answers))
    }
}

/// The [`Judge`] of a control plane that makes no [`Judgement`] of its own
/// ([`ControlPlane::judge`] answers `None`): each question put to its one-question methods.
pub struct Stepwise {
    control: std::sync::Arc<dyn ControlPlane>,
    attachment: AttachmentId,
    /// The call judged.
    pub call: CallToJudge,
}

impl Stepwise {
    /// The journey of `call` on `attachment`, judged by `control`'s one-question methods.
    pub fn journey(
        control: std::sync::Arc<dyn ControlPlane>,
        attachment: AttachmentId,
        call: CallToJudge,
    ) -> Journey<Self> {
        Journey::new(Self { control, attachment, call })
    }
}

impl fmt::Debug for Stepwise {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stepwise")
            .field("attachment", &self.attachment)
            .field("call", &self.call)
            .finish_non_exhaustive()
    }
}

impl Judge for Stepwise {
    fn now(&mut self) -> Option<Verdict> {
        self.control.decide_now(self.attachment, &self.call.tool_call(&[], None))
    }

    fn key(&mut self) -> Option<String> {
        self.control.serial_key(self.attachment, &self.call.tool_call(&[], None))
    }

    fn reads(&mut self, answers: &[ReadAnswer]) -> Vec<DownstreamRead> {
        self.control.reads(self.attachment, &self.call.tool_call(answers, None))
    }

    fn stepwise(&self) -> Option<&CallToJudge> {
        Some(&self.call)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::{DownstreamError, DownstreamErrorKind, GateDecision};
    use crate::{BlockerKind, ToolClass};
    use rmcp::model::{CallToolResult, ContentBlock, JsonObject};

    /// A made-up judge: a verdict from memory or not, a key or not, and reads asked round by
    /// round (`rounds[n]`: the reads asked once `n` reads were answered).
    #[derive(Default)]
    struct MadeUp {
        now: Option<Verdict>,
        key: Option<&'static str>,
        rounds: Vec<Vec<&'static str>>,
        asked: Vec<usize>,
        restarts: usize,
    }

    impl Judge for MadeUp {
        fn now(&mut self) -> Option<Verdict> {
            self.now.take()
        }
        fn key(&mut self) -> Option<String> {
            self.key.map(str::to_owned)
        }
        fn reads(&mut self, answers: &[ReadAnswer]) -> Vec<DownstreamRead> {
            self.asked.push(answers.len());
            let round = self.rounds.get(answers.len()).cloned().unwrap_or_default();
            round.into_iter().map(read).collect()
        }
        fn restart(&mut self) {
            self.restarts += 1;
        }
    }

    fn read(tool: &str) -> DownstreamRead {
        DownstreamRead { tool: tool.to_owned(), arguments: JsonObject::new() }
    }

    fn answer(read: DownstreamRead) -> ReadAnswer {
        ReadAnswer { read, answer: Ok(CallToolResult::success(vec![ContentBlock::text("{}")])) }
    }

    fn verdict(allowed: bool, held: Option<&str>) -> Verdict {
        let decision = if allowed {
            GateDecision::allow()
        } else {
            GateDecision::refuse(BlockerKind::ApprovalPending, vec!["waits".into()], Some("answer it".into()))
        };
        Verdict {
            class: ToolClass::Mutating,
            decision,
            settles: None,
            forward: None,
            held: held.map(str::to_owned),
            perform: None,
        }
    }

    /// Drive `journey` as the gateway does, answering each read and each decision from
    /// `decisions` and each hold from `holds`; the steps taken, in words.
    fn drive(journey: &mut Journey<MadeUp>, mut decisions: Vec<Verdict>, mut holds: Vec<bool>) -> Vec<String> {
        let mut steps = Vec::new();
        loop {
            match journey.next() {
                Step::Serialize(key) => steps.push(format!("serialize {key}")),
                Step::Read(reads) => {
                    steps.push(format!("read {}", reads.iter().map(|r| r.tool.as_str()).collect::<Vec<_>>().join(",")));
                    journey.answered(reads.into_iter().map(answer).collect());
                }
                Step::Decide => {
                    steps.push("decide".into());
                    journey.decided(decisions.remove(0));
                }
                Step::Hold(request) => {
                    steps.push(format!("hold {request}"));
                    journey.held(holds.remove(0));
                }
                Step::Done(v) => {
                    steps.push(format!("done {}", if v.decision.allowed { "allowed" } else { "refused" }));
                    return steps;
                }
            }
        }
    }

    #[test]
    fn a_verdict_from_memory_asks_nothing_else() {
        let mut journey =
            Journey::new(MadeUp { now: Some(verdict(true, None)), key: Some("o/r"), ..MadeUp::default() });
        assert_eq!(drive(&mut journey, vec![], vec![]), ["done allowed"]);
        assert!(journey.judge().asked.is_empty(), "no read asked of a call decided from memory");
    }

    #[test]
    fn the_key_then_the_reads_round_by_round_then_one_decision() {
        let rounds = vec![vec!["repo"], vec!["prs_page_1", "repo"], vec!["prs_page_2"]];
        let mut journey = Journey::new(MadeUp { key: Some("o/r"), rounds, ..MadeUp::default() });
        let steps = drive(&mut journey, vec![verdict(true, None)], vec![]);
        // A read already answered is never asked again.
        assert_eq!(
            steps,
            ["serialize o/r", "read repo", "read prs_page_1", "read prs_page_2", "decide", "done allowed"]
        );
        assert_eq!(journey.judge().asked, [0, 1, 2, 3]);
    }

    #[test]
    fn a_held_call_answered_is_judged_again_from_the_start() {
        let mut journey = Journey::new(MadeUp { key: Some("o/r"), rounds: vec![vec!["pr"]], ..MadeUp::default() });
        let decisions = vec![verdict(false, Some("apr-1")), verdict(true, None)];
        let steps = drive(&mut journey, decisions, vec![true]);
        assert_eq!(
            steps,
            ["serialize o/r", "read pr", "decide", "hold apr-1", "serialize o/r", "read pr", "decide", "done allowed"]
        );
        assert_eq!(journey.judge().restarts, 1);
    }

    #[test]
    fn a_hold_that_ends_unanswered_gives_the_verdict_that_held_it() {
        let mut journey = Journey::new(MadeUp::default());
        let steps = drive(&mut journey, vec![verdict(false, Some("apr-2"))], vec![false]);
        assert_eq!(steps, ["decide", "hold apr-2", "done refused"]);
    }

    #[test]
    fn reads_stop_after_the_most_rounds() {
        // A judge that always asks for one more read.
        struct Endless(usize);
        impl Judge for Endless {
            fn now(&mut self) -> Option<Verdict> {
                None
            }
            fn key(&mut self) -> Option<String> {
                None
            }
            fn reads(&mut self, answers: &[ReadAnswer]) -> Vec<DownstreamRead> {
                self.0 += 1;
                vec![DownstreamRead { tool: format!("page_{}", answers.len()), arguments: JsonObject::new() }]
            }
        }
        let mut journey = Journey::new(Endless(0));
        let mut reads = 0;
        loop {
            match journey.next() {
                Step::Read(asked) => {
                    reads += 1;
                    let failed = asked.into_iter().map(|read| ReadAnswer {
                        read,
                        answer: Err(DownstreamError::new(DownstreamErrorKind::Timeout, "slow")),
                    });
                    journey.answered(failed.collect());
                }
                Step::Decide => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(reads, MAX_READ_ROUNDS);
    }
}
