//! The forge's own records — issues, pull requests, reviews, comments — in one JSON file
//! beside the bare repository, guarded by an exclusive lock on `<file>.lock` for the whole of
//! each tool call, so every fixture process serving the same repository (one per gateway)
//! sees one forge. Replaced by rename, never rewritten in place.
//!
//! The file (`version` 1):
//!
//! ```text
//! { "version": 1,
//!   "next_index": 3,                    issues and pull requests share one number sequence
//!   "next_id": 7,                       comments, reviews and review comments share another
//!   "issues": [ { "number", "title", "body", "state": "open"|"closed", "user", "labels": [id],
//!                 "assignees": [login], "milestone": id|null, "ref": branch|null,
//!                 "comments": [ { "id", "body", "user", "created_at", "updated_at" } ],
//!                 "created_at", "updated_at", "closed_at" } ],
//!   "pulls":  [ { "number", "title", "body", "state", "user", "head": branch, "base": branch,
//!                 "head_sha": the head when last seen (the head branch's tip while the PR is
//!                 open; frozen at merge or close), "merged", "merged_at", "merged_by",
//!                 "merge_commit_sha", "labels", "assignees", "reviewers", "comments",
//!                 "reviews": [ { "id", "state": "APPROVED"|"REQUEST_CHANGES"|"COMMENT"|"PENDING",
//!                                "body", "commit_id", "user", "submitted_at", "dismissed",
//!                                "comments": [ { "id", "path", "body", "old_line_num",
//!                                                "new_line_num", "user", "created_at",
//!                                                "reply_to", "resolved_by" } ] } ],
//!                 "created_at", "updated_at", "closed_at",
//!                 "head_repo": the fork the head lives in (`owner/name`, lowercase), absent
//!                 for a head in the PR's own repository,
//!                 "xrefs": [ { "source": 0 (the PR's title and body) or a comment's ID,
//!                              "repo": "owner/name", "index", "action": "none"|"closes"|"reopens" } ]
//!               } ],
//!   "others": { "owner/name": { "next_index", "issues", "pulls" } }
//!                                     the records of the forge's other repositories (forks)
//! }
//! ```
//!
//! Times are UTC, `YYYY-MM-DDTHH:MM:SSZ`. A call on another repository sees that
//! repository's records where the served one's are (`Ledger::focused`), the served one's
//! under `others`.

