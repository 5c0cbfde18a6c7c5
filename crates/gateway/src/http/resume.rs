//! Resumable request streams: the Streamable HTTP transport's resumability (2025-11-25,
//! "Resumability and Redelivery") for a session's requests, kept by the process holding the
//! session.
//!
//! rmcp's `LocalSessionManager` numbers every event of a request's SSE stream (`INDEX/STREAM`,
//! the priming event first) but forgets the stream the moment its answer is sent — into the
//! stream, whether or not anyone still reads it. A client whose connection broke after the
//! call ran (a replica relaying it was killed, a proxy restarted) resumes with `GET` and
//! `Last-Event-ID`, and rmcp answers 200 with an empty stream, which the official Python SDK
//! takes as "reconnect later", forever.
//!
//! [`Sessions`] wraps rmcp's manager and records each request stream's events in its session's
//! journal as they pass. A stream whose HTTP response is dropped before its answer (the
//! client, a relay or a proxy went away) is drained on, so the call's later events — its
//! answer — are recorded though nobody reads them. A resume names a stream by its event id:
//! it gets what came after, and then what comes, until the answer. An ended stream is kept a
//! while, bounded ([`KEEP_FOR`], [`MAX_ENDED`] and the byte budgets); one no longer kept is
//! answered with a JSON-RPC error for its request, so its client fails the call plainly; an
//! event id naming no stream of the session is refused by the gatekeeper (410), never answered
//! with an empty success. Each session's journal is its own: a client resumes only its own
//! streams, and the gatekeeper admits only the session's own credential.

use rmcp::model::{ClientJsonRpcMessage, ErrorCode, ErrorData, RequestId, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, SessionError,
};
use rmcp::transport::streamable_http_server::session::{RestoreOutcome, ServerSseMessage, SessionId, SessionManager};
use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long an ended stream is kept for a client to resume it. A client resumes after the
/// `retry` its priming event gave (3 s): a minute covers a slow one.
pub(super) const KEEP_FOR: Duration = Duration::from_secs(60);
/// Ended streams one session keeps at most (its latest).
pub(super) const MAX_ENDED: usize = 32;
/// Bytes of ended streams' messages one session keeps at most.
pub(super) const MAX_SESSION_BYTES: usize = 8 * 1024 * 1024;
/// Bytes of ended streams' messages all sessions keep at most.
pub(super) const MAX_TOTAL_BYTES: usize = 64 * 1024 * 1024;
/// Events one stream keeps at most (its latest): a long stream of notifications is not
/// kept whole.
pub(super) const MAX_STREAM_EVENTS: usize = 256;
/// Bytes of one stream's messages kept at most (its latest events; the newest is always kept).
pub(super) const MAX_STREAM_BYTES: usize = 8 * 1024 * 1024;
/// Streams no longer kept whose request is still remembered, per session, so a late resume is
/// told its answer is lost rather than that the stream never was.
const MAX_LOST: usize = 256;

type BoxedEvents = Pin<Box<dyn futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static>>;

/// A request stream's event id as rmcp's sessions write it, `INDEX/STREAM`: the event's place
/// and the stream's number within its session. (The session's standalone stream has no
/// `/STREAM` part: rmcp resumes that one itself.)
pub(super) fn cursor(event_id: &str) -> Option<(usize, u64)> {
    let (index, stream) = event_id.split_once('/')?;
    Some((index.parse().ok()?, stream.parse().ok()?))
}

/// What a `Last-Event-ID` names in a session.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Resumable {
    /// Not a request stream's id: rmcp's own (the standalone stream).
    NotOurs,
    /// A stream this session keeps, or kept (its request is told its answer is lost).
    Known,
    /// No stream of this session: never one, or forgotten long since.
    Unknown,
}

/// rmcp's session manager, with each session's request streams journaled for resumption.
#[derive(Default)]
pub(super) struct Sessions {
    inner: LocalSessionManager,
    shared: Arc<Shared>,
}

