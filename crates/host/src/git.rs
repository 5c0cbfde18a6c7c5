//! Repository revisions: read from the repository's own files, or asked of git itself when
//! the layout is one this reader does not know.
//!
//! The gate reads a checkout's `HEAD` for every mutating decision (a server behind its
//! repository is `stale-runtime:`); starting `git rev-parse` for it cost a process spawn —
//! about 1.5 ms, most of a gated call's time. Reading `HEAD`, the ref it names and
//! `packed-refs` costs a few file reads. Anything unusual (a ref store other than files and
//! `packed-refs`, a symbolic ref chain past a few links, a value that is no object id)
//! falls back to git, so the answer is always git's.

use crate::error::{HostError, HostErrorKind};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The commit `HEAD` points at in the repository containing `dir`.
pub fn head(dir: &Path) -> Result<String, HostError> {
    match head_from_files(dir) {
        Some(sha) => Ok(sha),
        None => head_from_git(dir),
    }
}

/// An object id: 40 (SHA-1) or 64 (SHA-256) hex digits.
fn is_object_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The repository's own directory and its common directory (a linked worktree has both),
/// for the nearest `.git` at or above `dir`, as git finds it.
fn locate(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let start = dir.canonicalize().ok()?;
    let dot_git = start.ancestors().map(|d| d.join(".git")).find(|p| p.exists())?;
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else {
        // A linked worktree or a submodule: `.git` is a file naming the directory.
        let text = fs::read_to_string(&dot_git).ok()?;
        let named = text.trim_end().strip_prefix("gitdir: ")?;
        dot_git.parent()?.join(named)
    };
    let common = match fs::read_to_string(git_dir.join("commondir")) {
        Ok(text) => git_dir.join(text.trim_end()),
        Err(_) => git_dir.clone(),
    };
    Some((git_dir, common))
}

fn head_from_files(dir: &Path) -> Option<String> {
    let (git_dir, common) = locate(dir)?;
    let mut value = fs::read_to_string(git_dir.join("HEAD")).ok()?.trim_end().to_owned();
    // Symbolic refs may chain; git stops at 5 levels, so does this reader.
    for _ in 0..5 {
        let Some(name) = value.strip_prefix("ref: ") else {
            return is_object_id(&value).then_some(value);
        };
        let name = name.to_owned();
        if !name.starts_with("refs/") || name.split('/').any(|part| part.is_empty() || part == "..") {
            return None;
        }
        // Per-worktree refs live in the worktree's directory, the rest in the common one.
        let loose = [git_dir.join(&name), common.join(&name)].into_iter().find_map(|p| fs::read_to_string(p).ok());
        value = match loose {
            Some(text) => text.trim_end().to_owned(),
            None => packed(&common, &name)?,
        };
    }
    None
}

/// `name`'s object id in `packed-refs`.
fn packed(common: &Path, name: &str) -> Option<String> {
    let text = fs::read_to_string(common.join("packed-refs")).ok()?;
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.starts_with('^'))
        .filter_map(|line| line.split_once(' '))
        .find(|(_, n)| *n == name)
        .map(|(id, _)| id.to_owned())
        .filter(|id| is_object_id(id))
}

fn head_from_git(dir: &Path) -> Result<String, HostError> {
    let fail = |message: String| HostError::new(HostErrorKind::Command, message);
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "--verify", "HEAD"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| fail(format!("cannot run git: {e}")))?;
    if !out.status.success() {
        return Err(fail(format!(
            "git rev-parse HEAD in {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let sha = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !is_object_id(&sha) {
        return Err(HostError::new(
            HostErrorKind::Malformed,
            format!("git printed {sha:?} for HEAD in {}", dir.display()),
        ));
    }
    Ok(sha)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The files' answer must be git's own, and must not have needed git.
    fn agrees(dir: &Path) {
        let expected = git(dir, &["rev-parse", "--verify", "HEAD"]);
        assert_eq!(head_from_files(dir).as_deref(), Some(expected.as_str()), "{}", dir.display());
        assert_eq!(head(dir).unwrap(), expected);
    }

    #[test]
    fn head_is_read_from_the_files_as_git_reads_it() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        fs::create_dir_all(repo.join("sub/deeper")).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        git(&repo, &["commit", "-q", "--allow-empty", "-m", "one"]);
        agrees(&repo);
        agrees(&repo.join("sub/deeper"));

        git(&repo, &["commit", "-q", "--allow-empty", "-m", "two"]);
        git(&repo, &["pack-refs", "--all"]);
        assert!(!repo.join(".git/refs/heads/main").exists(), "the branch is only in packed-refs");
        agrees(&repo);

        let first = git(&repo, &["rev-parse", "HEAD~1"]);
        git(&repo, &["checkout", "-q", "--detach", &first]);
        agrees(&repo);

        git(&repo, &["checkout", "-q", "-b", "feature/x"]);
        git(&repo, &["commit", "-q", "--allow-empty", "-m", "three"]);
        agrees(&repo);

        let linked = tmp.path().join("linked");
        git(&repo, &["worktree", "add", "-q", "-b", "other", linked.to_str().unwrap(), "main"]);
        git(&linked, &["commit", "-q", "--allow-empty", "-m", "four"]);
        agrees(&linked);
        agrees(&repo);
    }

    #[test]
    fn an_unborn_branch_or_no_repository_falls_back_to_gits_error() {
        let tmp = tempfile::tempdir().unwrap();
        git(tmp.path(), &["init", "-q"]);
        assert_eq!(head_from_files(tmp.path()), None);
        let err = head(tmp.path()).unwrap_err();
        assert!(err.to_string().contains("git rev-parse HEAD"), "{err}");
    }

    #[test]
    fn a_ref_that_escapes_refs_is_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        git(tmp.path(), &["init", "-q"]);
        git(tmp.path(), &["commit", "-q", "--allow-empty", "-m", "one"]);
        fs::write(tmp.path().join(".git/HEAD"), "ref: refs/../../../etc/hostname\n").unwrap();
        assert_eq!(head_from_files(tmp.path()), None);
    }
}
