//! SEP-2575 subscription streams of one channel. A 2026-07-28 client has no session: the
//! notifications that answer no request of its own (list changes, resource updates) reach it
//! only on a `subscriptions/listen` stream it holds open. Each open stream is a listener of
//! the channel of the client's attachment, with the filter rmcp acknowledged; the channel's
//! notifications go to every listener whose filter accepts them, tagged with its
//! subscription id by rmcp's sink, in the order the downstream sent them, and to no other
//! channel's client.
//!
//! The downstream is asked for what the listeners want together: on a 2026-07-28 connection
//! one `subscriptions/listen` of its own with the union of their filters (re-opened when the
//! union changes, cancelled when no one listens); on an older connection list changes come
//! unasked, and each resource URI a listener names is `resources/subscribe`d (and
//! unsubscribed when no listener names it any more). A new connection is asked afresh.

#![expect(deprecated, reason = "resources/subscribe is how an older downstream is asked for resource updates")]

use crate::control::AttachmentId;
use rmcp::model::{
    ClientRequest, SubscribeRequest, SubscribeRequestParams, SubscriptionFilter, SubscriptionsListenRequest,
    SubscriptionsListenRequestParams, UnsubscribeRequest, UnsubscribeRequestParams,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, SubscriptionSendError, SubscriptionSink};
use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard, PoisonError};
use tokio_util::sync::CancellationToken;

/// Streams one client (attachment) holds open at most; one more is refused.
pub(crate) const MAX_LISTENERS: usize = 16;
/// Resource URIs one stream may name at most.
pub(crate) const MAX_RESOURCE_URIS: usize = 256;

/// Why a stream naming `uris` resources is refused, if it is.
pub(crate) fn too_many_resources(uris: usize) -> Option<String> {
    (uris > MAX_RESOURCE_URIS).then(|| StreamRefused::TooManyResources(uris).to_string())
}

/// Why one more stream of a client that holds [`MAX_LISTENERS`] is refused.
pub(crate) fn too_many_streams() -> String {
    StreamRefused::TooManyStreams.to_string()
}

/// Why a subscription stream is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StreamRefused {
    /// It names more than [`MAX_RESOURCE_URIS`] resources (this many).
    #[error("a subscription stream names at most {max} resources ({0} named)", max = MAX_RESOURCE_URIS)]
    TooManyResources(usize),
    /// The client holds [`MAX_LISTENERS`] streams already.
    #[error("this client holds {max} subscription streams open already", max = MAX_LISTENERS)]
    TooManyStreams,
}

/// What the downstream connection `generation` has been asked for.
#[derive(Debug, Default)]
struct Asked {
    generation: u64,
    /// The filter of the open downstream `subscriptions/listen` (2026-07-28).
    filter: SubscriptionFilter,
    /// Cancels that listen.
    listen: Option<CancellationToken>,
    /// URIs `resources/subscribe`d (older connections).
    subscribed: BTreeSet<String>,
}

#[derive(Debug, Default)]
struct Inner {
    next: u64,
    /// Each open stream: its number, its client's attachment, its sink.
    listeners: Vec<(u64, AttachmentId, SubscriptionSink)>,
    asked: Asked,
}

/// The listeners of one channel and what its downstream was asked for on their behalf.
#[derive(Debug, Default)]
pub(crate) struct Subscriptions {
    inner: Mutex<Inner>,
    /// Cancelled when the channel ends, which ends its streams.
    ended: CancellationToken,
}

fn on(flag: Option<bool>) -> bool {
    flag == Some(true)
}

/// Every filter's categories together, their URIs merged (sorted, once each).
fn union<'a>(filters: impl Iterator<Item = &'a SubscriptionFilter>) -> SubscriptionFilter {
    let (mut tools, mut prompts, mut resources) = (false, false, false);
    let mut uris = BTreeSet::new();
    for f in filters {
        tools |= on(f.tools_list_changed);
        prompts |= on(f.prompts_list_changed);
        resources |= on(f.resources_list_changed);
        uris.extend(f.resource_subscriptions.iter().flatten().cloned());
    }
    let mut filter = SubscriptionFilter::new();
    filter.tools_list_changed = tools.then_some(true);
    filter.prompts_list_changed = prompts.then_some(true);
    filter.resources_list_changed = resources.then_some(true);
    filter.resource_subscriptions = (!uris.is_empty()).then(|| uris.into_iter().collect());
    filter
}

fn is_empty(filter: &SubscriptionFilter) -> bool {
    !on(filter.tools_list_changed)
        && !on(filter.prompts_list_changed)
        && !on(filter.resources_list_changed)
        && filter.resource_subscriptions.as_ref().is_none_or(Vec::is_empty)
}

impl Subscriptions {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A stream of `attachment`'s opened: its number, or why it is refused (too many, too
    /// many URIs).
    pub(crate) fn add(&self, attachment: AttachmentId, sink: SubscriptionSink) -> Result<u64, StreamRefused> {
        let uris = sink.accepted().resource_subscriptions.as_ref().map_or(0, Vec::len);
        if uris > MAX_RESOURCE_URIS {
            return Err(StreamRefused::TooManyResources(uris));
        }
        let mut inner = self.lock();
        if inner.listeners.iter().filter(|(_, by, _)| *by == attachment).count() >= MAX_LISTENERS {
            return Err(StreamRefused::TooManyStreams);
        }
        inner.next += 1;
        let id = inner.next;
        inner.listeners.push((id, attachment, sink));
        Ok(id)
    }

    /// A stream ended.
    pub(crate) fn remove(&self, id: u64) {
        self.lock().listeners.retain(|(n, _, _)| *n != id);
    }

