//! Supervision events and the bus they are published on.
//!
//! [`Event`] is a wire type: its JSON form (`{"type": "task_crashed", …}`) is
//! what the runtime context, the audit log and the dashboard read, so its
//! names and fields are stable. [`EventBus`] fans events out to subscribers
//! (a tokio `broadcast`) and keeps a bounded ring of the most recent ones that
//! can be read synchronously. Publishing never blocks and never fails: a slow
//! subscriber loses the oldest events (it sees `Lagged`), it never holds the
//! supervisor up.

use serde::Serialize;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::broadcast;

/// Something the supervisor did or decided.
///
/// `attempt` counts the runs of a task since it was spawned: its first run is
/// attempt 1, so `restarts = attempt - 1`. `budget_left` is how many more
/// failures the task may have before it quarantines its flow.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// A run of a task began.
    TaskStarted {
        /// The task's name.
        task: String,
        /// The flow it belongs to.
        flow: String,
        /// Which run this is (1 for the first).
        attempt: u32,
    },
    /// A run of a task failed: it returned an error, panicked, or (for a
    /// child process) exited without being asked to.
    TaskCrashed {
        /// The task's name.
        task: String,
        /// The flow it belongs to.
        flow: String,
        /// Which run failed.
        attempt: u32,
        /// The error, panic message or exit status.
        error: String,
        /// Failures left before the flow is quarantined (0: it is now).
        budget_left: u32,
    },
    /// A failed task will run again after `delay_s` seconds.
    TaskRestarting {
        /// The task's name.
        task: String,
        /// The flow it belongs to.
        flow: String,
        /// The number the coming run will have.
        attempt: u32,
        /// Seconds until it starts.
        delay_s: f64,
        /// Failures left before the flow is quarantined.
        budget_left: u32,
    },
    /// A run returned normally: the task is done and is not restarted.
    TaskFinished {
        /// The task's name.
        task: String,
        /// The flow it belongs to.
        flow: String,
        /// Which run finished.
        attempt: u32,
    },
    /// `task` spent its failure budget: no task of `flow` is restarted until
    /// the quarantine expires, `retry_in_s` seconds from now.
    FlowQuarantined {
        /// The flow stood down.
        flow: String,
        /// The task whose failures spent the budget.
        task: String,
        /// Seconds until the quarantine expires and the flow's tasks retry.
        retry_in_s: f64,
    },
    /// A quarantine ran out; the flow's stood-down tasks start again with
    /// fresh budgets.
    FlowQuarantineExpired {
        /// The flow that may run again.
        flow: String,
    },
    /// A flow was cancelled: its tasks were stopped and forgotten, its
    /// quarantine lifted.
    FlowCancelled {
        /// The flow cancelled.
        flow: String,
        /// The tasks it had, sorted.
        tasks: Vec<String>,
    },
}

impl Event {
    /// The event's `type` tag, as in its JSON form.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::TaskStarted { .. } => "task_started",
            Self::TaskCrashed { .. } => "task_crashed",
            Self::TaskRestarting { .. } => "task_restarting",
            Self::TaskFinished { .. } => "task_finished",
            Self::FlowQuarantined { .. } => "flow_quarantined",
            Self::FlowQuarantineExpired { .. } => "flow_quarantine_expired",
            Self::FlowCancelled { .. } => "flow_cancelled",
        }
    }

    /// The flow the event concerns.
    pub fn flow(&self) -> &str {
        match self {
            Self::TaskStarted { flow, .. }
            | Self::TaskCrashed { flow, .. }
            | Self::TaskRestarting { flow, .. }
            | Self::TaskFinished { flow, .. }
            | Self::FlowQuarantined { flow, .. }
            | Self::FlowQuarantineExpired { flow }
            | Self::FlowCancelled { flow, .. } => flow,
        }
    }
}

/// Fan-out of [`Event`]s plus a bounded ring of the recent ones.
///
/// Cloning gives another handle on the same bus.
#[derive(Clone, Debug)]
pub struct EventBus {
    inner: Arc<BusInner>,
}

#[derive(Debug)]
struct BusInner {
    sender: broadcast::Sender<Event>,
    recent: Mutex<VecDeque<Event>>,
    capacity: usize,
}

impl Default for EventBus {
    fn default() -> Self {
        Self::new(Self::DEFAULT_CAPACITY)
    }
}

impl EventBus {
    /// Events kept in the ring, and buffered per subscriber, by [`Default`].
    pub const DEFAULT_CAPACITY: usize = 256;

