//! The store file before SQLite sees it, and what it must be to be used.
//!
//! A fleetgate store holds fencing epochs and leases: whoever can write it can hand
//! themselves a worker's ownership. So a file owned by another user, or writable by
//! group or others, is refused — the file itself and its `-wal`/`-shm` siblings, which
//! SQLite would read as part of it (a sibling must be a regular file: a symlink planted in its
//! place is refused, never followed). The directory must not let others remove entries: one
//! group or others may write without the sticky bit is refused, for anyone who may write it
//! could delete the store and the next command would silently make an empty one (workers,
//! epochs, leases and audit gone). A file that holds another program's database is
//! refused before anything is written to it (no WAL switch, no tables), and one this
//! user may not write is reported as read-only with the fix, not as unreadable.
//!
//! The judgements are pure functions of what `fstat`, `open` and the schema said; the
//! I/O is [`prepare`] and [`check_adoptable`].

use crate::{StoreError, StoreErrorKind};
use rusqlite::Connection;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The file a store handle opened: its device and inode, so a later look at the path
/// can tell whether it still names that file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

impl FileId {
    /// The file `meta` describes.
    pub fn of(meta: &std::fs::Metadata) -> Self {
        Self { dev: meta.dev(), ino: meta.ino() }
    }
}

/// Who besides this process's user could write the file, as its owner and mode say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposure {
    /// Owned by this user, writable by no one else.
    Private,
    /// Owned by another user (`owner`), who can rewrite it whatever its mode.
    OtherOwner {
        /// The file's uid.
        owner: u32,
    },
    /// Writable by its group or by others.
    OpenToOthers {
        /// The permission bits.
        mode: u32,
    },
}

/// The exposure of a file owned by `file_uid` with `mode`, to a process running as
/// `euid`. Root is no exception: a store another user owns is theirs to rewrite.
pub fn exposure(file_uid: u32, euid: u32, mode: u32) -> Exposure {
    if file_uid != euid {
        Exposure::OtherOwner { owner: file_uid }
    } else if mode & 0o022 != 0 {
        Exposure::OpenToOthers { mode: mode & 0o7777 }
    } else {
        Exposure::Private
    }
}

/// Whether others could delete or replace the entries of the store's directory, as its
/// mode says: writable by group or others without the sticky bit (with it, only an entry's
/// owner, the directory's owner and root may remove an entry). `Some(mode)` when so.
pub fn directory_open_to_others(mode: u32) -> Option<u32> {
    (mode & 0o022 != 0 && mode & 0o1000 == 0).then_some(mode & 0o7777)
}

/// The refusal of a store whose directory `dir` others may write (mode `mode`, no sticky bit).
pub fn directory_refusal(shown: &str, dir: &str, mode: u32) -> StoreError {
    StoreError::new(
        StoreErrorKind::Permission,
        format!(
            "store directory {dir} is writable by group or others without the sticky bit (mode {mode:04o}): anyone \
             who can write it could delete {shown} and the next command would silently make an empty store \
             (workers, epochs, leases and audit gone); chmod go-w {dir} (or chmod +t {dir}), or put the store in \
             a directory of your own"
        ),
    )
}

/// The refusal of a `-wal`/`-shm` sibling that is not a regular file (`lstat` said so: a
/// symlink is never followed), or `None` when it is one.
pub fn sibling_kind_refusal(shown: &str, is_file: bool, is_symlink: bool) -> Option<StoreError> {
    if is_file {
        return None;
    }
    let what = if is_symlink { "a symbolic link" } else { "not a regular file" };
    Some(StoreError::new(
        StoreErrorKind::Permission,
        format!(
            "store file {shown} is {what}: SQLite would read and write through it as part of the store; \
             remove it (rm {shown}) while no fleetgate uses the store"
        ),
    ))
}

