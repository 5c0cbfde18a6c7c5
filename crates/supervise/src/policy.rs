//! The pure core of supervision: who runs, who waits, who is stood down, and
//! when each of them is due to change.
//!
//! [`SupervisionPolicy`] is a state machine in the sans-I/O style: every entry
//! point takes `now` as a parameter (a [`Duration`] since an epoch the caller
//! chooses), inputs arrive through `spawn`/`handle_exit`/`handle_timeout`/
//! `cancel_flow`, and effects leave as [`Action`] values for a shell to carry
//! out. [`SupervisionPolicy::poll_timeout`] says when to call back. It reads no
//! clock, spawns nothing and does no I/O, so the whole schedule (backoff,
//! budgets, escalating quarantine, the healthy reset, cancellation) is tested
//! on simulated time.
//!
//! Pending restarts and quarantines are *state*, not sleeping tasks: a
//! deadline is a field of a task or flow record, and cancelling a flow deletes
//! the records. Nothing can fire for a cancelled flow, because there is
//! nothing left to fire. Reports from runs are matched by [`Incarnation`], an
//! id unique to each run and never reused, so a late report from a stopped run
//! (or a run of a task since replaced) matches nothing and changes nothing.

use crate::config::SupervisionSettings;
use crate::events::Event;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

/// The identity of one run of one task. Unique within a policy, never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Incarnation(u64);

impl fmt::Display for Incarnation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    /// It returned normally: the task is done. Not restarted, no budget spent.
    Finished,
    /// It returned an error or panicked (the message). Restarted after a
    /// backoff delay, or stood down when its budget is spent.
    Failed(String),
    /// It was cancelled. Neither a finish nor a crash: no budget, no event.
    Cancelled,
}

/// An effect for the shell to carry out, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Begin a run of `task` (call its factory) and report its end with this
    /// incarnation.
    Start {
        /// The task to run.
        task: String,
        /// The id to report the run's end with.
        incarnation: Incarnation,
    },
    /// Ask the run to stop (gracefully first); report its end as usual.
    Stop {
        /// The task whose run to stop.
        task: String,
        /// The run to stop.
        incarnation: Incarnation,
    },
    /// The task is no longer supervised; drop what the shell keeps for it.
    Forget {
        /// The task forgotten.
        task: String,
    },
    /// Publish this event on the bus.
    Publish(Event),
}

/// What a task is doing, as seen from outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskState {
    /// A run is in progress.
    Running,
    /// It failed and waits out its backoff delay before the next run.
    BackingOff,
    /// Its flow is quarantined: it is not restarted until the quarantine
    /// expires.
    Quarantined,
    /// Its last run returned normally; it is left alone.
    Finished,
    /// Its flow was cancelled and its run has been asked to stop; the task is
    /// forgotten once the run has ended.
    Cancelling,
    /// Its run was cancelled by something other than the supervisor; it is
    /// not restarted.
    Cancelled,
}

/// A task's state, at a glance, with its times on the policy's clock (`Duration`) or, as
/// the supervisor shows it ([`crate::TaskSnapshot`]), on tokio's (`Instant`).
#[derive(Clone, Debug, PartialEq)]
pub struct TaskView<At = Duration> {
    /// The task's name.
    pub task: String,
    /// Its flow.
    pub flow: String,
    /// What it is doing.
    pub state: TaskState,
    /// Runs begun since it was spawned, minus one.
    pub restarts: u32,
    /// Failures left before it quarantines its flow.
    pub budget_left: u32,
    /// Quarantines it caused since it last ran healthy: the index of its next
    /// quarantine length.
    pub escalation: u32,
    /// Its last failure, if any.
    pub last_error: Option<String>,
    /// When it backs off: the moment of its next run.
    pub next_start: Option<At>,
    /// Its current run, while one is in progress.
    pub incarnation: Option<Incarnation>,
}

impl TaskView {
    /// The same view with its times on another clock.
    pub fn on_clock<At>(self, at: impl FnOnce(Duration) -> At) -> TaskView<At> {
        TaskView {
            task: self.task,
            flow: self.flow,
            state: self.state,
            restarts: self.restarts,
            budget_left: self.budget_left,
            escalation: self.escalation,
            last_error: self.last_error,
            next_start: self.next_start.map(at),
            incarnation: self.incarnation,
        }
    }
}

