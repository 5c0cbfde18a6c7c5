//! Slots held for as long as a response is being answered: a session's request ids in
//! flight (one each) and its open event streams (GET, a few). A slot is taken before rmcp
//! sees the request and rides the response body, released when the body ends or is
//! dropped (the client went away) — so the count is of what is really open.

use axum::body::{Body, Bytes, HttpBody};
use axum::response::Response;
use std::collections::HashMap;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

/// How many slots each key holds now; a key at zero is removed, so the table is only as
/// large as what is open.
#[derive(Debug)]
pub(super) struct Slots<K> {
    held: Mutex<HashMap<K, usize>>,
}

impl<K: Hash + Eq> Default for Slots<K> {
    fn default() -> Self {
        Self { held: Mutex::new(HashMap::new()) }
    }
}

impl<K: Hash + Eq + Clone> Slots<K> {
    /// One slot of `key`, unless it holds `max` already.
    pub(super) fn take(self: &Arc<Self>, key: K, max: usize) -> Option<Slot<K>> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let count = held.entry(key.clone()).or_insert(0);
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(Slot { slots: self.clone(), key })
    }
}

/// One slot, given back when dropped.
#[derive(Debug)]
pub(super) struct Slot<K: Hash + Eq> {
    slots: Arc<Slots<K>>,
    key: K,
}

impl<K: Hash + Eq> Slot<K> {
    /// The key this slot is held for.
    pub(super) fn key(&self) -> &K {
        &self.key
    }
}

impl<K: Hash + Eq> Drop for Slot<K> {
    fn drop(&mut self) {
        let mut held = self.slots.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = held.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.key);
            }
        }
    }
}

/// `response` with `slot` held until its body ends or is dropped.
pub(super) fn hold_while_answering<S: Send + Unpin + 'static>(response: Response, slot: S) -> Response {
    response.map(|body| Body::new(Holding { body, slot: Some(slot) }))
}

/// A response body holding a slot.
struct Holding<S> {
    body: Body,
    slot: Option<S>,
}

impl<S: Unpin> HttpBody for Holding<S> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        // The answer is out: free the slot now, not whenever hyper drops the body.
        if matches!(polled, Poll::Ready(None)) {
            this.slot = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::Slots;
    use std::sync::Arc;

    #[test]
    fn a_key_holds_at_most_max_slots_and_a_dropped_slot_is_given_back() {
        let slots = Arc::new(Slots::default());
        let first = slots.take("a", 2).expect("the first");
        let second = slots.take("a", 2).expect("the second");
        assert!(slots.take("a", 2).is_none(), "a third is refused");
        assert!(slots.take("b", 2).is_some(), "another key is counted apart");
        drop(first);
        let third = slots.take("a", 2).expect("given back");
        drop((second, third));
        assert!(slots.held.lock().unwrap().is_empty(), "no key is kept at zero");
    }
}
