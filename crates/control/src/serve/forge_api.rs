//! The forge's own API, reached the way the member's server reaches it: the host and the
//! token its launch gives it (the dialect's `Server::host` and `Server::credential`, read from
//! the downstream's command line and environment). Through it the gateway makes the one call
//! it makes itself: a merge the PR workflow judged, pinned at the judged head, where the
//! server's own merge declares no pin (`fleetgate_core::dialect::Dialect::pinned_merge`).
//! The forge refuses a head that moved after the judgement (GitHub: 409), so the race
//! between the judgement and the merge is closed by the forge, not by the gate. It trusts the
//! certificate authorities the server trusts: its launch's `SSL_CERT_FILE` / `SSL_CERT_DIR`,
//! else the system's store (as Go's `crypto/x509` reads them) — an Enterprise Server behind a
//! private CA is reached as the server reaches it.

use fleetgate_core::dialect::{Dialect, RestCall, ToolAnswer};
use std::time::Duration;

/// How long one request to the forge may take, from connect to the last byte.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest answer read from the forge.
const MAX_ANSWER_BYTES: u64 = 1024 * 1024;

/// The member's host and credential for the forge's API.
#[derive(Clone, Default)]
pub struct ForgeApi {
    /// The host the server talks to (`GITHUB_HOST`, `--gh-host`); `None`: its default.
    pub host: Option<String>,
    /// The member's own token, and where it was read (never logged, never audited).
    pub token: Option<(&'static str, String)>,
    /// The launch's `SSL_CERT_FILE` and `SSL_CERT_DIR` (`:`-separated): the CAs its server
    /// trusts instead of the system's.
    pub cert_file: Option<String>,
    /// See [`cert_file`](Self::cert_file).
    pub cert_dirs: Option<String>,
}

impl std::fmt::Debug for ForgeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForgeApi")
            .field("host", &self.host)
            .field("token", &self.token.as_ref().map(|(from, _)| format!("*** (from {from})")))
            .field("cert_file", &self.cert_file)
            .field("cert_dirs", &self.cert_dirs)
            .finish()
    }
}

impl ForgeApi {
    /// What `dialect`'s server launched as `argv` (the downstream's command line, its
    /// program first) with `env` (the environment it is started with) reaches the forge with.
    pub fn of_launch(dialect: &dyn Dialect, argv: &[String], env: &[(String, String)]) -> Self {
        let lookup = |key: &str| env.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        let server = dialect.server();
        let set = |key: &str| lookup(key).filter(|v| !v.is_empty());
        Self {
            host: server.host(argv, &lookup),
            token: server.credential(argv, &lookup),
            cert_file: set("SSL_CERT_FILE"),
            cert_dirs: set("SSL_CERT_DIR"),
        }
    }

    /// The CAs the server trusts: the PEM certificates of the launch's `SSL_CERT_FILE` and of
    /// every file in its `SSL_CERT_DIR`s, else the system's store; the bundled web roots when
    /// neither yields one. Read when a call is made, never at start.
    fn roots(&self) -> ureq::tls::RootCerts {
        let mut found: Vec<ureq::tls::Certificate<'static>> = Vec::new();
        let mut pem = |path: &std::path::Path| {
            let Ok(bytes) = std::fs::read(path) else { return };
            for item in ureq::tls::parse_pem(&bytes) {
                if let Ok(ureq::tls::PemItem::Certificate(cert)) = item {
                    found.push(cert);
                }
            }
        };
        if self.cert_file.is_some() || self.cert_dirs.is_some() {
            if let Some(file) = &self.cert_file {
                pem(std::path::Path::new(file));
            }
            for dir in self.cert_dirs.iter().flat_map(|d| d.split(':')).filter(|d| !d.is_empty()) {
                let entries = std::fs::read_dir(dir).into_iter().flatten().filter_map(Result::ok);
                for entry in entries {
                    pem(&entry.path());
                }
            }
        } else {
            let system = rustls_native_certs::load_native_certs();
            found.extend(system.certs.iter().map(|der| ureq::tls::Certificate::from_der(der.as_ref()).to_owned()));
        }
        if found.is_empty() { ureq::tls::RootCerts::WebPki } else { ureq::tls::RootCerts::new_with_certs(&found) }
    }