/// A flow's state, at a glance.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowView {
    /// The flow's name.
    pub flow: String,
    /// How many times the flow has been cancelled. A rebuilt flow has a higher
    /// generation than the one it replaced.
    pub generation: u64,
    /// Its quarantine, while one holds.
    pub quarantine: Option<QuarantineView>,
}

/// A quarantine that holds.
#[derive(Clone, Debug, PartialEq)]
pub struct QuarantineView {
    /// The task whose failures spent the budget.
    pub task: String,
    /// When it began.
    pub since: Duration,
    /// When it expires.
    pub until: Duration,
}

/// A task could not be spawned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// A task of that name is already running, backing off or quarantined.
    /// Cancel its flow first, or pick another name.
    #[error("spawn task `{task}`: a task of that name is already supervised in flow `{flow}`")]
    AlreadySupervised {
        /// The name asked for.
        task: String,
        /// The flow of the task that holds it.
        flow: String,
    },
}

/// Random shortening of delays, from an injected seed.
///
/// A delay `d` becomes `d × (1 − ratio × u)` with `u` uniform in `[0, 1)`,
/// rounded to the millisecond: the configured value is a ceiling, never
/// exceeded, and the spread (±`ratio`/2 around the mean) de-synchronises
/// supervisors that crashed together. SplitMix64, so a seed replays exactly.
#[derive(Clone, Debug)]
pub struct Jitter {
    ratio: f64,
    state: u64,
}

impl Jitter {
    /// No jitter: every delay is exactly as configured.
    pub fn none() -> Self {
        Self { ratio: 0.0, state: 0 }
    }

    /// Shorten delays by up to `ratio` (clamped to `[0, 1)`), drawing from `seed`.
    pub fn seeded(ratio: f64, seed: u64) -> Self {
        let ratio = if ratio.is_finite() { ratio.clamp(0.0, 0.999) } else { 0.0 };
        Self { ratio, state: seed }
    }

