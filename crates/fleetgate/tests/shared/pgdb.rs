//! A fresh database on the PostgreSQL server `scripts/with-postgres` starts, dropped
//! afterwards; shared by the test binaries that need one (`#[path]`-included). Without the
//! server the test fails, unless FLEETGATE_SKIP_POSTGRES=1 says to skip it, loudly.

use std::process::Command;

#[expect(clippy::disallowed_methods, reason = "the test harness reads where scripts/with-postgres put its server")]
pub fn harness_env(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// A fresh database on the test server, dropped afterwards.
pub struct Db {
    admin: String,
    name: String,
}

impl Db {
    /// A database named `<prefix>_<random>`, or `None` when PostgreSQL is skipped (loudly);
    /// `what` names the test in that message.
    pub fn create(prefix: &str, what: &str) -> Option<Self> {
        let Some(admin) = harness_env("FLEETGATE_TEST_POSTGRES_URL") else {
            if harness_env("FLEETGATE_SKIP_POSTGRES").as_deref() == Some("1") {
                eprintln!("*** PostgreSQL SKIPPED (FLEETGATE_SKIP_POSTGRES=1): {what} did not run ***");
                return None;
            }
            panic!("FLEETGATE_TEST_POSTGRES_URL is unset: run under scripts/with-postgres (scripts/test does)");
        };
        let name = format!("{prefix}_{:016x}", fleetgate_host::nonce() as u64);
        let db = Self { admin, name };
        db.psql(&format!("CREATE DATABASE {}", db.name));
        Some(db)
    }

    fn psql(&self, sql: &str) {
        let psql = harness_env("FLEETGATE_TEST_POSTGRES_BINDIR")
            .map(|d| format!("{d}/psql"))
            .filter(|p| std::path::Path::new(p).exists())
            .unwrap_or_else(|| "psql".into());
        let out = Command::new(psql).arg(&self.admin).args(["-v", "ON_ERROR_STOP=1", "-qc", sql]).output().unwrap();
        assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// The database's URL.
    pub fn url(&self) -> String {
        let base = self.admin.rsplit_once('/').unwrap().0;
        format!("{base}/{}", self.name)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.psql(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
    }
}
