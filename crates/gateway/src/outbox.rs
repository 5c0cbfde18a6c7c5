//! Notifications between a client and its downstream, one bounded queue per channel and
//! direction, each drained by one forwarding task.
//!
//! rmcp hands every notification it reads to a task of its own and sends with no
//! backpressure, so a receiver that stops reading (a client not reading stdout or its event
//! stream, a downstream not reading stdin) would pile up one task per notification. Here a
//! notification is put on its channel's queue without waiting: past
//! [`MAX_QUEUED_NOTIFICATIONS`], or past [`MAX_QUEUED_NOTIFICATION_BYTES`] of JSON (a
//! count alone would let 256 messages of the 4 MiB frame limit hold a gigabyte), it is
//! dropped, counted (the observer's [`crate::GatewayObserver::notification_dropped`],
//! `fleetgate_notifications_dropped_total`) and logged at most once per [`LOG_EVERY`] per
//! queue with the number dropped since.
//!
//! Cancellations never take this path, so none is dropped: a client's `notifications/cancelled`
//! is rmcp's (it cancels the forwarded request, whose own task tells the downstream, one per
//! request in flight, under `routes::MAX_IN_FLIGHT`); the downstream's cancellation of a
//! question to the client is sent by that question's task (under `routes::MAX_PENDING_ASKS`);
//! the downstream's own `notifications/cancelled` is rmcp's.

use crate::control::AttachmentId;
use crate::observe::GatewayObserver;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::time::Instant;

/// How long a notification to one client may take to be handed to its stream before it is
/// given up: that client stopped reading, and on a channel several clients share the others
/// must not wait for it.
pub(crate) const NOTIFY_PATIENCE: std::time::Duration = std::time::Duration::from_millis(500);

/// Notifications waiting to be forwarded, per channel and direction, at most.
pub(crate) const MAX_QUEUED_NOTIFICATIONS: usize = 256;

/// Bytes of notifications (their JSON) waiting to be forwarded, per channel and direction,
/// at most. A notification larger than this on its own is never queued.
pub(crate) const MAX_QUEUED_NOTIFICATION_BYTES: usize = 8 * 1024 * 1024;

/// The length of `item`'s JSON: what it weighs in a queue. Counted, never buffered.
pub(crate) fn json_len<S: serde::Serialize>(item: &S) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // A value that cannot be serialized cannot be sent either; it weighs what was counted.
    let _ = serde_json::to_writer(&mut count, item);
    count.0
}

/// At most one log line per queue this often while it drops.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Which way a queue forwards: the `direction` label of the drop count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// From the downstream to the client (progress, logging, list changes, …).
    ToClient,
    /// From the client to the downstream (roots list changes, custom notifications).
    ToDownstream,
}

impl Direction {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::ToClient => "to_client",
            Self::ToDownstream => "to_downstream",
        }
    }
}

#[derive(Debug, Default)]
struct Drops {
    /// Dropped since the last log line.
    unlogged: u64,
    last_logged: Option<Instant>,
}

/// The sending end of one bounded notification queue.
#[derive(Debug)]
pub(crate) struct Outbox<T> {
    direction: Direction,
    attachment: AttachmentId,
    tx: mpsc::Sender<(T, usize)>,
    /// Bytes queued and not yet taken (shared with the [`Inbox`]).
    bytes: Arc<AtomicUsize>,
    observer: Option<Arc<dyn GatewayObserver>>,
    drops: Mutex<Drops>,
}

/// The receiving end of one queue, for its forwarding task.
#[derive(Debug)]
pub(crate) struct Inbox<T> {
    rx: mpsc::Receiver<(T, usize)>,
    bytes: Arc<AtomicUsize>,
}

impl<T> Inbox<T> {
    /// The next notification, its weight given back to the queue.
    pub(crate) async fn recv(&mut self) -> Option<T> {
        let (item, size) = self.rx.recv().await?;
        self.bytes.fetch_sub(size, Ordering::AcqRel);
        Some(item)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }
}

impl<T> Outbox<T> {
    /// A queue for `attachment`'s channel, and its receiving end for the forwarding task.
    pub(crate) fn new(
        direction: Direction,
        attachment: AttachmentId,
        observer: Option<Arc<dyn GatewayObserver>>,
    ) -> (Self, Inbox<T>) {
        let (tx, rx) = mpsc::channel(MAX_QUEUED_NOTIFICATIONS);
        let bytes = Arc::new(AtomicUsize::new(0));
        let inbox = Inbox { rx, bytes: Arc::clone(&bytes) };
        (Self { direction, attachment, tx, bytes, observer, drops: Mutex::default() }, inbox)
    }

    /// Queue `item`, whose JSON is `size` bytes, without waiting; `false` when it was
    /// dropped (the queue is full by count or by bytes, or its forwarding task is gone with
    /// the channel).
    pub(crate) fn push(&self, item: T, size: usize) -> bool {
        // Only this queue's pushes add, so a reservation that fits stays within the bound.
        let fits = self
            .bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
                queued.checked_add(size).filter(|&total| total <= MAX_QUEUED_NOTIFICATION_BYTES)
            })
            .is_ok();
        if !fits {
            self.dropped();
            return false;
        }
        match self.tx.try_send((item, size)) {
            Ok(()) => true,
            Err(failed) => {
                self.bytes.fetch_sub(size, Ordering::AcqRel);
                if matches!(failed, TrySendError::Full(_)) {
                    self.dropped();
                }
                false
            }
        }
    }

    fn dropped(&self) {
        if let Some(observer) = &self.observer {
            observer.notification_dropped(self.direction.label());
        }
        let mut drops = self.drops.lock().unwrap_or_else(PoisonError::into_inner);
        drops.unlogged += 1;
        if drops.last_logged.is_none_or(|at| at.elapsed() >= LOG_EVERY) {
            tracing::warn!(attachment = %self.attachment, direction = self.direction.label(),
                dropped = drops.unlogged, limit = MAX_QUEUED_NOTIFICATIONS, limit_bytes = MAX_QUEUED_NOTIFICATION_BYTES,
                "notifications dropped: the receiving side is not reading and the queue is full");
            drops.unlogged = 0;
            drops.last_logged = Some(Instant::now());
        }
    }
}