    /// The jittered form of `base`: in `[base × (1 − ratio), base]`.
    pub fn apply(&mut self, base: Duration) -> Duration {
        if self.ratio == 0.0 || base.is_zero() {
            return base;
        }
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let millis = (base.as_secs_f64() * (1.0 - self.ratio * u) * 1000.0).round();
        // Whole milliseconds, never under the floor a rounding down could cross (3.679 s for a
        // floor of 3.6795 s broke the promise); `as` saturates; the `min` keeps the ceiling.
        let floor = (base.as_secs_f64() * (1.0 - self.ratio) * 1000.0).ceil();
        Duration::from_millis(millis.max(floor) as u64).min(base)
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[derive(Clone, Debug)]
enum State {
    Running { incarnation: Incarnation, since: Duration },
    BackingOff { at: Duration },
    Quarantined,
    Finished,
    Cancelling { incarnation: Incarnation },
    Cancelled,
}

#[derive(Clone, Debug)]
struct TaskRecord {
    flow: String,
    state: State,
    /// Runs begun since spawn; the current (or last) run's attempt number.
    starts: u32,
    /// Failures in the current budget window.
    failures: u32,
    /// Quarantines caused since the task last ran healthy.
    escalation: u32,
    last_error: Option<String>,
}

#[derive(Clone, Debug, Default)]
struct FlowRecord {
    generation: u64,
    quarantine: Option<QuarantineView>,
}

/// The supervision schedule as a pure state machine. See the module docs.
#[derive(Debug)]
pub struct SupervisionPolicy {
    settings: SupervisionSettings,
    jitter: Jitter,
    tasks: BTreeMap<String, TaskRecord>,
    flows: BTreeMap<String, FlowRecord>,
    next_incarnation: u64,
}

impl SupervisionPolicy {
    /// A policy with no tasks, jittering delays by the settings' ratio from
    /// `jitter_seed`.
    pub fn new(settings: SupervisionSettings, jitter_seed: u64) -> Self {
        let jitter = Jitter::seeded(settings.jitter_ratio(), jitter_seed);
        Self::with_jitter(settings, jitter)
    }

    /// A policy with no tasks and an explicit jitter source.
    pub fn with_jitter(settings: SupervisionSettings, jitter: Jitter) -> Self {
        Self { settings, jitter, tasks: BTreeMap::new(), flows: BTreeMap::new(), next_incarnation: 0 }
    }

    /// The settings the policy runs on.
    pub fn settings(&self) -> &SupervisionSettings {
        &self.settings
    }

    /// Supervise a new task in `flow`. It starts at once, unless its flow is
    /// quarantined, in which case it waits for the quarantine to expire.
    ///
    /// A name held by a finished, cancelled or cancelling task is taken over;
    /// a name held by a task that is running, backing off or quarantined is
    /// refused.
    pub fn spawn(&mut self, task: &str, flow: &str, now: Duration) -> Result<Vec<Action>, SpawnError> {
        if let Some(existing) = self.tasks.get(task)
            && matches!(existing.state, State::Running { .. } | State::BackingOff { .. } | State::Quarantined)
        {
            return Err(SpawnError::AlreadySupervised { task: task.to_owned(), flow: existing.flow.clone() });
        }
        let quarantined = self.flows.entry(flow.to_owned()).or_default().quarantine.is_some();
        self.tasks.insert(
            task.to_owned(),
            TaskRecord {
                flow: flow.to_owned(),
                state: State::Quarantined,
                starts: 0,
                failures: 0,
                escalation: 0,
                last_error: None,
            },
        );
        let mut out = Vec::new();
        if !quarantined {
            self.start(task, now, &mut out);
        }
        Ok(out)
    }

    /// A run ended. A report for a run that is not the task's current one
    /// (stale: the task was cancelled or replaced since) changes nothing.
    pub fn handle_exit(&mut self, task: &str, incarnation: Incarnation, exit: Exit, now: Duration) -> Vec<Action> {
        let mut out = Vec::new();
        let Some(rec) = self.tasks.get_mut(task) else {
            return out;
        };
        let since = match rec.state {
            State::Running { incarnation: current, since } if current == incarnation => since,
            State::Cancelling { incarnation: current } if current == incarnation => {
                // Whatever it returned, the supervisor asked it to stop: not a
                // crash, not a finish.
                self.tasks.remove(task);
                out.push(Action::Forget { task: task.to_owned() });
                return out;
            }
            _ => return out,
        };
        match exit {
            Exit::Finished => {
                rec.state = State::Finished;
                out.push(Action::Publish(Event::TaskFinished {
                    task: task.to_owned(),
                    flow: rec.flow.clone(),
                    attempt: rec.starts,
                }));
            }
            Exit::Cancelled => rec.state = State::Cancelled,
            Exit::Failed(error) => self.fail(task, since, error, now, &mut out),
        }
        out
    }

    fn fail(&mut self, task: &str, since: Duration, error: String, now: Duration, out: &mut Vec<Action>) {
        let budget = self.settings.failure_budget();
        let healthy_reset = self.settings.healthy_reset();
        let rec = self.tasks.get_mut(task).expect("caller checked the task exists");
        if now.saturating_sub(since) >= healthy_reset {
            // A long clean run before this crash: it is a new problem, not
            // the old loop, so it gets a fresh budget and the first step.
            rec.failures = 0;
            rec.escalation = 0;
        }
        rec.failures = rec.failures.saturating_add(1);
        let budget_left = budget.saturating_sub(rec.failures);
        let flow = rec.flow.clone();
        out.push(Action::Publish(Event::TaskCrashed {
            task: task.to_owned(),
            flow: flow.clone(),
            attempt: rec.starts,
            error: error.clone(),
            budget_left,
        }));
        rec.last_error = Some(error);
        let flow_quarantined = self.flows.get(&flow).is_some_and(|f| f.quarantine.is_some());
        if flow_quarantined {
            // A sibling stood the flow down already: wait for its expiry.
            rec.state = State::Quarantined;
        } else if budget_left == 0 {
            self.quarantine(task, &flow, now, out);
        } else {
            let backoff = self.settings.backoff();
            let index = usize::try_from(rec.failures - 1).unwrap_or(usize::MAX).min(backoff.len() - 1);
            let delay = self.jitter.apply(backoff[index]);
            rec.state = State::BackingOff { at: now.saturating_add(delay) };
            out.push(Action::Publish(Event::TaskRestarting {
                task: task.to_owned(),
                flow,
                attempt: rec.starts.saturating_add(1),
                delay_s: delay.as_secs_f64(),
                budget_left,
            }));
        }
    }

    fn quarantine(&mut self, task: &str, flow: &str, now: Duration, out: &mut Vec<Action>) {
        let rec = self.tasks.get_mut(task).expect("caller checked the task exists");
        rec.state = State::Quarantined;
        let steps = self.settings.quarantine_backoff();
        let index = usize::try_from(rec.escalation).unwrap_or(usize::MAX).min(steps.len() - 1);
        rec.escalation = rec.escalation.saturating_add(1);
        let delay = self.jitter.apply(steps[index]);
        self.flows.entry(flow.to_owned()).or_default().quarantine =
            Some(QuarantineView { task: task.to_owned(), since: now, until: now.saturating_add(delay) });
        // Siblings waiting for a restart wait for the quarantine instead;
        // running siblings keep running (a quarantine stops restarts, it
        // does not kill healthy work).
        for sibling in self.tasks.values_mut().filter(|r| r.flow == flow) {
            if matches!(sibling.state, State::BackingOff { .. }) {
                sibling.state = State::Quarantined;
            }
        }
        out.push(Action::Publish(Event::FlowQuarantined {
            flow: flow.to_owned(),
            task: task.to_owned(),
            retry_in_s: delay.as_secs_f64(),
        }));
    }

    /// Act on every deadline that is due at `now`: restarts after backoff,
    /// quarantine expiries, and healthy-run resets. Deadlines not yet due are
    /// left alone, so calling early or twice is harmless.
    pub fn handle_timeout(&mut self, now: Duration) -> Vec<Action> {
        let mut out = Vec::new();
        let healthy_reset = self.settings.healthy_reset();
        for rec in self.tasks.values_mut() {
            if let State::Running { since, .. } = rec.state
                && needs_healthy_reset(rec)
                && now >= since.saturating_add(healthy_reset)
            {
                rec.failures = 0;
                rec.escalation = 0;
            }
        }
        let expired: Vec<String> = self
            .flows
            .iter()
            .filter(|(_, f)| f.quarantine.as_ref().is_some_and(|q| q.until <= now))
            .map(|(name, _)| name.clone())
            .collect();
        for flow in expired {
            self.flows.get_mut(&flow).expect("listed above").quarantine = None;
            out.push(Action::Publish(Event::FlowQuarantineExpired { flow: flow.clone() }));
            let budget = self.settings.failure_budget();
            let mut parked = Vec::new();
            for (name, rec) in self.tasks.iter_mut().filter(|(_, r)| r.flow == flow) {
                // A fresh budget for the whole flow: a sibling left with one
                // failure to go would re-quarantine it on its first crash.
                rec.failures = 0;
                if matches!(rec.state, State::Quarantined) {
                    out.push(Action::Publish(Event::TaskRestarting {
                        task: name.clone(),
                        flow: flow.clone(),
                        attempt: rec.starts.saturating_add(1),
                        delay_s: 0.0,
                        budget_left: budget,
                    }));
                    parked.push(name.clone());
                }
            }
            for name in parked {
                self.start(&name, now, &mut out);
            }
        }
        let due: Vec<String> = self
            .tasks
            .iter()
            .filter(|(_, r)| matches!(r.state, State::BackingOff { at } if at <= now))
            .map(|(name, _)| name.clone())
            .collect();
        for name in due {
            self.start(&name, now, &mut out);
        }
        out
    }

    /// The earliest pending deadline, if any: call
    /// [`handle_timeout`](Self::handle_timeout) then. Every deadline returned
    /// here is consumed by that call, so a shell that follows it never spins.
    pub fn poll_timeout(&self) -> Option<Duration> {
        let healthy_reset = self.settings.healthy_reset();
        let tasks = self.tasks.values().filter_map(|rec| match rec.state {
            State::BackingOff { at } => Some(at),
            State::Running { since, .. } if needs_healthy_reset(rec) => Some(since.saturating_add(healthy_reset)),
            _ => None,
        });
        let flows = self.flows.values().filter_map(|f| f.quarantine.as_ref().map(|q| q.until));
        tasks.chain(flows).min()
    }

    /// Cancel `flow`: ask its running tasks to stop, forget the others, lift
    /// its quarantine and forget its tasks' failures. Other flows are not
    /// touched. Cancelling a flow with nothing to cancel does nothing.
    ///
    /// The returned [`Action::Stop`]s name every run of the flow still ending,
    /// including those a concurrent cancel already asked to stop, so every
    /// caller can wait for all of them.
    pub fn cancel_flow(&mut self, flow: &str, _now: Duration) -> Vec<Action> {
        let names: Vec<String> =
            self.tasks.iter().filter(|(_, r)| r.flow == flow).map(|(name, _)| name.clone()).collect();
        let mut stops = Vec::new();
        let mut cancelled = Vec::new();
        for name in names {
            let rec = self.tasks.get_mut(&name).expect("listed above");
            match rec.state {
                State::Running { incarnation, .. } => {
                    rec.state = State::Cancelling { incarnation };
                    rec.failures = 0;
                    rec.escalation = 0;
                    stops.push(Action::Stop { task: name.clone(), incarnation });
                    cancelled.push(name);
                }
                State::Cancelling { incarnation } => stops.push(Action::Stop { task: name, incarnation }),
                _ => {
                    self.tasks.remove(&name);
                    stops.push(Action::Forget { task: name.clone() });
                    cancelled.push(name);
                }
            }
        }
        let lifted = self.flows.get_mut(flow).is_some_and(|f| f.quarantine.take().is_some());
        let mut out = Vec::new();
        if lifted || !cancelled.is_empty() {
            let record = self.flows.entry(flow.to_owned()).or_default();
            record.generation = record.generation.saturating_add(1);
            out.push(Action::Publish(Event::FlowCancelled { flow: flow.to_owned(), tasks: cancelled }));
        }
        out.extend(stops);
        out
    }

    /// Cancel every flow, as [`cancel_flow`](Self::cancel_flow) does. Idempotent:
    /// a second call finds nothing to cancel and publishes nothing.
    pub fn cancel_all(&mut self, now: Duration) -> Vec<Action> {
        let flows: Vec<String> = self.flows.keys().cloned().collect();
        flows.iter().flat_map(|flow| self.cancel_flow(flow, now)).collect()
    }

    /// The flows whose quarantine holds.
    pub fn quarantined(&self) -> BTreeSet<String> {
        self.flows.iter().filter(|(_, f)| f.quarantine.is_some()).map(|(name, _)| name.clone()).collect()
    }

    /// One task's state.
    pub fn task(&self, task: &str) -> Option<TaskView> {
        self.tasks.get(task).map(|rec| self.view(task, rec))
    }

    /// Every supervised task, by name.
    pub fn tasks(&self) -> Vec<TaskView> {
        self.tasks.iter().map(|(name, rec)| self.view(name, rec)).collect()
    }

    /// One flow's state.
    pub fn flow(&self, flow: &str) -> Option<FlowView> {
        self.flows.get(flow).map(|f| flow_view(flow, f))
    }

    /// Every flow ever spawned into, by name.
    pub fn flows(&self) -> Vec<FlowView> {
        self.flows.iter().map(|(name, f)| flow_view(name, f)).collect()
    }

    fn view(&self, name: &str, rec: &TaskRecord) -> TaskView {
        let (state, next_start, incarnation) = match rec.state {
            State::Running { incarnation, .. } => (TaskState::Running, None, Some(incarnation)),
            State::BackingOff { at } => (TaskState::BackingOff, Some(at), None),
            State::Quarantined => (TaskState::Quarantined, None, None),
            State::Finished => (TaskState::Finished, None, None),
            State::Cancelling { incarnation } => (TaskState::Cancelling, None, Some(incarnation)),
            State::Cancelled => (TaskState::Cancelled, None, None),
        };
        TaskView {
            task: name.to_owned(),
            flow: rec.flow.clone(),
            state,
            restarts: rec.starts.saturating_sub(1),
            budget_left: self.settings.failure_budget().saturating_sub(rec.failures),
            escalation: rec.escalation,
            last_error: rec.last_error.clone(),
            next_start,
            incarnation,
        }
    }

    fn start(&mut self, task: &str, now: Duration, out: &mut Vec<Action>) {
        let incarnation = Incarnation(self.next_incarnation);
        self.next_incarnation += 1;
        let rec = self.tasks.get_mut(task).expect("caller checked the task exists");
        rec.starts = rec.starts.saturating_add(1);
        rec.state = State::Running { incarnation, since: now };
        out.push(Action::Publish(Event::TaskStarted {
            task: task.to_owned(),
            flow: rec.flow.clone(),
            attempt: rec.starts,
        }));
        out.push(Action::Start { task: task.to_owned(), incarnation });
    }
}

fn needs_healthy_reset(rec: &TaskRecord) -> bool {
    rec.failures > 0 || rec.escalation > 0
}

fn flow_view(name: &str, f: &FlowRecord) -> FlowView {
    FlowView { flow: name.to_owned(), generation: f.generation, quarantine: f.quarantine.clone() }
}
