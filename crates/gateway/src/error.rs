//! The gateway's typed errors: why [`crate::serve`] could not serve at all. Trouble while
//! serving (a bad frame, a dead downstream, a control plane that fails) is answered on the
//! wire and logged, never returned.

use std::io;

/// Why the gateway could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// The tokio runtime could not be built.
    #[error("start the async runtime: {0}")]
    Runtime(#[source] io::Error),
    /// A signal handler could not be installed.
    #[error("install the {signal} handler: {source}")]
    Signal {
        /// `SIGTERM` or `SIGINT`.
        signal: &'static str,
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },
    /// The log filter given is not valid `EnvFilter` syntax.
    #[error("invalid log filter `{filter}`: {reason}")]
    LogFilter {
        /// The filter as given.
        filter: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The downstream child could not be put under supervision.
    #[error("supervise the downstream server: {0}")]
    Supervise(#[from] fleetgate_supervise::SpawnError),
    /// A control-plane call panicked or could not be run.
    #[error("control plane call `{call}` failed: {reason}")]
    ControlPlane {
        /// The trait method.
        call: &'static str,
        /// The panic or join failure.
        reason: String,
    },
    /// A non-loopback listen address without the explicit permission.
    #[error(
        "refusing to listen on {0}: it is not a loopback address (pass --allow-remote to serve other hosts, and \
         set a bearer token)"
    )]
    RemoteListen(std::net::SocketAddr),
    /// A non-loopback listen address with no way to authenticate requests.
    #[error(
        "refusing to listen on {0} without authentication: set FLEETGATE_HTTP_TOKEN (non-empty) or an [http] \
         tokens_file"
    )]
    RemoteWithoutToken(std::net::SocketAddr),
    /// A `[[http.oauth.principals]]` name is another principal's (a tokens-file name, say).
    #[error(transparent)]
    Principals(#[from] crate::oauth::PrincipalClash),
    /// The bearer token is configured but empty (it would let anyone in, or no one).
    #[error("the HTTP bearer token is empty: set FLEETGATE_HTTP_TOKEN to a non-empty secret, or unset it")]
    EmptyToken,
    /// The metrics listener's settings are refused: a non-loopback address without the
    /// explicit permission or without a token, or an empty token.
    #[error("refusing the metrics listener on {addr}: {reason}")]
    MetricsListen {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// Why.
        reason: &'static str,
    },
    /// The HTTP listener could not be bound.
    #[error("listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },
}
