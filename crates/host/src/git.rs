//! Repository revisions, asked of git itself.

use crate::error::{HostError, HostErrorKind};
use std::path::Path;
use std::process::{Command, Stdio};

/// The commit `HEAD` points at in the repository containing `dir`.
pub fn head(dir: &Path) -> Result<String, HostError> {
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
    if sha.len() < 40 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(HostError::new(
            HostErrorKind::Malformed,
            format!("git printed {sha:?} for HEAD in {}", dir.display()),
        ));
    }
    Ok(sha)
}
