//! The engines under test: a fresh SQLite file in a temporary directory, or a
//! fresh PostgreSQL database on the server `scripts/with-postgres` started,
//! each dropped when the test ends.
//!
//! PostgreSQL is never skipped silently: without `FLEETGATE_TEST_POSTGRES_URL`
//! its half of every test fails, unless `FLEETGATE_SKIP_POSTGRES=1` says to
//! skip it, and then a line on the terminal says it was skipped.

use fleetgate_store::postgres::PostgresStore;
use fleetgate_store::sqlite::SqliteStore;
use fleetgate_store::{Store, redact_url};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// The one reader of the process environment in this suite.
#[expect(clippy::disallowed_methods, reason = "the test harness's own variables, set by scripts/with-postgres")]
pub fn env(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// Which engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
}

/// Where the PostgreSQL tests run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// Shared by every test.
    Main,
    /// The server the restart test may stop and start.
    Spare,
    /// The server with TLS on, refusing plain TCP; set up through its socket.
    Tls,
}

/// One fresh store location, removed on drop.
pub struct Fixture {
    pub kind: Kind,
    location: Location,
}

enum Location {
    Sqlite { _dir: tempfile::TempDir, path: PathBuf },
    Postgres(PgDatabase),
}

/// Run `story` on a fresh location of `kind`.
pub fn run(kind: Kind, story: fn(&Fixture)) {
    if let Some(fx) = Fixture::fresh(kind) {
        story(&fx);
    }
}

fn postgres_url(server: Server) -> Option<String> {
    let key = match server {
        Server::Main => "FLEETGATE_TEST_POSTGRES_URL",
        Server::Spare => "FLEETGATE_TEST_POSTGRES_RESTART_URL",
        Server::Tls => "FLEETGATE_TEST_POSTGRES_TLS_ADMIN_URL",
    };
    if let Some(url) = env(key) {
        return Some(url);
    }
    if env("FLEETGATE_SKIP_POSTGRES").as_deref() == Some("1") {
        // Straight to the terminal: the test harness captures `eprintln!` of
        // passing tests, and this line must be seen.
        let test = std::thread::current().name().unwrap_or("this test").to_owned();
        let _ =
            writeln!(std::io::stderr(), "\n*** PostgreSQL SKIPPED (FLEETGATE_SKIP_POSTGRES=1): {test} did not run ***");
        return None;
    }
    panic!(
        "{key} is unset: run the suite under scripts/with-postgres \
         (scripts/with-postgres cargo test -p fleetgate-store), or set FLEETGATE_SKIP_POSTGRES=1 to skip \
         PostgreSQL explicitly"
    );
}

impl Fixture {
    /// A fresh location, or `None` when PostgreSQL is explicitly skipped.
    pub fn fresh(kind: Kind) -> Option<Self> {
        match kind {
            Kind::Sqlite => {
                let dir = tempfile::tempdir().expect("tempdir");
                let path = dir.path().join("registry.sqlite3");
                Some(Self { kind, location: Location::Sqlite { _dir: dir, path } })
            }
            Kind::Postgres => Self::fresh_on(Server::Main),
        }
    }

    /// A fresh PostgreSQL database on `server`.
    pub fn fresh_on(server: Server) -> Option<Self> {
        let admin = postgres_url(server)?;
        Some(Self { kind: Kind::Postgres, location: Location::Postgres(PgDatabase::create(&admin)) })
    }

    /// Another fresh location of the same kind (and server).
    pub fn sibling(&self) -> Self {
        match &self.location {
            Location::Sqlite { .. } => Self::fresh(Kind::Sqlite).expect("sqlite"),
            Location::Postgres(db) => {
                Self { kind: Kind::Postgres, location: Location::Postgres(PgDatabase::create(&db.admin_url)) }
            }
        }
    }

    /// What `fleetgate_store::open` is given: a path or a URL.
    pub fn spec(&self) -> String {
        match &self.location {
            Location::Sqlite { path, .. } => path.display().to_string(),
            Location::Postgres(db) => db.url.clone(),
        }
    }

    /// The password in the spec, if any: it must appear in no message.
    pub fn password(&self) -> Option<String> {
        let spec = self.spec();
        let authority = spec.split_once("://")?.1.split('/').next()?;
        let userinfo = authority.rsplit_once('@')?.0;
        Some(userinfo.split_once(':')?.1.to_owned())
    }

    /// Open through the engine selection every caller uses.
    pub fn open(&self) -> Arc<dyn Store> {
        fleetgate_store::open(&self.spec()).unwrap_or_else(|e| panic!("open {}: {e}", redact_url(&self.spec())))
    }

    /// Open with only the first `version` migrations applied.
    pub fn open_at_version(&self, version: u32) -> Box<dyn Store> {
        match &self.location {
            Location::Sqlite { path, .. } => {
                Box::new(SqliteStore::open_at_version(path, version).expect("open sqlite"))
            }
            Location::Postgres(db) => {
                Box::new(PostgresStore::open_at_version(&db.url, version).expect("open postgres"))
            }
        }
    }

    /// Run raw SQL on the database, under the contract: for the tests that
    /// must damage or age a store on purpose.
    pub fn exec(&self, sql: &str) {
        match &self.location {
            Location::Sqlite { path, .. } => {
                rusqlite::Connection::open(path).and_then(|c| c.execute_batch(sql)).expect("raw sqlite")
            }
            Location::Postgres(db) => {
                db.client().batch_execute(sql).unwrap_or_else(|e| panic!("raw postgres {sql}: {e:?}"))
            }
        }
    }

    /// One integer from raw SQL (`SELECT COUNT(*) …`).
    pub fn query_i64(&self, sql: &str) -> i64 {
        match &self.location {
            Location::Sqlite { path, .. } => {
                rusqlite::Connection::open(path).and_then(|c| c.query_row(sql, [], |r| r.get(0))).expect("raw sqlite")
            }
            Location::Postgres(db) => db.client().query_one(sql, &[]).expect("raw postgres").get(0),
        }
    }

    /// The PostgreSQL database, for the tests that reach its server.
    pub fn database(&self) -> Option<&PgDatabase> {
        match &self.location {
            Location::Postgres(db) => Some(db),
            Location::Sqlite { .. } => None,
        }
    }
}

/// A database `fg_test_<random>` created for one test and dropped with it.
/// Created with an ICU `en` collation, not `C`: the engine must order its
/// listings by bytes itself, as SQLite does, whatever the database's locale.
pub struct PgDatabase {
    admin_url: String,
    pub name: String,
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
    fn create(admin_url: &str) -> Self {
        let name = format!("fg_test_{:016x}", fastrand::u64(..));
        let mut admin = ::postgres::Client::connect(admin_url, ::postgres::NoTls)
            .unwrap_or_else(|e| panic!("cannot reach the test server {}: {e:?}", redact_url(admin_url)));
        admin
            .batch_execute(&format!(
                "CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER icu ICU_LOCALE 'en'"
            ))
            .unwrap_or_else(|e| panic!("cannot create test database {name}: {e:?}"));
        Self { admin_url: admin_url.to_owned(), url: with_database(admin_url, &name), name }
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

#[test]
fn database_urls_keep_authority_and_query() {
    assert_eq!(with_database("postgres://u:p@h:1/postgres", "fg_x"), "postgres://u:p@h:1/fg_x");
    assert_eq!(with_database("postgres://u@h/postgres?sslmode=disable", "fg_x"), "postgres://u@h/fg_x?sslmode=disable");
    assert_eq!(with_database("postgresql://h:5", "fg_x"), "postgresql://h:5/fg_x");
}
