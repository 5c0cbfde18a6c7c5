//! `[http.oauth]`: the authorization server an HTTP gateway trusts (the gateway as an OAuth
//! 2.1 resource server), checked where it is configured.
//!
//! ```toml
//! [http.oauth]
//! issuer = "https://auth.example.com/realms/fleet"   # the tokens' `iss`
//! audience = "https://gw.example.com/mcp"            # this gateway's resource (`aud`)
//! jwks_uri = "https://auth.example.com/…/certs"      # optional: else from the issuer's metadata
//! principal_claim = "sub"                            # the principal's name
//! profiles_claim = "fleetgate_profiles"              # optional: the profiles it may use
//! leeway_seconds = 60                                # clock skew on exp/nbf (0 to 300)
//! jwks_cooldown_seconds = 30                         # unknown key ids refetch at most this often
//!
//! [[http.oauth.principals]]                          # optional: a subject's name and profiles
//! subject = "service-account-ci"
//! name = "ci-bot"                                    # unset: `oauth:service-account-ci`
//! profiles = ["prgs-reviewer"]
//! ```

use crate::Invalid;
use fleetgate_gateway::{OAuthPrincipal, OAuthSettings};
use serde::Deserialize;
use std::time::Duration;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawOAuth {
    issuer: String,
    audience: String,
    jwks_uri: Option<String>,
    principal_claim: Option<String>,
    profiles_claim: Option<String>,
    leeway_seconds: Option<u64>,
    jwks_cooldown_seconds: Option<u64>,
    #[serde(default)]
    principals: Vec<RawPrincipal>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrincipal {
    subject: String,
    name: Option<String>,
    #[serde(default)]
    profiles: Vec<String>,
}

/// The gateway's rule for every URL of the authorization server (`check_oauth_url`: https,
/// or http on a loopback host), the one it applies to discovered URLs too.
fn check_url(key: &'static str, url: &str) -> Result<(), Invalid> {
    fleetgate_gateway::check_oauth_url(url).map_err(|why| Invalid::OAuthUrl { key, url: url.to_owned(), why })
}

fn word(key: &'static str, value: &str) -> Result<(), Invalid> {
    if value.is_empty() || value.len() > 128 || !value.chars().all(|c| c.is_ascii_graphic()) {
        return Err(Invalid::OAuthWord { key, value: value.to_owned() });
    }
    Ok(())
}

impl RawOAuth {
    /// The settings, checked; `profiles` are the roster's (a mapping may name only those).
    pub(crate) fn resolve(self, profiles: &[&str]) -> Result<OAuthSettings, Invalid> {
        check_url("issuer", &self.issuer)?;
        check_url("audience", &self.audience)?;
        if let Some(uri) = &self.jwks_uri {
            check_url("jwks_uri", uri)?;
        }
        let mut settings = OAuthSettings::new(self.issuer, self.audience);
        settings.jwks_uri = self.jwks_uri;
        if let Some(claim) = self.principal_claim {
            word("principal_claim", &claim)?;
            settings.principal_claim = claim;
        }
        if let Some(claim) = &self.profiles_claim {
            word("profiles_claim", claim)?;
        }
        settings.profiles_claim = self.profiles_claim;
        let leeway = self.leeway_seconds.unwrap_or(60);
        if leeway > 300 {
            return Err(Invalid::OAuthLeeway(leeway));
        }
        settings.leeway = Duration::from_secs(leeway);
        let cooldown = self.jwks_cooldown_seconds.unwrap_or(30);
        if cooldown > 3600 {
            return Err(Invalid::OAuthCooldown(cooldown));
        }
        settings.jwks_cooldown = Duration::from_secs(cooldown);
        for p in self.principals {
            word("principals.subject", &p.subject)?;
            if let Some(name) = &p.name {
                word("principals.name", name)?;
            }
            if let Some(unknown) = p.profiles.iter().find(|q| !profiles.contains(&q.as_str())) {
                return Err(Invalid::OAuthProfile { subject: p.subject, profile: unknown.clone() });
            }
            if settings.principals.iter().any(|q: &OAuthPrincipal| q.subject == p.subject) {
                return Err(Invalid::OAuthMappedTwice(p.subject));
            }
            settings.principals.push(OAuthPrincipal { subject: p.subject, name: p.name, profiles: p.profiles });
        }
        // The tokens file is read when the gateway starts, and checked against them then.
        settings.check_principals(None).map_err(Invalid::OAuthPrincipals)?;
        Ok(settings)
    }
}
