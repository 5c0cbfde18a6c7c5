//! TLS to the server, with rustls: libpq's `sslmode` values and what each one
//! checks of the server's certificate.
//!
//! * `disable`: plain TCP, never TLS.
//! * `prefer` (libpq's default and ours): TLS when the server offers it, the
//!   certificate unchecked; plain TCP when it does not.
//! * `require`: TLS or no connection; the certificate unchecked (libpq: with
//!   an `sslrootcert` given, `require` checks the chain as `verify-ca` does).
//! * `verify-ca`: TLS, and the certificate must chain to a trusted root.
//! * `verify-full`: `verify-ca`, and the certificate must name the host the
//!   URL connects to (a DNS name or an IP address).
//!
//! The trusted roots are the certificates of the `sslrootcert` file (PEM), or
//! the system's (`sslrootcert=system`, or no `sslrootcert` at all).

use crate::{StoreError, StoreErrorKind};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's `sslmode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    /// Never TLS.
    Disable,
    /// TLS when offered, unchecked.
    Prefer,
    /// TLS always, unchecked.
    Require,
    /// TLS always, the chain checked.
    VerifyCa,
    /// TLS always, the chain and the host name checked.
    VerifyFull,
}

impl SslMode {
    /// The mode `value` names, or an `Invalid` error naming the value and the choices.
    pub fn parse(value: &str) -> Result<Self, StoreError> {
        match value {
            "disable" => Ok(Self::Disable),
            "prefer" => Ok(Self::Prefer),
            "require" => Ok(Self::Require),
            "verify-ca" => Ok(Self::VerifyCa),
            "verify-full" => Ok(Self::VerifyFull),
            "allow" => Err(StoreError::new(
                StoreErrorKind::Unsupported,
                "sslmode=allow (plain first, TLS on refusal) is not supported: use disable, prefer, require, \
                 verify-ca or verify-full",
            )),
            other => Err(StoreError::new(
                StoreErrorKind::Invalid,
                format!(
                    "invalid sslmode {:?} in the store URL: use disable, prefer, require, verify-ca or verify-full",
                    super::config::shown_value(other)
                ),
            )),
        }
    }

    /// The spelling in a URL.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }
}

/// Where the trusted roots come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Roots {
    /// The system's store.
    System,
    /// A PEM file of CA certificates.
    File(PathBuf),
}

/// What the URL asks of TLS: pure data, read from the URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSettings {
    /// The mode as written (default `prefer`).
    pub mode: SslMode,
    /// `sslrootcert`, if given.
    pub root_cert: Option<Roots>,
}

/// What is checked of the server's certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Nothing: TLS only keeps the traffic private from a passive listener.
    Nothing,
    /// The chain, to a trusted root.
    Chain,
    /// The chain and the host name.
    ChainAndName,
}

impl TlsSettings {
    /// What the certificate must pass, libpq's way: `require` with an explicit
    /// `sslrootcert` checks the chain, as `verify-ca` does.
    pub fn check(&self) -> Check {
        match self.mode {
            SslMode::Disable | SslMode::Prefer => Check::Nothing,
            SslMode::Require if matches!(self.root_cert, Some(Roots::File(_))) => Check::Chain,
            SslMode::Require => Check::Nothing,
            SslMode::VerifyCa => Check::Chain,
            SslMode::VerifyFull => Check::ChainAndName,
        }
    }

    /// The connector for these settings, or `None` for `disable`. Reads the
    /// roots (the file, or the system's) when the certificate is checked; an
    /// unreadable file, or one with no certificate, is an `Invalid` error naming it.
    pub fn connector(&self) -> Result<Option<MakeRustlsConnect>, StoreError> {
        if self.mode == SslMode::Disable {
            return Ok(None);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let check = self.check();
        let webpki = match check {
            Check::Nothing => None,
            Check::Chain | Check::ChainAndName => Some(
                WebPkiServerVerifier::builder_with_provider(Arc::new(self.load_roots()?), Arc::clone(&provider))
                    .build()
                    .map_err(|e| invalid(format!("cannot use the trusted roots of the store URL: {e}")))?,
            ),
        };
        let verifier = Arc::new(Verifier { check, webpki, algorithms: provider.signature_verification_algorithms });
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("cannot set up TLS: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(Some(MakeRustlsConnect::new(config)))
    }

    fn load_roots(&self) -> Result<RootCertStore, StoreError> {
        let mut roots = RootCertStore::empty();
        match &self.root_cert {
            Some(Roots::File(path)) => {
                let shown = path.display();
                let bytes = std::fs::read(path)
                    .map_err(|e| invalid(format!("cannot read the sslrootcert file {shown}: {e}")))?;
                let certs = CertificateDer::pem_slice_iter(&bytes)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| invalid(format!("the sslrootcert file {shown} is not PEM: {e}")))?;
                let (added, _) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(invalid(format!("the sslrootcert file {shown} holds no usable CA certificate")));
                }
            }
            None | Some(Roots::System) => {
                let found = rustls_native_certs::load_native_certs();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    let why = found.errors.first().map_or_else(|| "none found".to_owned(), ToString::to_string);
                    return Err(invalid(format!(
                        "sslmode={} needs trusted roots and the system has none ({why}): give sslrootcert=PATH",
                        self.mode.as_str()
                    )));
                }
            }
        }
        Ok(roots)
    }
}