    /// Make `call` for `dialect`: the forge's answer made into the server tool's answer, and
    /// what the audit log says of it (the URL and the status; never the token).
    pub fn make(&self, dialect: &dyn Dialect, call: &RestCall) -> (ToolAnswer, String) {
        let failed = |text: String| (ToolAnswer { text: format!("fleetgate: {text}"), is_error: true }, text);
        let base = match dialect.rest_base(self.host.as_deref()) {
            Ok(base) => base,
            Err(why) => return failed(format!("the forge's API cannot be reached ({why}): nothing was done")),
        };
        let Some((_, token)) = &self.token else {
            return failed(format!(
                "the member's server has no forge token ({} in its environment or launch): the pinned merge cannot \
                 be made, and nothing was done",
                dialect.server().token_env
            ));
        };
        let url = format!("{}/{}", base.trim_end_matches('/'), call.path);
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(REQUEST_TIMEOUT))
            .tls_config(ureq::tls::TlsConfig::builder().root_certs(self.roots()).build())
            .max_redirects(0)
            .http_status_as_error(false)
            .build()
            .into();
        let body = call.body.to_string();
        let request = match call.method.as_str() {
            "PUT" => agent.put(&url),
            "POST" => agent.post(&url),
            "PATCH" => agent.patch(&url),
            other => return failed(format!("{other} is no method the gateway makes: nothing was done")),
        };
        let sent = request
            .header("Authorization", &format!("Bearer {token}"))
            .header("Accept", "application/vnd.github+json")
            .header("Content-Type", "application/json")
            .header("User-Agent", concat!("fleetgate/", env!("CARGO_PKG_VERSION")))
            .send(body.as_bytes());
        let mut response = match sent {
            Ok(response) => response,
            Err(e) => {
                let text = format!("{} {url}: {e} (it may or may not have taken effect)", call.method);
                return (ToolAnswer { text: format!("failed to merge pull request: {text}"), is_error: true }, text);
            }
        };
        let status = response.status().as_u16();
        let text = response.body_mut().with_config().limit(MAX_ANSWER_BYTES).read_to_string().unwrap_or_default();
        let answer = dialect.rest_answer(call, &url, status, &text);
        let said = format!("{} {url} answered {status}{}", call.method, if answer.is_error { ": refused" } else { "" });
        (answer, said)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn the_member_s_host_and_token_are_read_as_its_server_reads_them() {
        let github = &fleetgate_core::dialect::github::GITHUB;
        let argv = ["github-mcp-server".to_owned(), "stdio".to_owned()];
        let api = ForgeApi::of_launch(
            github,
            &argv,
            &env(&[("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_x"), ("GITHUB_HOST", "https://ghe.corp")]),
        );
        assert_eq!(api.host.as_deref(), Some("https://ghe.corp"));
        assert_eq!(api.token, Some(("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_x".to_owned())));
        assert!(!format!("{api:?}").contains("ghp_x"), "the token is never shown");
        // A container launch sets them with -e; the flag wins for the host.
        let docker: Vec<String> =
            ["docker", "run", "-i", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN=ghp_y", "ghcr.io/github/github-mcp-server"]
                .iter()
                .map(|s| (*s).to_owned())
                .chain(["stdio".to_owned(), "--gh-host".to_owned(), "https://h".to_owned()])
                .collect();
        let api = ForgeApi::of_launch(github, &docker, &env(&[("GITHUB_HOST", "https://other")]));
        assert_eq!((api.host.as_deref(), api.token.map(|t| t.1)), (Some("https://h"), Some("ghp_y".to_owned())));
    }

    fn merge_call() -> RestCall {
        RestCall {
            tool: "merge_pull_request".into(),
            method: "PUT".into(),
            path: "repos/o/r/pulls/1/merge".into(),
            body: serde_json::json!({ "sha": "a" }),
        }
    }

    /// A forge host that answers the merge with a redirect to another: the redirect is not
    /// followed (the token goes to no other host, and no other host merges), the answer is a
    /// failure, and neither it nor the audit's words hold the token.
    #[test]
    fn a_redirect_is_not_followed_and_the_token_is_never_said() {
        use std::io::{BufRead, BufReader, Write};
        let elsewhere = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let there = elsewhere.local_addr().unwrap();
        let forge = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let here = forge.local_addr().unwrap();
        let answering = std::thread::spawn(move || {
            let (stream, _) = forge.accept().unwrap();
            let mut head = Vec::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap() == 0 || line.trim().is_empty() {
                    break;
                }
                head.push(line);
            }
            let mut out = stream;
            let location = format!("http://{there}/repos/o/r/pulls/1/merge");
            write!(out, "HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n")
                .unwrap();
            head
        });
        let api = ForgeApi {
            host: Some(format!("http://{here}")),
            token: Some(("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_s3cret".into())),
            ..ForgeApi::default()
        };
        let (answer, said) = api.make(&fleetgate_core::dialect::github::GITHUB, &merge_call());
        let head = answering.join().unwrap();
        assert!(head.iter().any(|h| h.trim().eq_ignore_ascii_case("authorization: Bearer ghp_s3cret")), "{head:?}");
        assert!(answer.is_error && answer.text.contains("307"), "{answer:?}");
        assert!(!answer.text.contains("ghp_s3cret") && !said.contains("ghp_s3cret"), "{answer:?} {said}");
        // The redirect's target was never reached: `make` has returned, so a connection it
        // made would be waiting to be accepted.
        elsewhere.set_nonblocking(true).unwrap();
        let reached = elsewhere.accept();
        assert!(reached.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock), "{reached:?}");
    }

    /// A CA and a certificate it signs for 127.0.0.1, made with openssl in `dir`: the CA's
    /// PEM, the server's certificate chain and key.
    fn private_ca(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
        let run = |args: &[&str]| {
            let out = std::process::Command::new("openssl").args(args).current_dir(dir).output().expect("openssl");
            assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
        run(&[
            &["req", "-x509"],
            &ec[..],
            &["-days", "2", "-subj", "/CN=ghes test CA", "-keyout", "ca.key", "-out", "ca.pem"],
        ]
        .concat());
        run(&[&["req", "-new"], &ec[..], &["-subj", "/CN=127.0.0.1", "-keyout", "server.key", "-out", "server.csr"]]
            .concat());
        std::fs::write(dir.join("server.ext"), "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n").unwrap();
        run(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.pem",
        ]);
        (dir.join("ca.pem"), dir.join("server.pem"), dir.join("server.key"))
    }

    /// An Enterprise Server whose certificate a private CA signs, which the member's server
    /// trusts through `SSL_CERT_FILE` (Go reads it, and the gateway passes it to its
    /// downstream): the gateway's merge trusts what its server trusts, and verifies it — a
    /// launch that names no such CA reaches the host and refuses its certificate.
    #[test]
    fn the_merge_trusts_the_cas_the_member_s_server_trusts_and_no_other() {
        use rustls::pki_types::pem::PemObject;
        use std::io::{BufRead, BufReader, Write};
        let dir = tempfile::tempdir().unwrap();
        let (ca, chain, key) = private_ca(dir.path());
        let certs: Vec<_> =
            rustls::pki_types::CertificateDer::pem_file_iter(&chain).unwrap().map(Result::unwrap).collect();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_file(&key).unwrap();
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        let config = std::sync::Arc::new(config);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let host = format!("https://{}", listener.local_addr().unwrap());
        // Two connections: the launch that trusts the CA, then one that does not.
        let serving = std::thread::spawn(move || {
            for _ in 0..2 {
                let (mut tcp, _) = listener.accept().unwrap();
                let mut tls = rustls::ServerConnection::new(config.clone()).unwrap();
                let mut stream = rustls::Stream::new(&mut tls, &mut tcp);
                let mut reader = BufReader::new(&mut stream);
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; length];
                if length == 0 || std::io::Read::read_exact(&mut reader, &mut body).is_err() {
                    continue;
                }
                let answer = r#"{"sha":"m","merged":true,"message":"Pull Request successfully merged"}"#;
                let _ = write!(stream, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{answer}", answer.len());
                let _ = stream.flush();
            }
        });
        let github = &fleetgate_core::dialect::github::GITHUB;
        let argv = ["github-mcp-server".to_owned(), "stdio".to_owned()];
        let launch = |extra: &[(&str, &str)]| {
            let mut pairs = vec![("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_x"), ("GITHUB_HOST", host.as_str())];
            pairs.extend_from_slice(extra);
            ForgeApi::of_launch(github, &argv, &env(&pairs))
        };
        let trusting = launch(&[("SSL_CERT_FILE", ca.to_str().unwrap())]);
        let (answer, said) = trusting.make(github, &merge_call());
        assert!(!answer.is_error, "{answer:?} {said}");
        assert!(said.ends_with("answered 200"), "{said}");
        let (answer, _) = launch(&[]).make(github, &merge_call());
        assert!(answer.is_error && answer.text.contains("certificate"), "{answer:?}");
        serving.join().unwrap();
    }

    #[test]
    fn without_a_token_nothing_is_sent_and_the_answer_says_so() {
        let github = &fleetgate_core::dialect::github::GITHUB;
        let call = merge_call();
        // A host nothing listens on: were anything sent, the answer would name the connection.
        let api = ForgeApi { host: Some("http://127.0.0.1:9".into()), ..ForgeApi::default() };
        let (answer, said) = api.make(github, &call);
        assert!(answer.is_error && said.contains("no forge token"), "{said}");
    }
}