use fleetgate_core::Clock;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Comment {
    pub id: i64,
    pub body: String,
    pub user: String,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Issue {
    pub number: i64,
    pub title: String,
    pub body: String,
    pub state: String,
    pub user: String,
    pub labels: Vec<i64>,
    pub assignees: Vec<String>,
    pub milestone: Option<i64>,
    #[serde(rename = "ref")]
    pub branch: Option<String>,
    pub comments: Vec<Comment>,
    pub created_at: String,
    pub updated_at: String,
    pub closed_at: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ReviewComment {
    pub id: i64,
    pub path: String,
    pub body: String,
    pub old_line_num: i64,
    pub new_line_num: i64,
    pub user: String,
    pub created_at: String,
    pub reply_to: Option<i64>,
    pub resolved_by: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Review {
    pub id: i64,
    pub state: String,
    pub body: String,
    pub commit_id: String,
    pub user: String,
    pub submitted_at: Option<String>,
    pub dismissed: bool,
    pub comments: Vec<ReviewComment>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Pull {
    pub number: i64,
    pub title: String,
    pub body: String,
    pub state: String,
    pub user: String,
    pub head: String,
    pub base: String,
    pub head_sha: String,
    pub merged: bool,
    pub merged_at: Option<String>,
    pub merged_by: Option<String>,
    pub merge_commit_sha: Option<String>,
    pub labels: Vec<i64>,
    pub assignees: Vec<String>,
    pub reviewers: Vec<String>,
    pub comments: Vec<Comment>,
    pub reviews: Vec<Review>,
    pub created_at: String,
    pub updated_at: String,
    pub closed_at: Option<String>,
    /// The repository (`owner/name`, lowercase) the head branch lives in, when not this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_repo: Option<String>,
    /// The cross-references its title, body and comments make, in the order made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub xrefs: Vec<XRef>,
}

/// A cross-reference a PR's text makes to an issue (Gitea's reference comment).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct XRef {
    /// 0: the PR's title and body; else the comment's ID.
    pub source: i64,
    /// The issue's repository, `owner/name` lowercase.
    pub repo: String,
    /// The issue's number.
    pub index: i64,
    /// `none`, `closes` or `reopens`.
    pub action: String,
}

/// One repository's issues and pull requests.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Records {
    pub next_index: i64,
    pub issues: Vec<Issue>,
    pub pulls: Vec<Pull>,
}

impl Default for Records {
    fn default() -> Self {
        Self { next_index: 1, issues: Vec::new(), pulls: Vec::new() }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct State {
    pub version: u32,
    pub next_index: i64,
    pub next_id: i64,
    pub issues: Vec<Issue>,
    pub pulls: Vec<Pull>,
    /// The other repositories' records, by `owner/name` (lowercase).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub others: std::collections::BTreeMap<String, Records>,
}

impl Default for State {
    fn default() -> Self {
        Self {
            version: 1,
            next_index: 1,
            next_id: 1,
            issues: Vec::new(),
            pulls: Vec::new(),
            others: std::collections::BTreeMap::new(),
        }
    }
}

impl State {
    /// The next issue or pull request number.
    pub fn take_index(&mut self) -> i64 {
        let n = self.next_index;
        self.next_index += 1;
        n
    }

    /// The next comment or review ID.
    pub fn take_id(&mut self) -> i64 {
        let n = self.next_id;
        self.next_id += 1;
        n
    }

    pub fn pull_mut(&mut self, number: i64) -> Option<&mut Pull> {
        self.pulls.iter_mut().find(|p| p.number == number)
    }

    /// Put `slug`'s records where the served repository's are, the served one's (`home`)
    /// under `others`.
    fn focus(&mut self, home: &str, slug: &str) {
        let theirs = self.others.remove(slug).unwrap_or_default();
        let mine = Records {
            next_index: std::mem::replace(&mut self.next_index, theirs.next_index),
            issues: std::mem::replace(&mut self.issues, theirs.issues),
            pulls: std::mem::replace(&mut self.pulls, theirs.pulls),
        };
        self.others.insert(home.to_owned(), mine);
    }

    /// Undo [`focus`](Self::focus).
    fn unfocus(&mut self, home: &str, slug: &str) {
        let home_records = self.others.remove(home).unwrap_or_default();
        let theirs = Records {
            next_index: std::mem::replace(&mut self.next_index, home_records.next_index),
            issues: std::mem::replace(&mut self.issues, home_records.issues),
            pulls: std::mem::replace(&mut self.pulls, home_records.pulls),
        };
        self.others.insert(slug.to_owned(), theirs);
    }

    /// The records of `slug` while `me`'s are in focus.
    pub fn records_mut(&mut self, me: &str, slug: &str) -> Option<(&mut Vec<Issue>, &mut Vec<Pull>)> {
        if slug.eq_ignore_ascii_case(me) {
            return Some((&mut self.issues, &mut self.pulls));
        }
        self.others.get_mut(&slug.to_lowercase()).map(|r| (&mut r.issues, &mut r.pulls))
    }
}

/// The state file and its lock, seen from one repository of the forge.
#[derive(Clone, Debug)]
pub struct Ledger {
    path: PathBuf,
    lock: PathBuf,
    /// The served repository (`owner/name`, lowercase): its records are the top level.
    home: String,
    /// The repository this view's calls are on.
    focus: String,
}

/// The time now, as the records write it.
pub fn now() -> String {
    fleetgate_host::clock::SystemClock.now().to_string()
}

impl Ledger {
    pub fn new(path: &Path) -> Self {
        let mut lock = path.as_os_str().to_owned();
        lock.push(".lock");
        Self { path: path.to_owned(), lock: PathBuf::from(lock), home: String::new(), focus: String::new() }
    }

    /// The same ledger as seen by calls on `focus`, the served repository being `home`.
    #[must_use]
    pub fn focused(&self, home: &str, focus: &str) -> Self {
        Self { home: home.to_lowercase(), focus: focus.to_lowercase(), ..self.clone() }
    }

    /// The whole state as it is now (the served repository's records at the top level),
    /// read under the lock.
    pub fn snapshot(&self) -> Result<State, String> {
        self.unfocused().with(|state| Ok(state.clone()))
    }

    /// The view with the served repository's records at the top level.
    pub fn unfocused(&self) -> Self {
        Self { focus: self.home.clone(), ..self.clone() }
    }

    /// The lock file the whole forge's calls are serialized under (beside the state's).
    pub fn world_lock(&self) -> PathBuf {
        let mut lock = self.path.as_os_str().to_owned();
        lock.push(".world.lock");
        PathBuf::from(lock)
    }

    fn read(&self) -> Result<State, String> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", self.path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
            Err(e) => Err(format!("{}: {e}", self.path.display())),
        }
    }

    fn write(&self, state: &State) -> Result<(), String> {
        let mut tmp = self.path.as_os_str().to_owned();
        tmp.push(format!(".tmp.{}", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let text = serde_json::to_vec_pretty(state).map_err(|e| e.to_string())?;
        std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| format!("{}: {e}", self.path.display()))
    }

    /// Run `f` on the state with the lock held; write the state back when `f` succeeded and
    /// changed it.
    pub fn with<T>(&self, f: impl FnOnce(&mut State) -> Result<T, String>) -> Result<T, String> {
        let lock: File = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock)
            .map_err(|e| format!("{}: {e}", self.lock.display()))?;
        lock.lock().map_err(|e| format!("{}: {e}", self.lock.display()))?;
        let mut state = self.read()?;
        let before = serde_json::to_value(&state).map_err(|e| e.to_string())?;
        let away = self.focus != self.home;
        if away {
            state.focus(&self.home, &self.focus);
        }
        let out = f(&mut state);
        if away {
            state.unfocus(&self.home, &self.focus);
        }
        let out = out?;
        if serde_json::to_value(&state).map_err(|e| e.to_string())? != before {
            self.write(&state)?;
        }
        drop(lock);
        Ok(out)
    }
}
