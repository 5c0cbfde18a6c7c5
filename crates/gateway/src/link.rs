//! [`PeerLink`]: the attachment's downstream as a [`DownstreamLink`] for the control plane's
//! own reads. The reads a decision needs (the PR workflow's head read) are made before
//! deciding, on the runtime ([`PeerLink::call`]); a read the control plane makes from the
//! blocking pool (what a forwarded call settles, a control tool's) is driven there with
//! `Handle::block_on`, the runtime's workers carrying the exchange. The gateway's call
//! timeout bounds both.

use crate::control::{DownstreamError, DownstreamErrorKind, DownstreamLink};
use crate::downstream::Connection;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::{Peer, RoleClient};
use std::fmt;
use std::time::Duration;

/// One connection's peer, bounded by a timeout.
pub(crate) struct PeerLink {
    peer: Peer<RoleClient>,
    timeout: Duration,
    runtime: tokio::runtime::Handle,
}

impl PeerLink {
    /// A link to `connection`. Must be made inside the gateway's runtime.
    pub(crate) fn new(connection: &Connection, timeout: Duration) -> Self {
        Self { peer: connection.peer.clone(), timeout, runtime: tokio::runtime::Handle::current() }
    }
}

impl fmt::Debug for PeerLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerLink").field("timeout", &self.timeout).finish_non_exhaustive()
    }
}

impl PeerLink {
    /// [`DownstreamLink::call_tool`] on the runtime, for a read made before deciding.
    pub(crate) async fn call(&self, name: &str, arguments: JsonObject) -> Result<CallToolResult, DownstreamError> {
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        answered(name, self.timeout, tokio::time::timeout(self.timeout, self.peer.call_tool(params)).await)
    }
}

fn answered<E: fmt::Display>(
    name: &str,
    timeout: Duration,
    answered: Result<Result<CallToolResult, E>, tokio::time::error::Elapsed>,
) -> Result<CallToolResult, DownstreamError> {
    match answered {
        Err(_) => Err(DownstreamError::new(
            DownstreamErrorKind::Timeout,
            format!("the downstream did not answer `{name}` within {:.1} s", timeout.as_secs_f64()),
        )),
        Ok(Err(error)) => {
            Err(DownstreamError::new(DownstreamErrorKind::Failed, format!("the downstream failed `{name}`: {error}")))
        }
        Ok(Ok(result)) => Ok(result),
    }
}

impl DownstreamLink for PeerLink {
    fn call_tool(&self, name: &str, arguments: JsonObject) -> Result<CallToolResult, DownstreamError> {
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        answered(
            name,
            self.timeout,
            self.runtime.block_on(tokio::time::timeout(self.timeout, self.peer.call_tool(params))),
        )
    }
}
