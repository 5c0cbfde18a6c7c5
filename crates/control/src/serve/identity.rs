//! Who this gateway process is, fixed at start and built from values: the shell (the
//! `serve` command) reads its pid, start id, parent, checkout HEAD and hands them in.

use fleetgate_config::Member;
use fleetgate_core::runtime::{Binding, Cohort, ProcessStamp, runtime_id};
use std::path::PathBuf;

/// Who this process is, fixed at start.
#[derive(Clone, Debug)]
pub struct Identity {
    /// The roster member served.
    pub member: Member,
    /// This process.
    pub pid: i64,
    /// This process's start id, fresh per start (the runtime row's `boot_id`).
    pub boot_id: String,
    /// `namespace:pid:boot_id`.
    pub runtime_id: String,
    /// The client process family.
    pub cohort: Cohort,
    /// The checkout this member works in.
    pub repo_root: Option<PathBuf>,
    /// Its HEAD when this process started.
    pub startup_head: Option<String>,
    /// The repository binding this process declares.
    pub binding: Option<Binding>,
    /// This process as its `/proc` entry names it (pid in its namespace, that namespace, its
    /// start), which its proof is tied to; `None` when it could not be read (no proof is
    /// published then).
    pub stamp: Option<ProcessStamp>,
}

impl Identity {
    /// The identity of `member` served by process `pid`, started as `boot_id`.
    pub fn new(
        member: Member,
        pid: i64,
        boot_id: String,
        cohort: Cohort,
        repo: (Option<PathBuf>, Option<String>),
        binding: Option<Binding>,
    ) -> Self {
        let (repo_root, startup_head) = repo;
        Self {
            runtime_id: runtime_id(&member.namespace, pid, &boot_id),
            member,
            pid,
            boot_id,
            cohort,
            repo_root,
            startup_head,
            binding,
            stamp: None,
        }
    }

    /// The same, its process stamped (read by the shell from `/proc/self`).
    #[must_use]
    pub fn with_stamp(mut self, stamp: Option<ProcessStamp>) -> Self {
        self.stamp = stamp;
        self
    }

    /// The generation every worker of this process registers and renews as.
    pub fn generation(&self) -> String {
        format!("gen-{}", self.boot_id)
    }
}
