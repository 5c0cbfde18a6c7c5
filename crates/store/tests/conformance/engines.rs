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
pub use fleetgate_testkit::pg::{PgDatabase, with_database};
use std::path::PathBuf;
use std::sync::Arc;

/// The one reader of the process environment in this suite.
pub fn env(key: &str) -> Option<String> {
    fleetgate_testkit::pg::harness_env(key)
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
    fleetgate_testkit::pg::admin_url(match server {
        Server::Main => "FLEETGATE_TEST_POSTGRES_URL",
        Server::Spare => "FLEETGATE_TEST_POSTGRES_RESTART_URL",
        Server::Tls => "FLEETGATE_TEST_POSTGRES_TLS_ADMIN_URL",
    })
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
        Some(Self { kind: Kind::Postgres, location: Location::Postgres(PgDatabase::create(&admin, "fg_test")) })
    }

    /// Another fresh location of the same kind (and server).
    pub fn sibling(&self) -> Self {
        match &self.location {
            Location::Sqlite { .. } => Self::fresh(Kind::Sqlite).expect("sqlite"),
            Location::Postgres(db) => {
                Self { kind: Kind::Postgres, location: Location::Postgres(db.sibling("fg_test")) }
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

    /// The whole database as SQL text that rebuilds it on an empty one of the same engine:
    /// its tables, indexes and rows (SQLite: read through `sqlite_master`; PostgreSQL:
    /// `pg_dump --inserts`, no owner or privileges).
    pub fn dump(&self) -> String {
        match &self.location {
            Location::Sqlite { path, .. } => sqlite_dump(path),
            Location::Postgres(db) => {
                let out = std::process::Command::new("pg_dump")
                    .args(["--inserts", "--no-owner", "--no-privileges", "--no-comments", "--dbname"])
                    .arg(&db.url)
                    .output()
                    .expect("pg_dump (Debian's postgresql-client)");
                assert!(out.status.success(), "pg_dump: {}", String::from_utf8_lossy(&out.stderr));
                // Lines naming the dumping tools' versions change nothing here; psql's
                // meta-commands (`\restrict`) are psql's, not SQL.
                String::from_utf8(out.stdout)
                    .unwrap()
                    .lines()
                    .filter(|l| !l.starts_with("-- Dumped") && !l.starts_with('\\'))
                    .map(|l| format!("{l}\n"))
                    .collect()
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

    /// How the engine would run the query `sql` (its plan, as text; PostgreSQL told to avoid
    /// a sequential scan where it has any other way, so a tiny table still shows the index).
    pub fn plan(&self, sql: &str) -> String {
        match &self.location {
            Location::Sqlite { path, .. } => {
                let c = rusqlite::Connection::open(path).expect("raw sqlite");
                let mut q = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).expect("a plan");
                let rows = q.query_map([], |r| r.get::<_, String>(3)).expect("a plan");
                rows.map(|r| r.unwrap()).collect::<Vec<_>>().join("\n")
            }
            Location::Postgres(db) => {
                let mut c = db.client();
                c.batch_execute("SET enable_seqscan = off").expect("raw postgres");
                let rows = c.query(&format!("EXPLAIN {sql}"), &[]).expect("a plan");
                rows.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>().join("\n")
            }
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

/// A SQLite database as SQL text: each table's and index's own `CREATE` statement, then every
/// row as an `INSERT` (SQLite's internal tables aside).
fn sqlite_dump(path: &std::path::Path) -> String {
    use rusqlite::types::ValueRef;
    let c = rusqlite::Connection::open(path).expect("open sqlite");
    let mut out = String::from("BEGIN;\n");
    let mut objects = c
        .prepare("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY type DESC, name")
        .unwrap();
    let objects: Vec<(String, String, String)> =
        objects.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect();
    for (kind, name, sql) in &objects {
        out.push_str(&format!("{sql};\n"));
        if kind != "table" {
            continue;
        }
        let mut rows = c.prepare(&format!("SELECT * FROM \"{name}\"")).unwrap();
        let width = rows.column_count();
        let mut rows = rows.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            let values: Vec<String> = (0..width)
                .map(|i| match row.get_ref(i).unwrap() {
                    ValueRef::Null => "NULL".to_owned(),
                    ValueRef::Integer(n) => n.to_string(),
                    ValueRef::Real(x) => format!("{x:?}"),
                    ValueRef::Text(t) => format!("'{}'", String::from_utf8_lossy(t).replace('\'', "''")),
                    ValueRef::Blob(b) => format!("X'{}'", b.iter().map(|x| format!("{x:02x}")).collect::<String>()),
                })
                .collect();
            out.push_str(&format!("INSERT INTO \"{name}\" VALUES ({});\n", values.join(", ")));
        }
    }
    out.push_str("COMMIT;\n");
    out
}
