//! Writing one repaired file, the doctor's only write: a timestamped backup
//! beside it, then an atomic replace (a temporary file in the same directory,
//! fsync, rename, fsync of the directory). The file is compared with the bytes
//! the repair was computed from just before the rename; if another writer
//! changed it meanwhile, nothing is replaced and the backup is withdrawn.
//!
//! The check narrows the race to the instant between the last read and the
//! rename: the clients take no lock the doctor could honour.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// One file to rewrite.
#[derive(Clone, Debug)]
pub struct Change {
    /// The file as the client names it (a symlink is followed to its target).
    pub path: PathBuf,
    /// The bytes the repair was computed from.
    pub original: Vec<u8>,
    /// The repaired text.
    pub updated: String,
    /// The directory the file must resolve inside (the project, for a project's file): a
    /// symbolic link out of it is refused, never written through.
    pub within: Option<PathBuf>,
}

/// Why a file was not rewritten.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApplyErrorKind {
    /// The file changed between the read and the replace.
    ChangedOnDisk,
    /// The file or its directory could not be read or written.
    Io,
    /// The file resolves outside the directory it must stay in.
    OutsideProject,
}

/// A file that was not rewritten; it is as it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApplyError {
    /// The file.
    pub path: PathBuf,
    /// What kind of failure.
    pub kind: ApplyErrorKind,
    /// The cause, lowercase.
    pub message: String,
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for ApplyError {}

fn io(path: &Path, what: &str, e: &std::io::Error) -> ApplyError {
    ApplyError { path: path.to_owned(), kind: ApplyErrorKind::Io, message: format!("{what}: {e}") }
}

fn unchanged(target: &Path, original: &[u8]) -> Result<(), ApplyError> {
    let now = std::fs::read(target).map_err(|e| io(target, "cannot read it again", &e))?;
    if now == original {
        Ok(())
    } else {
        Err(ApplyError {
            path: target.to_owned(),
            kind: ApplyErrorKind::ChangedOnDisk,
            message:
                "changed on disk since the doctor read it (another writer?): nothing written; run the doctor again"
                    .into(),
        })
    }
}

/// `Err` with a sentence naming the link and its target when `path`, a file under `within`,
/// resolves outside `within` (a symbolic link in the project pointing out of it). A path that
/// does not resolve (absent, a dangling link) is not judged here: there is nothing to follow.
pub fn check_within(path: &Path, within: &Path) -> Result<(), OutsideProject> {
    let Ok(resolved) = std::fs::canonicalize(path) else { return Ok(()) };
    let root = std::fs::canonicalize(within).unwrap_or_else(|_| within.to_owned());
    if resolved.starts_with(&root) {
        return Ok(());
    }
    let mut at = within.to_owned();
    let link = path.strip_prefix(within).unwrap_or(path).components().find_map(|c| {
        at.push(c);
        let is_link = std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink());
        is_link.then(|| (at.clone(), std::fs::read_link(&at).unwrap_or_default()))
    });
    Err(OutsideProject { link, resolved, project: root })
}

/// A project file that resolves outside the project ([`check_within`]): the link on the way,
/// if one is, and where the file resolves to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutsideProject {
    /// The symbolic link met on the way and its target.
    pub link: Option<(PathBuf, PathBuf)>,
    /// Where the file resolves to.
    pub resolved: PathBuf,
    /// The project's directory, resolved.
    pub project: PathBuf,
}

impl std::fmt::Display for OutsideProject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.link {
            Some((link, target)) => write!(f, "{} is a symbolic link to {}, so", link.display(), target.display())?,
            None => f.write_str("this")?,
        }
        write!(
            f,
            " the project's file resolves to {}, outside the project {}: the doctor neither reads nor writes a \
             project file out of the project",
            self.resolved.display(),
            self.project.display()
        )
    }
}

impl std::error::Error for OutsideProject {}

/// Create a backup file: never over an existing one, and with the target's permission bits
/// from the first instant (narrowed further by the umask, never widened), so a secret the
/// configuration holds is never readable by more users than the file itself allowed, not even
/// between the creation and a later chmod.
fn open_backup(path: &Path, meta: &std::fs::Metadata) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    std::fs::OpenOptions::new().write(true).create_new(true).mode(meta.permissions().mode() & 0o777).open(path)
}

/// Write the backup of `target` (its `original` bytes) beside it, never over
/// an existing file. Returns its path.
fn backup(target: &Path, original: &[u8], stamp: &str, meta: &std::fs::Metadata) -> Result<PathBuf, ApplyError> {
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let dir = target.parent().unwrap_or(Path::new("."));
    for n in 0..100 {
        let suffix = if n == 0 { String::new() } else { format!("-{n}") };
        let path = dir.join(format!("{name}.fleetgate-backup-{stamp}{suffix}"));
        let mut file = match open_backup(&path, meta) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io(target, &format!("cannot write its backup in {}", dir.display()), &e)),
        };
        let written = file
            .write_all(original)
            .and_then(|()| file.set_permissions(meta.permissions()))
            .and_then(|()| file.sync_all());
        if let Err(e) = written {
            let _ = std::fs::remove_file(&path);
            return Err(io(target, &format!("cannot write its backup {}", path.display()), &e));
        }
        return Ok(path);
    }
    Err(ApplyError {
        path: target.to_owned(),
        kind: ApplyErrorKind::Io,
        message: "too many backups this second".into(),
    })
}