    /// A bus keeping the last `capacity` events (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        let (sender, _) = broadcast::channel(capacity);
        Self { inner: Arc::new(BusInner { sender, recent: Mutex::new(VecDeque::with_capacity(capacity)), capacity }) }
    }

    /// Record `event` in the ring and send it to every subscriber. Never
    /// blocks: with no subscriber the event is only kept in the ring.
    pub fn publish(&self, event: Event) {
        {
            // A panic elsewhere while holding the lock cannot leave the ring
            // inconsistent (push/pop are atomic here), so poisoning is ignored.
            let mut recent = self.inner.recent.lock().unwrap_or_else(PoisonError::into_inner);
            if recent.len() == self.inner.capacity {
                recent.pop_front();
            }
            recent.push_back(event.clone());
        }
        // An error only means nobody is subscribed right now.
        let _ = self.inner.sender.send(event);
    }

    /// A receiver of every event published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.inner.sender.subscribe()
    }

    /// The most recent events, oldest first (at most the bus's capacity).
    pub fn recent(&self) -> Vec<Event> {
        let recent = self.inner.recent.lock().unwrap_or_else(PoisonError::into_inner);
        recent.iter().cloned().collect()
    }

    /// How many events the ring keeps.
    pub fn capacity(&self) -> usize {
        self.inner.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn s(v: &str) -> String {
        v.to_owned()
    }

    #[test]
    fn every_event_has_its_documented_json_shape() {
        let cases = [
            (
                Event::TaskStarted { task: s("mqtt"), flow: s("heating"), attempt: 1 },
                json!({"type": "task_started", "task": "mqtt", "flow": "heating", "attempt": 1}),
            ),
            (
                Event::TaskCrashed {
                    task: s("mqtt"),
                    flow: s("heating"),
                    attempt: 2,
                    error: s("broker went away"),
                    budget_left: 3,
                },
                json!({"type": "task_crashed", "task": "mqtt", "flow": "heating", "attempt": 2,
                       "error": "broker went away", "budget_left": 3}),
            ),
            (
                Event::TaskRestarting { task: s("mqtt"), flow: s("heating"), attempt: 3, delay_s: 0.5, budget_left: 3 },
                json!({"type": "task_restarting", "task": "mqtt", "flow": "heating", "attempt": 3,
                       "delay_s": 0.5, "budget_left": 3}),
            ),
            (
                Event::TaskFinished { task: s("cron"), flow: s("heating"), attempt: 1 },
                json!({"type": "task_finished", "task": "cron", "flow": "heating", "attempt": 1}),
            ),
            (
                Event::FlowQuarantined { flow: s("heating"), task: s("mqtt"), retry_in_s: 30.0 },
                json!({"type": "flow_quarantined", "flow": "heating", "task": "mqtt", "retry_in_s": 30.0}),
            ),
            (
                Event::FlowQuarantineExpired { flow: s("heating") },
                json!({"type": "flow_quarantine_expired", "flow": "heating"}),
            ),
            (
                Event::FlowCancelled { flow: s("heating"), tasks: vec![s("a"), s("b")] },
                json!({"type": "flow_cancelled", "flow": "heating", "tasks": ["a", "b"]}),
            ),
        ];
        for (event, expected) in cases {
            let value = serde_json::to_value(&event).unwrap();
            assert_eq!(value, expected);
            assert_eq!(value["type"], event.kind());
            assert_eq!(event.flow(), expected["flow"]);
        }
    }

    fn finished(n: u32) -> Event {
        Event::TaskFinished { task: s("t"), flow: s("f"), attempt: n }
    }

    #[test]
    fn the_ring_keeps_only_the_most_recent_events() {
        let bus = EventBus::new(3);
        for n in 1..=5 {
            bus.publish(finished(n));
        }
        assert_eq!(bus.recent(), [finished(3), finished(4), finished(5)]);
        assert_eq!(bus.capacity(), 3);
    }

    #[test]
    fn publishing_without_subscribers_does_not_fail_and_subscribers_get_later_events() {
        let bus = EventBus::new(4);
        bus.publish(finished(1));
        let mut rx = bus.subscribe();
        bus.publish(finished(2));
        assert_eq!(rx.try_recv().unwrap(), finished(2));
        assert!(rx.try_recv().is_err());
        assert_eq!(bus.recent(), [finished(1), finished(2)]);
    }

    #[test]
    fn a_slow_subscriber_lags_instead_of_blocking_the_publisher() {
        let bus = EventBus::new(2);
        let mut rx = bus.subscribe();
        for n in 1..=5 {
            bus.publish(finished(n));
        }
        assert!(matches!(rx.try_recv(), Err(broadcast::error::TryRecvError::Lagged(3))));
        assert_eq!(rx.try_recv().unwrap(), finished(4));
    }
}
