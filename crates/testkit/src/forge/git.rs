//! Git plumbing on the bare repository, through the `git` binary: refs, blobs, trees made in
//! a throwaway index, commits, `merge-tree --write-tree` merges. Nothing here touches a work
//! tree: there is none.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The all-zero object name: as the old value of `update-ref`, "must not exist yet".
const ABSENT: &str = "0000000000000000000000000000000000000000";

/// One commit as a log line.
#[derive(Debug)]
pub struct CommitInfo {
    pub sha: String,
    pub author_name: String,
    pub author_email: String,
    pub date: String,
    pub message: String,
}

/// The bare repository, and who commits in it.
#[derive(Clone, Debug)]
pub struct Git {
    dir: PathBuf,
    pub user: String,
}

impl Git {
    pub fn new(dir: &Path, user: &str) -> Self {
        Self { dir: dir.to_owned(), user: user.to_owned() }
    }

    fn command(&self) -> Command {
        let email = format!("{}@forge.invalid", self.user);
        let mut c = Command::new("git");
        c.arg("--git-dir")
            .arg(&self.dir)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .env("GIT_AUTHOR_NAME", &self.user)
            .env("GIT_AUTHOR_EMAIL", &email)
            .env("GIT_COMMITTER_NAME", &self.user)
            .env("GIT_COMMITTER_EMAIL", &email)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null());
        c
    }

    /// Run `git ARGS` (stdin: `input`, extra environment: `env`): its status and its
    /// stdout, stderr on failure.
    fn exec(
        &self,
        args: &[&str],
        input: Option<&[u8]>,
        env: &[(&str, &Path)],
    ) -> Result<(bool, Vec<u8>, String), String> {
        let mut c = self.command();
        c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        for (k, v) in env {
            c.env(k, v);
        }
        if input.is_some() {
            c.stdin(Stdio::piped());
        }
        let mut child = c.spawn().map_err(|e| format!("git {}: {e}", args.join(" ")))?;
        if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin.write_all(bytes).map_err(|e| format!("git {}: {e}", args.join(" ")))?;
        }
        let out = child.wait_with_output().map_err(|e| format!("git {}: {e}", args.join(" ")))?;
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        if !out.status.success() && out.status.code() != Some(1) {
            return Err(format!("git {}: {stderr}", args.join(" ")));
        }
        Ok((out.status.success(), out.stdout, stderr))
    }

    /// `git ARGS`, which must succeed: its stdout, trimmed.
    fn run(&self, args: &[&str]) -> Result<String, String> {
        self.run_with(args, None, &[])
    }

    fn run_with(&self, args: &[&str], input: Option<&[u8]>, env: &[(&str, &Path)]) -> Result<String, String> {
        match self.exec(args, input, env)? {
            (true, out, _) => Ok(String::from_utf8_lossy(&out).trim().to_owned()),
            (false, _, stderr) => Err(format!("git {}: {stderr}", args.join(" "))),
        }
    }

    /// The commit `rev` names, if any.
    pub fn commit_of(&self, rev: &str) -> Option<String> {
        let spec = format!("{rev}^{{commit}}");
        match self.exec(&["rev-parse", "--verify", "--quiet", "--end-of-options", &spec], None, &[]) {
            Ok((true, out, _)) => Some(String::from_utf8_lossy(&out).trim().to_owned()),
            _ => None,
        }
    }

    /// The tip of branch `name`, if it exists.
    pub fn branch(&self, name: &str) -> Option<String> {
        if name.is_empty() || self.run(&["check-ref-format", "--branch", name]).is_err() {
            return None;
        }
        self.commit_of(&format!("refs/heads/{name}"))
    }

    /// The branch `HEAD` names (the repository's default branch).
    pub fn default_branch(&self) -> String {
        self.run(&["symbolic-ref", "--short", "HEAD"]).unwrap_or_else(|_| "main".to_owned())
    }

    /// Every branch and its tip, by name.
    pub fn branches(&self) -> Result<Vec<(String, String)>, String> {
        let out =
            self.run(&["for-each-ref", "--sort=refname", "--format=%(refname:short) %(objectname)", "refs/heads"])?;
        Ok(out.lines().filter_map(|l| l.split_once(' ')).map(|(n, s)| (n.to_owned(), s.to_owned())).collect())
    }

    /// Point `refname` at `new`, if it still points at `old` (`None`: it must not exist).
    pub fn set_ref(&self, refname: &str, new: &str, old: Option<&str>) -> Result<(), String> {
        self.run(&["update-ref", refname, new, old.unwrap_or(ABSENT)]).map(drop)
    }

    /// Point `refname` at `new`, whatever it pointed at.
    pub fn force_ref(&self, refname: &str, new: &str) -> Result<(), String> {
        self.run(&["update-ref", refname, new]).map(drop)
    }

    /// Delete `refname`, if it still points at `old`.
    pub fn delete_ref(&self, refname: &str, old: &str) -> Result<(), String> {
        self.run(&["update-ref", "-d", refname, old]).map(drop)
    }

    /// A branch name git accepts.
    pub fn valid_branch_name(&self, name: &str) -> bool {
        !name.is_empty() && self.run(&["check-ref-format", "--branch", name]).is_ok()
    }

    /// The object at `path` in `commit` and its type (`blob`, `tree`), if any.
    pub fn entry(&self, commit: &str, path: &str) -> Option<(String, String)> {
        let spec = format!("{commit}:{}", path.trim_start_matches('/'));
        let sha = match self.exec(&["rev-parse", "--verify", "--quiet", "--end-of-options", &spec], None, &[]) {
            Ok((true, out, _)) => String::from_utf8_lossy(&out).trim().to_owned(),
            _ => return None,
        };
        let kind = self.run(&["cat-file", "-t", &sha]).ok()?;
        Some((sha, kind))
    }

    /// A blob's bytes.
    pub fn blob(&self, sha: &str) -> Result<Vec<u8>, String> {
        match self.exec(&["cat-file", "blob", sha], None, &[])? {
            (true, out, _) => Ok(out),
            (false, _, _) => Err(format!("no blob {sha}")),
        }
    }

    /// The entries of the tree at `path` in `commit`: (name, type, size).
    pub fn list_dir(&self, commit: &str, path: &str) -> Result<Vec<(String, String, u64)>, String> {
        let path = path.trim_matches('/');
        let spec = if path.is_empty() { format!("{commit}^{{tree}}") } else { format!("{commit}:{path}") };
        let out = self.run(&["ls-tree", "-l", "--end-of-options", &spec])?;
        Ok(out
            .lines()
            .filter_map(|l| {
                let (meta, name) = l.split_once('\t')?;
                let mut parts = meta.split_whitespace();
                let (_mode, kind, _sha, size) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
                Some((name.to_owned(), kind.to_owned(), size.parse().unwrap_or(0)))
            })
            .collect())
    }

    /// Write `content` as a blob.
    pub fn hash_blob(&self, content: &[u8]) -> Result<String, String> {
        self.run_with(&["hash-object", "-w", "--stdin"], Some(content), &[])
    }

    /// The tree of `parent` with `path` set to `blob` (`None`: removed), made in a throwaway
    /// index.
    pub fn tree_with(&self, parent: &str, path: &str, blob: Option<&str>) -> Result<String, String> {
        let scratch = tempfile::tempdir().map_err(|e| format!("temporary index: {e}"))?;
        let index = scratch.path().join("index");
        let env = [("GIT_INDEX_FILE", index.as_path())];
        self.run_with(&["read-tree", parent], None, &env)?;
        let path = path.trim_start_matches('/');
        match blob {
            Some(blob) => {
                let info = format!("100644,{blob},{path}");
                self.run_with(&["update-index", "--add", "--cacheinfo", &info], None, &env)?;
            }
            None => {
                self.run_with(&["update-index", "--force-remove", "--", path], None, &env)?;
            }
        }
        self.run_with(&["write-tree"], None, &env)
    }

    /// A commit of `tree` with `parents` and `message`.
    pub fn commit(&self, tree: &str, parents: &[&str], message: &str) -> Result<String, String> {
        let mut args = vec!["commit-tree", tree];
        for p in parents {
            args.extend(["-p", p]);
        }
        self.run_with(&args, Some(message.as_bytes()), &[])
    }

    /// The tree of merging `theirs` into `ours`; `None` when they conflict.
    pub fn merge_tree(&self, ours: &str, theirs: &str) -> Result<Option<String>, String> {
        match self.exec(&["merge-tree", "--write-tree", "--no-messages", ours, theirs], None, &[])? {
            (true, out, _) => Ok(String::from_utf8_lossy(&out).lines().next().map(str::to_owned)),
            (false, _, _) => Ok(None),
        }
    }

    /// Whether `a` is an ancestor of (or equal to) `b`.
    pub fn is_ancestor(&self, a: &str, b: &str) -> bool {
        matches!(self.exec(&["merge-base", "--is-ancestor", a, b], None, &[]), Ok((true, _, _)))
    }

    /// The tree a commit records.
    pub fn tree_of(&self, commit: &str) -> Result<String, String> {
        self.run(&["rev-parse", "--verify", &format!("{commit}^{{tree}}")])
    }

    /// Commits reachable from `rev` (optionally touching `path`), newest first.
    pub fn log(&self, rev: &str, path: Option<&str>, skip: usize, limit: usize) -> Result<Vec<CommitInfo>, String> {
        let skip = format!("--skip={skip}");
        let limit = format!("--max-count={limit}");
        let mut args =
            vec!["log", "-z", "--format=%H%x1f%an%x1f%ae%x1f%aI%x1f%B", &skip, &limit, "--end-of-options", rev];
        if let Some(path) = path.filter(|p| !p.is_empty()) {
            args.extend(["--", path]);
        }
        let out = self.run(&args)?;
        Ok(out
            .split('\0')
            .filter(|r| !r.trim().is_empty())
            .filter_map(|record| {
                let mut f = record.trim_start_matches('\n').splitn(5, '\u{1f}');
                Some(CommitInfo {
                    sha: f.next()?.to_owned(),
                    author_name: f.next()?.to_owned(),
                    author_email: f.next()?.to_owned(),
                    date: f.next()?.to_owned(),
                    message: f.next()?.trim_end().to_owned(),
                })
            })
            .collect())
    }

    /// The messages of the commits `new` has that `old` does not, oldest first; with no
    /// `old`, of the last `cap` commits up to `new` (what Gitea's push hook reads of a new
    /// branch).
    pub fn messages(&self, old: Option<&str>, new: &str, cap: usize) -> Result<Vec<String>, String> {
        let limit = format!("--max-count={cap}");
        let range = old.map(|o| format!("{o}..{new}"));
        let mut args = vec!["log", "-z", "--format=%B"];
        match &range {
            Some(range) => args.push(range),
            None => args.extend([limit.as_str(), new]),
        }
        args.push("--");
        let out = self.run(&args)?;
        let mut messages: Vec<String> =
            out.split('\0').map(|m| m.trim().to_owned()).filter(|m| !m.is_empty()).collect();
        messages.reverse();
        Ok(messages)
    }

    /// The repository's object directory.
    pub fn objects_dir(&self) -> PathBuf {
        self.dir.join("objects")
    }

    /// Let this repository read `other`'s objects (git's alternates), as a fork and its
    /// parent share them on a forge.
    pub fn share_objects_with(&self, other: &Git) -> Result<(), String> {
        let file = self.dir.join("objects/info/alternates");
        let theirs = other.objects_dir().display().to_string();
        let now = std::fs::read_to_string(&file).unwrap_or_default();
        if now.lines().any(|l| l == theirs) {
            return Ok(());
        }
        let mut lines: Vec<&str> = now.lines().collect();
        lines.push(&theirs);
        lines.sort_unstable();
        lines.dedup();
        let tmp = file.with_extension(format!("tmp.{}", std::process::id()));
        std::fs::create_dir_all(self.dir.join("objects/info")).map_err(|e| e.to_string())?;
        std::fs::write(&tmp, lines.join("\n") + "\n").map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &file).map_err(|e| format!("{}: {e}", file.display()))
    }

    /// The unified diff from the merge base of `base` and `head` to `head`.
    pub fn diff(&self, base: &str, head: &str, binary: bool) -> Result<String, String> {
        let range = format!("{base}...{head}");
        let mut args = vec!["diff", "--no-color", "--no-ext-diff"];
        if binary {
            args.push("--binary");
        }
        args.push(&range);
        self.exec(&args, None, &[]).map(|(_, out, _)| String::from_utf8_lossy(&out).into_owned())
    }

    /// The files `head` changes against its merge base with `base`: (status, path, additions,
    /// deletions).
    pub fn changed_files(&self, base: &str, head: &str) -> Result<Vec<(String, String, u64, u64)>, String> {
        let range = format!("{base}...{head}");
        let status = self.run(&["diff", "--name-status", "--no-renames", &range])?;
        let numstat = self.run(&["diff", "--numstat", "--no-renames", &range])?;
        let counts: Vec<(u64, u64, String)> = numstat
            .lines()
            .filter_map(|l| {
                let mut f = l.splitn(3, '\t');
                Some((f.next()?.parse().unwrap_or(0), f.next()?.parse().unwrap_or(0), f.next()?.to_owned()))
            })
            .collect();
        Ok(status
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .map(|(s, path)| {
                let (add, del) = counts.iter().find(|c| c.2 == path).map_or((0, 0), |c| (c.0, c.1));
                let status = match s {
                    "A" => "added",
                    "D" => "deleted",
                    _ => "changed",
                };
                (status.to_owned(), path.to_owned(), add, del)
            })
            .collect())
    }
}
