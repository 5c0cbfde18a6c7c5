//! The store URL as a connection configuration: parsed without echoing the
//! password, TLS refused (this build has none), and the timeouts a fleet
//! needs filled in where the URL leaves them out.

use crate::{StoreError, StoreErrorKind, redact_url};
use ::postgres::Config;
use ::postgres::config::SslMode;
use std::time::Duration;

/// How long a connection attempt may take, unless the URL says otherwise.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long sent data may stay unacknowledged before the connection counts
/// as lost (Linux `TCP_USER_TIMEOUT`), unless the URL says otherwise: a
/// vanished server must surface as `Unavailable`, not as a call that hangs.
pub const TCP_USER_TIMEOUT: Duration = Duration::from_secs(30);

/// A parsed store URL.
pub(super) struct Target {
    /// The URL with its password replaced by `***`.
    pub shown: String,
    /// How to connect.
    pub config: Config,
    /// The password, kept only to scrub it from the server's messages.
    pub secret: Option<String>,
}

impl Target {
    /// Parse `url`. A URL that does not parse is `Invalid`; one that requires
    /// TLS is `Unsupported`. Neither message holds the password.
    pub fn parse(url: &str) -> Result<Self, StoreError> {
        let shown = redact_url(url.trim());
        let mut config: Config = url.trim().parse().map_err(|e: ::postgres::Error| {
            // The parser may quote the part it refused; keep the URL out.
            StoreError::new(StoreErrorKind::Invalid, format!("invalid store URL {shown}: {}", super::fail::detail(&e)))
        })?;
        if config.get_ssl_mode() == SslMode::Require {
            return Err(StoreError::new(
                StoreErrorKind::Unsupported,
                format!("store {shown} requires TLS, which this fleetgate build does not include"),
            ));
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(TCP_USER_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("fleetgate");
        }
        let secret = config.get_password().map(|p| String::from_utf8_lossy(p).into_owned()).filter(|p| !p.is_empty());
        Ok(Self { shown, config, secret })
    }
}