fn invalid(message: String) -> StoreError {
    StoreError::new(StoreErrorKind::Invalid, message)
}

/// The server's certificate checked as `check` says. Whatever the check, the
/// handshake's own signatures are verified against the certificate presented.
#[derive(Debug)]
struct Verifier {
    check: Check,
    /// The chain's verifier (and the name's), unless nothing is checked.
    webpki: Option<Arc<WebPkiServerVerifier>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(webpki) = &self.webpki else { return Ok(ServerCertVerified::assertion()) };
        match webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            // verify-ca: a certificate for another name passes.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if self.check == Check::Chain => Ok(ServerCertVerified::assertion()),
            verdict => verdict,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(mode: SslMode, root_cert: Option<Roots>) -> TlsSettings {
        TlsSettings { mode, root_cert }
    }

    #[test]
    fn each_mode_checks_what_libpq_documents() {
        let file = || Some(Roots::File("/ca.pem".into()));
        assert_eq!(settings(SslMode::Disable, None).check(), Check::Nothing);
        assert_eq!(settings(SslMode::Prefer, file()).check(), Check::Nothing);
        assert_eq!(settings(SslMode::Require, None).check(), Check::Nothing);
        assert_eq!(settings(SslMode::Require, Some(Roots::System)).check(), Check::Nothing);
        assert_eq!(
            settings(SslMode::Require, file()).check(),
            Check::Chain,
            "libpq: a root file makes require verify-ca"
        );
        assert_eq!(settings(SslMode::VerifyCa, None).check(), Check::Chain);
        assert_eq!(settings(SslMode::VerifyFull, file()).check(), Check::ChainAndName);
    }

    #[test]
    fn modes_round_trip_and_bad_ones_are_named() {
        for m in [SslMode::Disable, SslMode::Prefer, SslMode::Require, SslMode::VerifyCa, SslMode::VerifyFull] {
            assert_eq!(SslMode::parse(m.as_str()).unwrap(), m);
        }
        let err = SslMode::parse("verify_full").unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Invalid);
        assert!(err.to_string().contains("\"verify_full\"") && err.to_string().contains("verify-full"), "{err}");
        assert_eq!(SslMode::parse("allow").unwrap_err().kind(), StoreErrorKind::Unsupported);
    }

    #[test]
    fn disable_needs_no_connector_and_the_unchecked_modes_read_no_roots() {
        assert!(settings(SslMode::Disable, None).connector().unwrap().is_none());
        // No file is read when nothing is checked: a missing one does not matter.
        assert!(
            settings(SslMode::Prefer, Some(Roots::File("/nonexistent/ca.pem".into()))).connector().unwrap().is_some()
        );
    }

    #[test]
    fn an_unreadable_or_empty_root_file_is_named() {
        let err =
            settings(SslMode::VerifyFull, Some(Roots::File("/nonexistent/ca.pem".into()))).connector().err().unwrap();
        assert_eq!(err.kind(), StoreErrorKind::Invalid);
        assert!(err.to_string().contains("cannot read the sslrootcert file /nonexistent/ca.pem"), "{err}");

        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = settings(SslMode::VerifyCa, Some(Roots::File(empty.clone()))).connector().err().unwrap();
        assert_eq!(err.kind(), StoreErrorKind::Invalid);
        assert!(err.to_string().contains(&format!("{} holds no usable CA certificate", empty.display())), "{err}");
    }
}
