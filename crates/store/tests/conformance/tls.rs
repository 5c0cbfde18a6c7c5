//! TLS to PostgreSQL (no SQLite counterpart), against the server
//! `scripts/with-postgres` starts with `ssl=on`, a certificate for IP
//! 127.0.0.1 signed by a CA made for this run, and a `pg_hba.conf` that
//! refuses plain TCP. Each test opens a fresh database over TCP with the
//! `sslmode` under test, and asks the server (through its socket) whether the
//! store's own connection is encrypted.

use crate::engines::{Fixture, Kind, Server, env, with_database};
use crate::support::attach;
use fleetgate_store::{Store, StoreError, StoreErrorKind};
use std::sync::Arc;

struct TlsServer {
    fx: Fixture,
    /// The fresh database over TCP, no query string.
    url: String,
}

fn var(key: &str) -> String {
    env(key).unwrap_or_else(|| panic!("{key} is unset: run the suite under scripts/with-postgres"))
}

impl TlsServer {
    fn fresh() -> Option<Self> {
        let fx = Fixture::fresh_on(Server::Tls)?;
        let name = fx.database().expect("postgres").name.clone();
        Some(Self { url: with_database(&var("FLEETGATE_TEST_POSTGRES_TLS_URL"), &name), fx })
    }

    fn open(&self, query: &str) -> Result<Arc<dyn Store>, StoreError> {
        fleetgate_store::open(&format!("{}?{query}", self.url))
    }

    fn password(&self) -> String {
        let authority = self.url.split_once("://").unwrap().1.split('/').next().unwrap();
        authority.rsplit_once('@').unwrap().0.split_once(':').unwrap().1.to_owned()
    }

    /// `pg_stat_ssl.ssl` of each connection the store holds to its database.
    fn store_connections_encrypted(&self) -> Vec<bool> {
        let db = self.fx.database().expect("postgres");
        db.admin()
            .query(
                "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
                 WHERE a.datname = $1 AND a.application_name = 'fleetgate'",
                &[&db.name],
            )
            .expect("pg_stat_ssl")
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    /// Open with `query`, work through the store, and see its connection encrypted.
    fn assert_encrypted(&self, query: &str) {
        let store = self.open(query).unwrap_or_else(|e| panic!("{query}: {e}"));
        attach(&*store, "w-tls");
        assert_eq!(store.get_worker("w-tls").unwrap().unwrap().ids.worker_identity, "w-tls");
        assert_eq!(self.store_connections_encrypted(), vec![true], "{query}");
    }

    /// Open with `query` and expect a refusal of `kind` whose text says `says`,
    /// names the store and holds no password.
    fn assert_refused(&self, query: &str, kind: StoreErrorKind, says: &str) {
        let err = self.open(query).err().unwrap_or_else(|| panic!("{query} connected"));
        let text = err.to_string();
        assert_eq!(err.kind(), kind, "{query}: {text}");
        assert!(!err.is_transient(), "a refusal is not retried as an outage: {text}");
        assert!(text.contains(says), "{query}: {text}");
        assert!(text.contains("fleetgate:***@"), "names the store, password redacted: {text}");
        assert!(!text.contains(&self.password()), "{text}");
        assert!(self.store_connections_encrypted().is_empty(), "no connection is left behind");
    }
}

pub fn prefer_is_the_default_and_encrypts() {
    let Some(server) = TlsServer::fresh() else { return };
    server.assert_encrypted("connect_timeout=10");
}

pub fn require_encrypts() {
    let Some(server) = TlsServer::fresh() else { return };
    // The certificate is checked by nothing here: no root is given or needed.
    server.assert_encrypted("sslmode=require");
}

pub fn verify_full_with_the_right_ca_connects() {
    let Some(server) = TlsServer::fresh() else { return };
    let ca = var("FLEETGATE_TEST_POSTGRES_TLS_CA");
    server.assert_encrypted(&format!("sslmode=verify-full&sslrootcert={ca}"));
}

pub fn verify_full_refuses_another_ca() {
    let Some(server) = TlsServer::fresh() else { return };
    let other = var("FLEETGATE_TEST_POSTGRES_TLS_OTHER_CA");
    for mode in ["verify-full", "verify-ca", "require"] {
        // `require` with a root file checks the chain, as libpq's does.
        server.assert_refused(
            &format!("sslmode={mode}&sslrootcert={other}"),
            StoreErrorKind::Permission,
            "invalid peer certificate: UnknownIssuer",
        );
    }
}

pub fn verify_full_refuses_a_wrong_host_name() {
    let Some(server) = TlsServer::fresh() else { return };
    let ca = var("FLEETGATE_TEST_POSTGRES_TLS_CA");
    // The same server, by a name its certificate does not carry.
    let by_name = TlsServer { url: server.url.replace("@127.0.0.1:", "@localhost:"), fx: server.fx };
    assert_ne!(by_name.url, var("FLEETGATE_TEST_POSTGRES_TLS_URL"));
    by_name.assert_refused(
        &format!("sslmode=verify-full&sslrootcert={ca}&hostaddr=127.0.0.1"),
        StoreErrorKind::Permission,
        "certificate not valid for name \"localhost\"",
    );
    // verify-ca checks the chain only: the same name passes.
    by_name.assert_encrypted(&format!("sslmode=verify-ca&sslrootcert={ca}&hostaddr=127.0.0.1"));
}

pub fn require_is_refused_by_a_server_without_tls() {
    // The main server has ssl off: `prefer` falls back to plain TCP there (the
    // rest of the suite runs so), `require` does not.
    let Some(plain) = Fixture::fresh(Kind::Postgres) else { return };
    let url = format!("{}?sslmode=require", plain.spec());
    let Err(err) = fleetgate_store::open(&url) else { panic!("require connected to a server without TLS") };
    let text = err.to_string();
    assert_eq!(err.kind(), StoreErrorKind::Unsupported, "{text}");
    assert!(!err.is_transient());
    assert!(text.contains("server does not support TLS") && text.contains("sslmode=require"), "{text}");
    assert!(!text.contains(&plain.password().expect("a password")), "{text}");
}

pub fn disable_is_refused_by_an_ssl_only_server() {
    let Some(server) = TlsServer::fresh() else { return };
    server.assert_refused("sslmode=disable", StoreErrorKind::Permission, "no encryption");
}
