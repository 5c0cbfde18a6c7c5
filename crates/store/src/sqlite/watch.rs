//! The store's [`crate::ApprovalWatch`] on SQLite: inotify on the database's directory. An
//! answer from another process (the operator's `fleetgate approvals approve`) is a write to
//! the database or its WAL, which the kernel reports here; the waiter then reads the request
//! again. Any other write wakes it too (a heartbeat): a read it did not need, never a miss.

use crate::{StoreError, StoreErrorKind};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::fs::inotify;
use rustix::io::Errno;
use std::ffi::OsString;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

/// An inotify watch on the directory of one database file.
pub(super) struct FileWatch {
    fd: OwnedFd,
    /// The database file's name, and its WAL's.
    names: [OsString; 2],
}

impl FileWatch {
    pub(super) fn new(path: &Path) -> Result<Self, StoreError> {
        let fail = |what: &str, e: Errno| {
            StoreError::new(
                StoreErrorKind::Other,
                format!("cannot watch store {} for approvals ({what}): {e}", path.display()),
            )
        };
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = path.file_name().map(OsString::from).unwrap_or_default();
        let mut wal = name.clone();
        wal.push("-wal");
        let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
            .map_err(|e| fail("inotify", e))?;
        let flags = inotify::WatchFlags::MODIFY | inotify::WatchFlags::CLOSE_WRITE | inotify::WatchFlags::MOVED_TO;
        inotify::add_watch(&fd, dir, flags).map_err(|e| fail("watch", e))?;
        Ok(Self { fd, names: [name, wal] })
    }

    /// Whether the events queued now name the database or its WAL (draining them).
    fn drain(&self) -> Result<bool, Errno> {
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        let mut ours = false;
        loop {
            match reader.next() {
                Ok(event) => {
                    let name = event.file_name().map(|n| n.to_bytes());
                    ours |= name.is_some_and(|n| self.names.iter().any(|m| m.as_bytes() == n));
                }
                Err(Errno::AGAIN) => return Ok(ours),
                Err(e) => return Err(e),
            }
        }
    }
}

impl crate::ApprovalWatch for FileWatch {
    fn wait(&mut self, within: Duration) -> Result<bool, StoreError> {
        let fail = |e: Errno| StoreError::new(StoreErrorKind::Other, format!("the store's file watch failed: {e}"));
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let timeout = Timespec { tv_sec: left.as_secs() as i64, tv_nsec: i64::from(left.subsec_nanos()) };
            let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
            match poll(&mut fds, Some(&timeout)) {
                Ok(0) => return Ok(false),
                Ok(_) => {
                    if self.drain().map_err(fail)? {
                        return Ok(true);
                    }
                }
                Err(Errno::INTR) => {}
                Err(e) => return Err(fail(e)),
            }
            if left.is_zero() {
                return Ok(false);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ApprovalWatch;

    #[test]
    fn a_write_to_the_database_or_its_wal_wakes_the_watch_and_others_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("registry.sqlite3");
        std::fs::write(&db, b"x").unwrap();
        let mut watch = FileWatch::new(&db).unwrap();
        assert!(!watch.wait(Duration::from_millis(50)).unwrap(), "nothing happened");
        std::fs::write(dir.path().join("unrelated"), b"y").unwrap();
        assert!(!watch.wait(Duration::from_millis(50)).unwrap(), "another file is not the store");
        std::fs::write(dir.path().join("registry.sqlite3-wal"), b"z").unwrap();
        assert!(watch.wait(Duration::from_secs(5)).unwrap(), "the WAL changed");
        std::fs::write(&db, b"w").unwrap();
        assert!(watch.wait(Duration::from_secs(5)).unwrap(), "the database changed");
    }
}