/// What the sessions' journals share: the journals, and the bytes all ended streams keep.
#[derive(Default)]
struct Shared {
    journals: Mutex<HashMap<SessionId, Arc<Journal>>>,
    kept_bytes: AtomicUsize,
}

/// One session's request streams.
#[derive(Default)]
struct Journal {
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    /// The streams kept, by number: in flight or ended.
    streams: HashMap<u64, Arc<Recorded>>,
    /// The ended ones, oldest first: number, when, bytes.
    ended: VecDeque<(u64, Instant, usize)>,
    /// Bytes of the ended ones.
    bytes: usize,
    /// Streams no longer kept, oldest first, and their requests.
    lost: VecDeque<(u64, RequestId)>,
}

/// One request stream's events.
struct Recorded {
    request: RequestId,
    events: Mutex<Events>,
    /// Told when an event is added or the stream ends.
    changed: Notify,
}

#[derive(Default)]
struct Events {
    /// Index, event, bytes; oldest first.
    list: VecDeque<(usize, ServerSseMessage, usize)>,
    bytes: usize,
    /// The stream has ended (its answer is the last event), or is no longer kept.
    ended: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How many bytes `event`'s message is as JSON (counted, not written).
fn weight(event: &ServerSseMessage) -> usize {
    event.message.as_ref().map_or(0, |m| crate::outbox::json_len(m.as_ref()))
        + event.event_id.as_ref().map_or(0, String::len)
}

impl Shared {
    fn journal(&self, session: &SessionId) -> Option<Arc<Journal>> {
        lock(&self.journals).get(session).cloned()
    }

    /// Forget what every session keeps past [`KEEP_FOR`] (the budget of all is short).
    fn expire_all(&self, now: Instant) {
        let journals: Vec<Arc<Journal>> = lock(&self.journals).values().cloned().collect();
        for journal in journals {
            journal.expire(&mut lock(&journal.kept), now, self);
        }
    }
}

impl Journal {
    /// Keep `recorded` as stream `number` (its first event has come).
    fn open(&self, number: u64, recorded: Arc<Recorded>) {
        lock(&self.kept).streams.insert(number, recorded);
    }

    /// Stream `number` ended: keep it, within the bounds, evicting the oldest ended first.
    fn ended(&self, number: u64, shared: &Shared) {
        let now = Instant::now();
        let mut kept = lock(&self.kept);
        let Some(recorded) = kept.streams.get(&number).cloned() else { return };
        let bytes = lock(&recorded.events).bytes;
        self.expire(&mut kept, now, shared);
        kept.ended.push_back((number, now, bytes));
        kept.bytes += bytes;
        let total = shared.kept_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if total > MAX_TOTAL_BYTES {
            drop(kept);
            shared.expire_all(now);
            kept = lock(&self.kept);
        }
        while kept.ended.len() > MAX_ENDED
            || kept.bytes > MAX_SESSION_BYTES
            || shared.kept_bytes.load(Ordering::Relaxed) > MAX_TOTAL_BYTES
        {
            if !Self::evict_oldest(&mut kept, shared) {
                break;
            }
        }
    }

    /// Forget the ended streams kept past [`KEEP_FOR`].
    fn expire(&self, kept: &mut Kept, now: Instant, shared: &Shared) {
        while kept.ended.front().is_some_and(|(_, at, _)| now.saturating_duration_since(*at) >= KEEP_FOR) {
            Self::evict_oldest(kept, shared);
        }
    }

    /// Forget the oldest ended stream, remembering its request. `false`: none.
    fn evict_oldest(kept: &mut Kept, shared: &Shared) -> bool {
        let Some((number, _, bytes)) = kept.ended.pop_front() else { return false };
        kept.bytes -= bytes;
        shared.kept_bytes.fetch_sub(bytes, Ordering::Relaxed);
        if let Some(recorded) = kept.streams.remove(&number) {
            kept.lost.push_back((number, recorded.request.clone()));
            if kept.lost.len() > MAX_LOST {
                kept.lost.pop_front();
            }
        }
        true
    }

