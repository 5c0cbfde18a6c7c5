//! [`PeerLink`]: the attachment's downstream as a [`DownstreamLink`] for the control plane's
//! own reads (the PR workflow's head read). The control plane runs on the blocking pool, so
//! the call is driven there with `Handle::block_on`; the runtime's workers carry the
//! exchange, and the gateway's call timeout bounds the wait.

use crate::control::DownstreamLink;
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

impl DownstreamLink for PeerLink {
    fn call_tool(&self, name: &str, arguments: JsonObject) -> Result<CallToolResult, String> {
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        let answered = self.runtime.block_on(tokio::time::timeout(self.timeout, self.peer.call_tool(params)));
        match answered {
            Err(_) => Err(format!("the downstream did not answer `{name}` within {:.1} s", self.timeout.as_secs_f64())),
            Ok(Err(error)) => Err(format!("the downstream failed `{name}`: {error}")),
            Ok(Ok(result)) => Ok(result),
        }
    }
}
