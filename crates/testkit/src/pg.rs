//! A fresh database on a PostgreSQL server `scripts/with-postgres` started, dropped when
//! the test ends: the one helper every PostgreSQL test uses (the store's conformance
//! suite and the binary's tests).
//!
//! PostgreSQL is never skipped silently. Without the server's URL a test fails, unless
//! `FLEETGATE_SKIP_POSTGRES=1` says to skip it, and then a line straight on the terminal
//! says so. Under `CI=true` nothing is skipped: a run in CI that cannot reach its server
//! fails.

use std::io::Write;

/// The one reader of the process environment in the test kit: the harness's own
/// variables (set by `scripts/with-postgres` and CI), never fleetgate's.
#[expect(clippy::disallowed_methods, reason = "the test harness's own variables, set by scripts/with-postgres")]
pub fn harness_env(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// The administrative URL in `key` (`FLEETGATE_TEST_POSTGRES_URL`, …), or `None` when
/// PostgreSQL is explicitly skipped (said on the terminal). Panics when it is unset and
/// not skipped, or skipped under `CI=true`.
pub fn admin_url(key: &str) -> Option<String> {
    if let Some(url) = harness_env(key) {
        return Some(url);
    }
    if harness_env("FLEETGATE_SKIP_POSTGRES").as_deref() == Some("1") {
        assert!(
            harness_env("CI").as_deref() != Some("true"),
            "{key} is unset and FLEETGATE_SKIP_POSTGRES=1, but CI=true: a CI run never skips PostgreSQL"
        );
        // Straight to the terminal: the harness captures `eprintln!` of passing tests, and
        // this line must be seen.
        let test = std::thread::current().name().unwrap_or("this test").to_owned();
        let _ =
            writeln!(std::io::stderr(), "\n*** PostgreSQL SKIPPED (FLEETGATE_SKIP_POSTGRES=1): {test} did not run ***");
        return None;
    }
    panic!(
        "{key} is unset: run the tests under scripts/with-postgres (scripts/test does), or set \
         FLEETGATE_SKIP_POSTGRES=1 to skip PostgreSQL explicitly"
    );
}

/// `url` as a message may show it (a password masked).
fn shown(url: &str) -> String {
    fleetgate_core::redact::redact_url_userinfo(url).unwrap_or_else(|| url.to_owned())
}

/// A database `<prefix>_<random>` created for one test and dropped with it. Created with an
/// ICU `en` collation, not `C`: the engine must order its listings by bytes itself, as
/// SQLite does, whatever the database's locale.
#[derive(Debug)]
pub struct PgDatabase {
    admin_url: String,
    /// The database's name.
    pub name: String,
    /// Its URL.
    pub url: String,
}

/// `url` with its database replaced by `db` (any query string kept).
pub fn with_database(url: &str, db: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let (scheme, rest) = base.split_once("://").expect("a postgres:// URL");
    let authority = rest.split('/').next().unwrap_or(rest);
    let query = query.map_or_else(String::new, |q| format!("?{q}"));
    format!("{scheme}://{authority}/{db}{query}")
}

impl PgDatabase {
    /// A fresh database on the main test server (`FLEETGATE_TEST_POSTGRES_URL`), or `None`
    /// when PostgreSQL is explicitly skipped.
    pub fn fresh(prefix: &str) -> Option<Self> {
        Some(Self::create(&admin_url("FLEETGATE_TEST_POSTGRES_URL")?, prefix))
    }

    /// A fresh database on the server at `admin_url`. Panics when the server cannot be
    /// reached: a test that cannot reach its server fails.
    pub fn create(admin_url: &str, prefix: &str) -> Self {
        let name = format!("{prefix}_{:016x}", fastrand::u64(..));
        let mut admin = ::postgres::Client::connect(admin_url, ::postgres::NoTls)
            .unwrap_or_else(|e| panic!("cannot reach the test server {}: {e:?}", shown(admin_url)));
        admin
            .batch_execute(&format!(
                "CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER icu ICU_LOCALE 'en'"
            ))
            .unwrap_or_else(|e| panic!("cannot create test database {name}: {e:?}"));
        Self { admin_url: admin_url.to_owned(), url: with_database(admin_url, &name), name }
    }

    /// Another fresh database on the same server.
    pub fn sibling(&self, prefix: &str) -> Self {
        Self::create(&self.admin_url, prefix)
    }

    /// A plain client on this database.
    pub fn client(&self) -> ::postgres::Client {
        ::postgres::Client::connect(&self.url, ::postgres::NoTls).expect("connect to the test database")
    }

    /// A plain client on the server's administrative database.
    pub fn admin(&self) -> ::postgres::Client {
        ::postgres::Client::connect(&self.admin_url, ::postgres::NoTls).expect("connect to the test server")
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        // Never panic here (a failing test is already unwinding): say so.
        let dropped = ::postgres::Client::connect(&self.admin_url, ::postgres::NoTls)
            .and_then(|mut admin| admin.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name)));
        if let Err(e) = dropped {
            let _ = writeln!(std::io::stderr(), "warning: test database {} was not dropped: {e}", self.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_urls_keep_authority_and_query() {
        assert_eq!(with_database("postgres://u:p@h:1/postgres", "fg_x"), "postgres://u:p@h:1/fg_x");
        assert_eq!(
            with_database("postgres://u@h/postgres?sslmode=disable", "fg_x"),
            "postgres://u@h/fg_x?sslmode=disable"
        );
        assert_eq!(with_database("postgresql://h:5", "fg_x"), "postgresql://h:5/fg_x");
    }
}