    /// The session ended: give its bytes back, end its readers.
    fn close(&self, shared: &Shared) {
        let mut kept = lock(&self.kept);
        shared.kept_bytes.fetch_sub(kept.bytes, Ordering::Relaxed);
        kept.bytes = 0;
        kept.ended.clear();
        for recorded in kept.streams.drain().map(|(_, r)| r) {
            lock(&recorded.events).ended = true;
            recorded.changed.notify_waiters();
        }
    }

    /// What resuming stream `number` finds: the stream, or the request whose answer is lost.
    fn find(&self, number: u64, shared: &Shared) -> Option<Result<Arc<Recorded>, RequestId>> {
        let mut kept = lock(&self.kept);
        self.expire(&mut kept, Instant::now(), shared);
        if let Some(recorded) = kept.streams.get(&number) {
            return Some(Ok(recorded.clone()));
        }
        kept.lost.iter().find(|(n, _)| *n == number).map(|(_, request)| Err(request.clone()))
    }
}

impl Recorded {
    fn new(request: RequestId) -> Self {
        Self { request, events: Mutex::default(), changed: Notify::new() }
    }

    /// Add an event, keeping the stream within its bounds (its newest event always).
    fn push(&self, index: usize, event: ServerSseMessage) {
        let bytes = weight(&event);
        let mut events = lock(&self.events);
        events.list.push_back((index, event, bytes));
        events.bytes += bytes;
        while events.list.len() > 1 && (events.list.len() > MAX_STREAM_EVENTS || events.bytes > MAX_STREAM_BYTES) {
            if let Some((_, _, dropped)) = events.list.pop_front() {
                events.bytes -= dropped;
            }
        }
        drop(events);
        self.changed.notify_waiters();
    }

    fn end(&self) {
        lock(&self.events).ended = true;
        self.changed.notify_waiters();
    }

    /// The events after `index`, then the ones still to come, until the stream ends.
    fn replay(self: Arc<Self>, after: usize) -> impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static {
        futures::stream::unfold((self, after), |(recorded, after)| async move {
            loop {
                let notified = recorded.changed.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                let next = {
                    let events = lock(&recorded.events);
                    match events.list.iter().find(|(index, ..)| *index > after) {
                        Some((index, event, _)) => Some(Some((*index, event.clone()))),
                        None if events.ended => Some(None),
                        None => None,
                    }
                };
                match next {
                    Some(Some((index, event))) => return Some((event, (recorded.clone(), index))),
                    Some(None) => return None,
                    None => notified.await,
                }
            }
        })
    }
}

/// A request's SSE stream as rmcp makes it, each event recorded in the session's journal on
/// its way out. Dropped before it ended (the HTTP response went away), it is drained on by a
/// task of its own, so the rest of the call's events are recorded for a resume.
struct Recording {
    inner: Option<BoxedEvents>,
    shared: Arc<Shared>,
    journal: Option<Arc<Journal>>,
    request: RequestId,
    /// The stream's number and record, once its first event named it.
    stream: Option<(u64, Arc<Recorded>)>,
    done: bool,
}

impl Recording {
    fn record(&mut self, event: &ServerSseMessage) {
        let Some(journal) = &self.journal else { return };
        let Some((index, number)) = event.event_id.as_deref().and_then(cursor) else { return };
        let recorded = match &self.stream {
            Some((_, recorded)) => recorded.clone(),
            None => {
                let recorded = Arc::new(Recorded::new(self.request.clone()));
                journal.open(number, recorded.clone());
                self.stream = Some((number, recorded.clone()));
                recorded
            }
        };
        recorded.push(index, event.clone());
    }