/// Back up and atomically replace `change.path`. `before_replace` runs right
/// before the final check and the rename (a seam for tests).
pub fn apply(change: &Change, stamp: &str, before_replace: &mut dyn FnMut(&Path)) -> Result<PathBuf, ApplyError> {
    if let Some(within) = &change.within {
        check_within(&change.path, within).map_err(|outside| ApplyError {
            path: change.path.clone(),
            kind: ApplyErrorKind::OutsideProject,
            message: outside.to_string(),
        })?;
    }
    let target = std::fs::canonicalize(&change.path).map_err(|e| io(&change.path, "cannot resolve it", &e))?;
    let meta = std::fs::metadata(&target).map_err(|e| io(&target, "cannot stat it", &e))?;
    unchanged(&target, &change.original)?;
    let dir = target.parent().unwrap_or(Path::new("."));
    let backup = backup(&target, &change.original, stamp, &meta)?;
    let withdraw = |e: ApplyError| {
        let _ = std::fs::remove_file(&backup);
        e
    };
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".fleetgate-tmp")
        .tempfile_in(dir)
        .map_err(|e| withdraw(io(&target, &format!("cannot write a temporary file in {}", dir.display()), &e)))?;
    let file = temp.as_file_mut();
    // Ownership is kept where the caller may keep it (root editing a user's
    // file); otherwise the file becomes the caller's, as any editor leaves it.
    let _ = std::os::unix::fs::fchown(&*file, Some(meta.uid()), Some(meta.gid()));
    file.write_all(change.updated.as_bytes())
        .and_then(|()| file.set_permissions(meta.permissions()))
        .and_then(|()| file.sync_all())
        .map_err(|e| withdraw(io(&target, "cannot write the repaired text", &e)))?;
    before_replace(&target);
    unchanged(&target, &change.original).map_err(withdraw)?;
    temp.persist(&target).map_err(|e| withdraw(io(&target, "cannot replace it", &e.error)))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(backup)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(dir: &Path) -> Change {
        let path = dir.join("mcp.json");
        std::fs::write(&path, "{\"old\": 1}\n").unwrap();
        Change { path, original: b"{\"old\": 1}\n".to_vec(), updated: "{\"new\": 1}\n".into(), within: None }
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn backup_then_replace_and_a_second_backup_never_overwrites_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let c = change(dir.path());
        let b1 = apply(&c, "20260730T004009Z", &mut |_| {}).unwrap();
        assert_eq!(std::fs::read(&b1).unwrap(), c.original);
        assert_eq!(std::fs::read_to_string(&c.path).unwrap(), c.updated);
        std::fs::write(&c.path, &c.original).unwrap();
        let b2 = apply(&c, "20260730T004009Z", &mut |_| {}).unwrap();
        assert_ne!(b1, b2);
        assert_eq!(listing(dir.path()).len(), 3, "{:?}", listing(dir.path()));
    }

    #[test]
    fn a_concurrent_writer_is_detected_and_nothing_is_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let c = change(dir.path());
        let e = apply(&c, "s", &mut |p| std::fs::write(p, "{\"theirs\": 1}\n").unwrap()).unwrap_err();
        assert_eq!(e.kind, ApplyErrorKind::ChangedOnDisk);
        assert_eq!(std::fs::read_to_string(&c.path).unwrap(), "{\"theirs\": 1}\n");
        assert_eq!(listing(dir.path()), ["mcp.json"], "no backup, no temporary file left");
    }

    /// Issue 34: the backup was created 0666 & umask, written, then chmod'ed to the target's
    /// mode; a watcher could read a token in between.
    #[test]
    fn a_backup_is_created_with_the_targets_mode_not_widened_later() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let c = change(dir.path());
        std::fs::set_permissions(&c.path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let meta = std::fs::metadata(&c.path).unwrap();
        let backup = dir.path().join("mcp.json.fleetgate-backup-s");
        let _file = open_backup(&backup, &meta).unwrap();
        let mode = std::fs::metadata(&backup).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & !0o600, 0, "the backup is {mode:o} as soon as it exists");
        assert!(open_backup(&backup, &meta).is_err(), "never over an existing file");
        let b = apply(&c, "t", &mut |_| {}).unwrap();
        assert_eq!(std::fs::metadata(&b).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn a_symlink_is_followed_and_stays_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let real = change(dir.path());
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&real.path, &link).unwrap();
        let c = Change { path: link.clone(), ..real.clone() };
        apply(&c, "s", &mut |_| {}).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&real.path).unwrap(), c.updated);
    }

    /// Issue 34: a project's file that is a link out of the project is never written through.
    #[test]
    fn a_project_file_linked_out_of_the_project_is_refused_naming_the_link() {
        let dir = tempfile::tempdir().unwrap();
        let (project, outside) = (dir.path().join("project"), dir.path().join("outside"));
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let real = change(&outside);
        let link = project.join(".mcp.json");
        std::os::unix::fs::symlink(&real.path, &link).unwrap();
        let c = Change { path: link.clone(), within: Some(project.clone()), ..real.clone() };
        let e = apply(&c, "s", &mut |_| {}).unwrap_err();
        assert_eq!(e.kind, ApplyErrorKind::OutsideProject);
        assert!(e.message.contains(&link.display().to_string()) && e.message.contains("outside the project"), "{e}");
        assert_eq!(std::fs::read(&real.path).unwrap(), real.original, "the target is untouched");
        assert_eq!(listing(&outside), ["mcp.json"], "no backup beside it");
        let inside = Change { path: project.join("in.json"), within: Some(project.clone()), ..real.clone() };
        std::fs::write(&inside.path, &inside.original).unwrap();
        assert!(apply(&inside, "s", &mut |_| {}).is_ok(), "a file inside the project is written");
    }
}