/// The refusal of an exposed file, naming the fix; `None` for a private one.
pub fn exposure_refusal(shown: &str, exposure: Exposure, euid: u32) -> Option<StoreError> {
    let why = match exposure {
        Exposure::Private => return None,
        Exposure::OtherOwner { owner } => format!(
            "store file {shown} is owned by uid {owner}, not by this user (uid {euid}): its owner could rewrite \
             leases and fencing epochs; use a store of your own (--store), or take this one over: \
             chown {euid} {shown} && chmod 600 {shown}"
        ),
        Exposure::OpenToOthers { mode } => format!(
            "store file {shown} is writable by group or others (mode {mode:04o}): anyone who can write it could \
             rewrite leases and fencing epochs; chmod 600 {shown}"
        ),
    };
    Some(StoreError::new(StoreErrorKind::Permission, why))
}

/// Why this user may not write the store, from the error opening it for writing (or
/// checking its directory): read-only, named with the fix. `None` when the error says
/// something else.
pub fn read_only_refusal(shown: &str, what: &str, error: &std::io::Error, fix: &str) -> Option<StoreError> {
    const EROFS: i32 = 30;
    let why = match (error.kind(), error.raw_os_error()) {
        (_, Some(EROFS)) => format!("store {shown} is read-only: {what} is on a read-only filesystem; {fix}"),
        (ErrorKind::PermissionDenied, _) => {
            format!("store {shown} is read-only for this user: {what} is not writable ({error}); {fix}")
        }
        _ => return None,
    };
    Some(StoreError::new(StoreErrorKind::Permission, why))
}

/// Is a database with these facts one fleetgate may use? Its own (it has the
/// `fleetgate_schema` table), or empty: no schema object, no application id, no user
/// version. Anything else is another program's, refused with what it holds.
pub fn adoption(
    shown: &str,
    has_fleetgate_schema: bool,
    objects: i64,
    application_id: i64,
    user_version: i64,
) -> Result<(), StoreError> {
    if has_fleetgate_schema || (objects == 0 && application_id == 0 && user_version == 0) {
        return Ok(());
    }
    Err(StoreError::new(
        StoreErrorKind::Corrupt,
        format!(
            "store {shown} is another program's SQLite database, not a fleetgate store ({objects} schema objects, \
             no fleetgate_schema table, application_id {application_id}, user_version {user_version}): it was \
             left untouched; point --store at a new path or at a fleetgate store"
        ),
    ))
}

fn io_err(context: String, e: &std::io::Error) -> StoreError {
    let kind = match e.kind() {
        ErrorKind::PermissionDenied => StoreErrorKind::Permission,
        _ => StoreErrorKind::Io,
    };
    StoreError::new(kind, format!("{context}: {e}"))
}

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Make the store's directory (0700) and file (0600) when absent, then judge the file
/// and its `-wal`/`-shm` siblings: regular, private, writable. Writes nothing to an
/// existing file. The file's identity, for [`same_file`] later.
pub fn prepare(path: &Path, shown: &str) -> Result<FileId, StoreError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| io_err(format!("cannot create store directory {}", parent.display()), &e))?;
    }
    // Judged before a store is made in it: a fresh one in a directory others may empty
    // would hide the deletion of the last.
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let dir_meta =
        std::fs::metadata(dir).map_err(|e| io_err(format!("cannot read store directory {}", dir.display()), &e))?;
    if let Some(mode) = directory_open_to_others(dir_meta.mode()) {
        return Err(directory_refusal(shown, &dir.display().to_string(), mode));
    }
    // Created here, 0600, before SQLite sees it; SQLite gives the -wal and -shm files
    // the same mode.
    match OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err(format!("cannot create store {shown}"), &e)),
    }
    let file = File::open(path).map_err(|e| io_err(format!("cannot read store {shown}"), &e))?;
    let meta = file.metadata().map_err(|e| io_err(format!("cannot read store {shown}"), &e))?;
    if !meta.is_file() {
        return Err(StoreError::new(
            StoreErrorKind::Invalid,
            format!("store {shown} exists and is not a regular file"),
        ));
    }
    let euid = euid();
    if let Some(refused) = exposure_refusal(shown, exposure(meta.uid(), euid, meta.mode()), euid) {
        return Err(refused);
    }
    for suffix in ["-wal", "-shm"] {
        let mut sibling = path.as_os_str().to_owned();
        sibling.push(suffix);
        match std::fs::symlink_metadata(&sibling) {
            Ok(m) => {
                let sibling_shown = format!("{shown}{suffix}");
                if let Some(refused) = sibling_kind_refusal(&sibling_shown, m.is_file(), m.file_type().is_symlink()) {
                    return Err(refused);
                }
                if let Some(refused) = exposure_refusal(&sibling_shown, exposure(m.uid(), euid, m.mode()), euid) {
                    return Err(refused);
                }
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(format!("cannot read store {shown}{suffix}"), &e)),
        }
    }
    // Opening for writing writes nothing; it tells a read-only file from an unreadable one.
    if let Err(e) = OpenOptions::new().read(true).write(true).open(path) {
        let fix = format!("make it writable (chmod u+w {shown}) or point --store at a writable location");
        return Err(read_only_refusal(shown, "the file", &e, &fix)
            .unwrap_or_else(|| io_err(format!("cannot open store {shown}"), &e)));
    }
    // SQLite makes the -wal and -shm files beside the store.
    let access = rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK;
    if let Err(errno) = rustix::fs::accessat(rustix::fs::CWD, dir, access, rustix::fs::AtFlags::EACCESS) {
        let e = std::io::Error::from(errno);
        let what = format!("its directory {}", dir.display());
        let fix = format!("SQLite must create {shown}-wal and -shm beside it: make {} writable", dir.display());
        if let Some(refused) = read_only_refusal(shown, &what, &e, &fix) {
            return Err(refused);
        }
    }
    Ok(FileId::of(&meta))
}