    fn end(&mut self) {
        self.done = true;
        if let (Some(journal), Some((number, recorded))) = (&self.journal, &self.stream) {
            recorded.end();
            journal.ended(*number, &self.shared);
        }
    }
}

impl futures::Stream for Recording {
    type Item = ServerSseMessage;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ServerSseMessage>> {
        let this = self.get_mut();
        let Some(inner) = this.inner.as_mut() else { return Poll::Ready(None) };
        match inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(event)) => {
                this.record(&event);
                // The answer is a request stream's last event (rmcp closes it right after):
                // ended now, it goes out with the stream's end in one write, not two.
                let answer = event
                    .message
                    .as_deref()
                    .is_some_and(|m| matches!(m, ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_)));
                if answer {
                    this.inner = None;
                    this.end();
                }
                Poll::Ready(Some(event))
            }
            Poll::Ready(None) => {
                this.inner = None;
                this.end();
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if self.done || self.journal.is_none() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let Some(inner) = self.inner.take() else { return };
        let mut rest = Recording {
            inner: Some(inner),
            shared: self.shared.clone(),
            journal: self.journal.take(),
            request: self.request.clone(),
            stream: self.stream.take(),
            done: false,
        };
        // The call goes on without a reader: its answer is recorded for the client's resume.
        runtime.spawn(async move {
            use futures::StreamExt as _;
            while rest.next().await.is_some() {}
        });
    }
}

/// The error a resumed stream whose answer is no longer kept carries, for its request.
fn lost(request: RequestId) -> ServerSseMessage {
    let text = format!(
        "the answer to this request is no longer kept for resumption (a session keeps its latest {MAX_ENDED} \
         answers for {} s): the call may have run — the gateway's audit log says whether it did",
        KEEP_FOR.as_secs()
    );
    ServerSseMessage::from_message(ServerJsonRpcMessage::error(
        ErrorData::new(ErrorCode(-32000), text, None),
        Some(request),
    ))
}

impl Sessions {
    /// What `last_event_id` names in `session` (the gatekeeper refuses an unknown one).
    pub(super) fn resumable(&self, session: &str, last_event_id: &str) -> Resumable {
        let Some((_, number)) = cursor(last_event_id) else { return Resumable::NotOurs };
        let journal = self.shared.journal(&SessionId::from(session));
        match journal.and_then(|j| j.find(number, &self.shared)) {
            Some(_) => Resumable::Known,
            None => Resumable::Unknown,
        }
    }
}

impl SessionManager for Sessions {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        lock(&self.shared.journals).insert(id.clone(), Arc::default());
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let journal = lock(&self.shared.journals).remove(id);
        if let Some(journal) = journal {
            journal.close(&self.shared);
        }
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let request = match &message {
            ClientJsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        let inner: BoxedEvents = Box::pin(self.inner.create_stream(id, message).await?);
        let journal = request.as_ref().and_then(|_| self.shared.journal(id));
        Ok(Recording {
            inner: Some(inner),
            shared: self.shared.clone(),
            journal,
            request: request.unwrap_or(RequestId::Number(0)),
            stream: None,
            done: false,
        })
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let Some((after, number)) = cursor(&last_event_id) else {
            let stream: BoxedEvents = Box::pin(self.inner.resume(id, last_event_id).await?);
            return Ok(stream);
        };
        let found = self.shared.journal(id).and_then(|j| j.find(number, &self.shared));
        match found {
            Some(Ok(recorded)) => Ok(Box::pin(recorded.replay(after)) as BoxedEvents),
            Some(Err(request)) => Ok(Box::pin(futures::stream::once(std::future::ready(lost(request)))) as BoxedEvents),
            None => Err(LocalSessionManagerError::SessionError(SessionError::ChannelClosed(Some(number)))),
        }
    }