    /// Whether any stream is open.
    pub(crate) fn is_listening(&self) -> bool {
        !self.lock().listeners.is_empty()
    }

    /// Whether `attachment` holds a stream open (then it is not idle).
    pub(crate) fn is_listening_for(&self, attachment: AttachmentId) -> bool {
        self.lock().listeners.iter().any(|(_, by, _)| *by == attachment)
    }

    /// The open streams' sinks, in the order they opened.
    pub(crate) fn sinks(&self) -> Vec<SubscriptionSink> {
        self.lock().listeners.iter().map(|(_, _, s)| s.clone()).collect()
    }

    /// Ask the downstream connection `generation` (through `peer`) for what the open streams
    /// want, when that changed since it was last asked. Spawns the requests; never waits.
    pub(crate) fn sync(&self, peer: &Peer<RoleClient>, generation: u64, stateless_era: bool) {
        let mut inner = self.lock();
        let wanted = union(inner.listeners.iter().map(|(_, _, s)| s.accepted()));
        if inner.asked.generation != generation {
            if let Some(listen) = inner.asked.listen.take() {
                listen.cancel();
            }
            inner.asked = Asked { generation, ..Asked::default() };
        }
        let asked = &mut inner.asked;
        if stateless_era {
            if asked.filter == wanted && (asked.listen.is_some() || is_empty(&wanted)) {
                return;
            }
            if let Some(listen) = asked.listen.take() {
                listen.cancel();
            }
            asked.filter = wanted.clone();
            if !is_empty(&wanted) {
                let token = CancellationToken::new();
                asked.listen = Some(token.clone());
                tokio::spawn(listen_downstream(peer.clone(), wanted, token));
            }
        } else {
            let uris: BTreeSet<String> = wanted.resource_subscriptions.into_iter().flatten().collect();
            for uri in uris.difference(&asked.subscribed) {
                let request = SubscribeRequest::new(SubscribeRequestParams::new(uri.clone()));
                tokio::spawn(ask(peer.clone(), ClientRequest::SubscribeRequest(request), uri.clone()));
            }
            for uri in asked.subscribed.difference(&uris) {
                let request = UnsubscribeRequest::new(UnsubscribeRequestParams::new(uri.clone()));
                tokio::spawn(ask(peer.clone(), ClientRequest::UnsubscribeRequest(request), uri.clone()));
            }
            asked.subscribed = uris;
        }
    }

    /// The channel ends: every stream is ended, the downstream no longer asked.
    pub(crate) fn close(&self) {
        let mut inner = self.lock();
        if let Some(listen) = inner.asked.listen.take() {
            listen.cancel();
        }
        inner.listeners.clear();
        self.ended.cancel();
    }

    /// Resolves when the channel has ended.
    pub(crate) async fn ended(&self) {
        self.ended.cancelled().await;
    }
}

/// Whether a send failed because the stream is gone (not because its filter said no).
pub(crate) fn closed(error: &SubscriptionSendError) -> bool {
    !matches!(
        error,
        SubscriptionSendError::NotificationNotAccepted(_) | SubscriptionSendError::UnsupportedNotification(_)
    )
}

async fn ask(peer: Peer<RoleClient>, request: ClientRequest, uri: String) {
    let method = request.method().to_owned();
    if let Err(e) = peer.send_request(request).await {
        tracing::debug!(%method, %uri, error = %e, "the downstream refused a resource subscription change");
    }
}

/// The channel's own `subscriptions/listen` on a 2026-07-28 downstream, open until `token`
/// is cancelled (then cancelled downstream) or the downstream ends it.
async fn listen_downstream(peer: Peer<RoleClient>, filter: SubscriptionFilter, token: CancellationToken) {
    let request = SubscriptionsListenRequest::new(SubscriptionsListenRequestParams::new(filter));
    let handle = match peer
        .send_cancellable_request(ClientRequest::SubscriptionsListenRequest(request), PeerRequestOptions::no_options())
        .await
    {
        Ok(handle) => handle,
        Err(e) => {
            tracing::debug!(error = %e, "could not open a subscription stream on the downstream");
            return;
        }
    };
    let id = handle.id.clone();
    let cancel = handle.peer.clone();
    tokio::select! {
        answered = handle.await_response() => {
            tracing::debug!(ok = answered.is_ok(), "the downstream ended its subscription stream");
        }
        () = token.cancelled() => {
            let cancel_it = rmcp::model::CancelledNotification::new(rmcp::model::CancelledNotificationParam::new(
                Some(id),
                Some("no client listens any more".to_owned()),
            ));
            let _ = cancel.send_notification(rmcp::model::ClientNotification::CancelledNotification(cancel_it)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(tools: bool, prompts: bool, uris: &[&str]) -> SubscriptionFilter {
        let mut f = SubscriptionFilter::new();
        f.tools_list_changed = tools.then_some(true);
        f.prompts_list_changed = prompts.then_some(true);
        f.resource_subscriptions = (!uris.is_empty()).then(|| uris.iter().map(|u| (*u).to_owned()).collect());
        f
    }

    #[test]
    fn the_downstream_is_asked_for_every_stream_s_categories_and_uris_together() {
        let (a, b) = (filter(true, false, &["file:///b", "file:///a"]), filter(false, true, &["file:///a"]));
        let u = union([&a, &b].into_iter());
        assert_eq!(u, filter(true, true, &["file:///a", "file:///b"]));
        assert!(is_empty(&union(std::iter::empty())));
        assert!(!is_empty(&filter(false, false, &["file:///a"])));
    }
}