/// Whether `path` still names the file `opened`: `Ok(None)` when it does, else why not
/// (deleted, or replaced by another file).
pub fn same_file(path: &Path, opened: FileId) -> std::io::Result<Option<String>> {
    match std::fs::metadata(path) {
        Ok(meta) if FileId::of(&meta) == opened => Ok(None),
        Ok(meta) => Ok(Some(format!(
            "it was replaced by another file (inode {} on device {}, opened: inode {} on device {})",
            meta.ino(),
            meta.dev(),
            opened.ino,
            opened.dev
        ))),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Some("it was deleted".into())),
        Err(e) => Err(e),
    }
}

/// Refuse a database of another program before anything is written to it: read its
/// schema (a read writes nothing) and judge it with [`adoption`]. Checkpoint-on-close is
/// off meanwhile, so even a refused database in WAL mode is closed as it was found.
pub fn check_adoptable(conn: &Connection, shown: &str) -> Result<(), StoreError> {
    use rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE;
    let read = |e: rusqlite::Error| super::map_err(&format!("store {shown} is unreadable"), e);
    conn.set_db_config(SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true).map_err(read)?;
    let (has_schema, objects): (bool, i64) = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'fleetgate_schema'),
                    (SELECT COUNT(*) FROM sqlite_master)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(read)?;
    let application_id: i64 = conn.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(read)?;
    let user_version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(read)?;
    adoption(shown, has_schema, objects, application_id, user_version)?;
    conn.set_db_config(SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, false).map_err(read)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_file_of_ones_own_that_no_one_else_may_write_is_private() {
        assert_eq!(exposure(1000, 1000, 0o100600), Exposure::Private);
        assert_eq!(exposure(1000, 1000, 0o100644), Exposure::Private);
        assert_eq!(exposure(1000, 1000, 0o100400), Exposure::Private);
        assert_eq!(exposure(1000, 1000, 0o100620), Exposure::OpenToOthers { mode: 0o620 });
        assert_eq!(exposure(1000, 1000, 0o100602), Exposure::OpenToOthers { mode: 0o602 });
        assert_eq!(exposure(1000, 1000, 0o101666), Exposure::OpenToOthers { mode: 0o1666 });
        // Another user's file is theirs to rewrite, whatever its mode, even to root.
        assert_eq!(exposure(1001, 1000, 0o100600), Exposure::OtherOwner { owner: 1001 });
        assert_eq!(exposure(1001, 1000, 0o100666), Exposure::OtherOwner { owner: 1001 });
        assert_eq!(exposure(65534, 0, 0o100600), Exposure::OtherOwner { owner: 65534 });
        assert_eq!(exposure(0, 1000, 0o100600), Exposure::OtherOwner { owner: 0 });
    }

    #[test]
    fn a_directory_others_may_write_is_refused_unless_sticky() {
        assert_eq!(directory_open_to_others(0o40700), None);
        assert_eq!(directory_open_to_others(0o40755), None);
        assert_eq!(directory_open_to_others(0o40777), Some(0o777));
        assert_eq!(directory_open_to_others(0o40770), Some(0o770));
        assert_eq!(directory_open_to_others(0o40702), Some(0o702));
        assert_eq!(directory_open_to_others(0o41777), None, "sticky: only an entry's owner removes it");
        assert_eq!(directory_open_to_others(0o41770), None);
        let refused = directory_refusal("/shared/s.db", "/shared", 0o777).to_string();
        assert!(refused.contains("store directory /shared") && refused.contains("mode 0777"), "{refused}");
        assert!(refused.contains("chmod go-w /shared"), "{refused}");
    }

    #[test]
    fn a_sibling_must_be_a_regular_file() {
        assert!(sibling_kind_refusal("/s-wal", true, false).is_none());
        let link = sibling_kind_refusal("/s-wal", false, true).unwrap();
        assert_eq!(link.kind(), StoreErrorKind::Permission);
        assert!(link.to_string().contains("/s-wal is a symbolic link"), "{link}");
        let fifo = sibling_kind_refusal("/s-shm", false, false).unwrap().to_string();
        assert!(fifo.contains("/s-shm is not a regular file"), "{fifo}");
    }

    #[test]
    fn an_exposed_file_is_refused_with_the_fix() {
        assert!(exposure_refusal("/s", Exposure::Private, 1000).is_none());
        let other = exposure_refusal("/tmp/s", Exposure::OtherOwner { owner: 1001 }, 1000).unwrap();
        assert_eq!(other.kind(), StoreErrorKind::Permission);
        let text = other.to_string();
        assert!(text.contains("owned by uid 1001") && text.contains("chown 1000 /tmp/s && chmod 600 /tmp/s"), "{text}");
        let open = exposure_refusal("/tmp/s", Exposure::OpenToOthers { mode: 0o666 }, 1000).unwrap();
        assert!(open.to_string().contains("mode 0666") && open.to_string().contains("chmod 600 /tmp/s"), "{open}");
    }

    #[test]
    fn a_store_that_may_not_be_written_is_read_only_not_unreadable() {
        let denied = std::io::Error::from_raw_os_error(13);
        let refused = read_only_refusal("/s", "the file", &denied, "chmod u+w /s").unwrap();
        assert_eq!(refused.kind(), StoreErrorKind::Permission);
        assert!(refused.to_string().starts_with("store /s is read-only for this user"), "{refused}");
        assert!(refused.to_string().ends_with("chmod u+w /s"), "{refused}");
        let rofs = read_only_refusal("/s", "the file", &std::io::Error::from_raw_os_error(30), "fix").unwrap();
        assert!(rofs.to_string().contains("read-only filesystem"), "{rofs}");
        assert!(read_only_refusal("/s", "the file", &std::io::Error::from_raw_os_error(5), "fix").is_none());
    }

    #[test]
    fn only_an_empty_database_or_a_fleetgate_store_is_adopted() {
        assert!(adoption("/s", true, 14, 0, 0).is_ok());
        assert!(adoption("/s", false, 0, 0, 0).is_ok());
        for (objects, app, version) in [(1, 0, 0), (0, 7, 0), (0, 0, 3)] {
            let err = adoption("/s", false, objects, app, version).unwrap_err();
            assert_eq!(err.kind(), StoreErrorKind::Corrupt);
            assert!(err.to_string().contains("another program's SQLite database"), "{err}");
        }
    }
}