    async fn restore_session(&self, id: SessionId) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.inner.restore_session(id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt as _;

    fn answer(id: i64) -> ServerJsonRpcMessage {
        ServerJsonRpcMessage::response(rmcp::model::ServerResult::empty(()), RequestId::Number(id))
    }

    fn event(index: usize, stream: u64, message: Option<ServerJsonRpcMessage>) -> ServerSseMessage {
        let id = format!("{index}/{stream}");
        match message {
            Some(message) => ServerSseMessage::new(id, message),
            None => ServerSseMessage::priming(id, Duration::from_secs(3)),
        }
    }

    /// A journal with stream `number` recorded whole (a priming event and its answer) and ended.
    fn ended_stream(shared: &Arc<Shared>, journal: &Arc<Journal>, number: u64) {
        let mut recording = Recording {
            inner: Some(Box::pin(futures::stream::iter([
                event(0, number, None),
                event(1, number, Some(answer(number as i64))),
            ]))),
            shared: shared.clone(),
            journal: Some(journal.clone()),
            request: RequestId::Number(number as i64),
            stream: None,
            done: false,
        };
        futures::executor::block_on(async { while recording.next().await.is_some() {} });
    }

    #[test]
    fn event_ids_of_request_streams_are_told_from_the_standalone_streams() {
        assert_eq!(cursor("3/17"), Some((3, 17)));
        assert_eq!(cursor("0"), None, "the standalone stream's: rmcp's own");
        assert_eq!(cursor("x/1"), None);
        assert_eq!(cursor("1/-2"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn an_ended_stream_is_kept_a_while_then_its_request_is_told_its_answer_is_lost() {
        let shared = Arc::new(Shared::default());
        let journal = Arc::new(Journal::default());
        ended_stream(&shared, &journal, 4);
        let replayed: Vec<_> = journal.find(4, &shared).unwrap().unwrap().replay(0).collect().await;
        assert_eq!(replayed.len(), 1, "the answer after the priming event");
        assert_eq!(replayed[0].event_id.as_deref(), Some("1/4"));
        tokio::time::advance(KEEP_FOR).await;
        let lost = journal.find(4, &shared).unwrap().err();
        assert_eq!(lost, Some(RequestId::Number(4)));
        assert_eq!(shared.kept_bytes.load(Ordering::Relaxed), 0, "its bytes given back");
        assert!(journal.find(5, &shared).is_none(), "a stream never recorded");
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_keeps_its_latest_ended_streams() {
        let shared = Arc::new(Shared::default());
        let journal = Arc::new(Journal::default());
        for number in 0..(MAX_ENDED as u64 + 3) {
            ended_stream(&shared, &journal, number);
        }
        for number in 0..3 {
            assert!(
                journal.find(number, &shared).unwrap().is_err(),
                "stream {number}: evicted, its request remembered"
            );
        }
        for number in 3..(MAX_ENDED as u64 + 3) {
            assert!(journal.find(number, &shared).unwrap().is_ok(), "stream {number} kept");
        }
        journal.close(&shared);
        assert_eq!(shared.kept_bytes.load(Ordering::Relaxed), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_resume_gets_the_events_still_to_come_until_the_answer() {
        let shared = Arc::new(Shared::default());
        let journal = Arc::new(Journal::default());
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let recording = Recording {
            inner: Some(Box::pin(tokio_stream_of(rx))),
            shared: shared.clone(),
            journal: Some(journal.clone()),
            request: RequestId::Number(9),
            stream: None,
            done: false,
        };
        let mut reader = recording;
        tx.send(event(0, 2, None)).await.unwrap();
        assert_eq!(reader.next().await.unwrap().event_id.as_deref(), Some("0/2"));
        // The reader goes away mid-call; the call's answer still comes, and is recorded.
        drop(reader);
        let resumed = journal.find(2, &shared).unwrap().unwrap().replay(0);
        tokio::pin!(resumed);
        tx.send(event(1, 2, Some(answer(9)))).await.unwrap();
        drop(tx);
        let got = resumed.next().await.expect("the answer");
        assert_eq!(got.event_id.as_deref(), Some("1/2"));
        assert!(resumed.next().await.is_none(), "the stream ends with its answer");
    }

    fn tokio_stream_of(
        mut rx: tokio::sync::mpsc::Receiver<ServerSseMessage>,
    ) -> impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static {
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
    }
}
