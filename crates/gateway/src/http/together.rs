//! A POST's event stream sent in as few writes as its events allow.
//!
//! rmcp answers a request in a session with an SSE stream whose first event is the priming
//! event (an id and a `retry`, no message: what a client resumes from), sent at once, before
//! the call has even reached the downstream; the answer follows when the call is done. Sent as
//! they come, that is two writes per call, and behind a balancer each write wakes every process
//! on the way (the replica, a relaying replica, the balancer, the client): on two cores the
//! wake-ups of the first write were what the relay hop cost most (BENCHMARKS.md, issue 55).
//! So the response's head and first event wait a moment, [`HOLD`], for the next: a call answered
//! within it goes out in one write (head, priming event, answer, the stream's end); one that
//! takes longer sends its head and priming event when the hold ends, as before, so a client
//! whose connection breaks later still has the event id to resume from.

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::Response;
use http_body::{Body as _, Frame};
use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// How long a request stream's head and first event wait for the next event. Long enough for
/// a call answered at once under load; short against anything a client waits for (the answer
/// itself comes no later for it).
pub(super) const HOLD: Duration = Duration::from_millis(20);

/// `response`, when it is an event stream, with its head held until its second event (or its
/// end) is ready or [`HOLD`] has passed; any other response as it is.
pub(super) async fn together(response: Response) -> Response {
    let stream = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
    if !stream {
        return response;
    }
    let (parts, mut body) = response.into_parts();
    let until = tokio::time::Instant::now() + HOLD;
    let mut ready = Ready::default();
    while ready.frames.len() < 2 {
        let next = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx));
        match tokio::time::timeout_at(until, next).await {
            Ok(Some(Ok(frame))) => ready.frames.push_back(frame),
            Ok(Some(Err(e))) => {
                ready.error = Some(e);
                break;
            }
            Ok(None) => {
                ready.ended = true;
                break;
            }
            Err(_) => break,
        }
    }
    Response::from_parts(parts, Body::new(Prefixed { ready, rest: body }))
}

/// What was read while the head waited.
#[derive(Default)]
struct Ready {
    frames: VecDeque<Frame<Bytes>>,
    error: Option<axum::Error>,
    ended: bool,
}

/// The frames read already, then the rest of the body.
struct Prefixed {
    ready: Ready,
    rest: Body,
}

impl http_body::Body for Prefixed {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(frame) = self.ready.frames.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        if let Some(e) = self.ready.error.take() {
            self.ready.ended = true;
            return Poll::Ready(Some(Err(e)));
        }
        if self.ready.ended {
            return Poll::Ready(None);
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.ready.frames.is_empty() && self.ready.error.is_none() && (self.ready.ended || self.rest.is_end_stream())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;

    fn sse(body: Body) -> Response {
        let mut response = Response::new(body);
        *response.status_mut() = StatusCode::OK;
        response.headers_mut().insert(header::CONTENT_TYPE, "text/event-stream".parse().unwrap());
        response
    }

    /// Polls `body` once, without waiting: how many frames are ready now, and whether it ended.
    fn ready_now(body: &mut Body) -> (usize, bool) {
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut n = 0;
        loop {
            match Pin::new(&mut *body).poll_frame(&mut cx) {
                Poll::Ready(Some(Ok(_))) => n += 1,
                Poll::Ready(None) => return (n, true),
                Poll::Ready(Some(Err(e))) => panic!("{e}"),
                Poll::Pending => return (n, false),
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_within_the_hold_goes_out_with_the_head_and_the_priming_event() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Result<Bytes, std::io::Error>>();
        tx.send(Ok(Bytes::from_static(b"id: 0/1\nretry: 3000\ndata: \n\n"))).unwrap();
        let answer = tokio::spawn(async move {
            tokio::time::sleep(HOLD / 2).await;
            tx.send(Ok(Bytes::from_static(b"data: {}\n\n"))).unwrap();
        });
        let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|f| (f, rx)) });
        let started = tokio::time::Instant::now();
        let mut body = together(sse(Body::from_stream(stream))).await.into_body();
        assert_eq!(started.elapsed(), HOLD / 2, "the head waited for the answer, not for the whole hold");
        answer.await.unwrap();
        assert_eq!(ready_now(&mut body), (2, true), "both events and the end are ready at once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_answer_does_not_hold_the_priming_event_past_the_hold() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Result<Bytes, std::io::Error>>();
        tx.send(Ok(Bytes::from_static(b"id: 0/1\nretry: 3000\ndata: \n\n"))).unwrap();
        let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|f| (f, rx)) });
        let started = tokio::time::Instant::now();
        let mut body = together(sse(Body::from_stream(stream))).await.into_body();
        assert_eq!(started.elapsed(), HOLD, "the head goes when the hold ends");
        assert_eq!(ready_now(&mut body), (1, false), "with the priming event; the answer is still to come");
        tx.send(Ok(Bytes::from_static(b"data: {}\n\n"))).unwrap();
        drop(tx);
        assert_eq!(ready_now(&mut body), (1, true), "then the answer, then the end");
    }

    #[tokio::test(start_paused = true)]
    async fn a_response_that_is_no_event_stream_is_not_held() {
        let (_tx, rx) = tokio::sync::mpsc::unbounded_channel::<Result<Bytes, std::io::Error>>();
        let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|f| (f, rx)) });
        let started = tokio::time::Instant::now();
        let response = together(Response::new(Body::from_stream(stream))).await;
        assert_eq!(started.elapsed(), Duration::ZERO);
        drop(response);
    }
}
