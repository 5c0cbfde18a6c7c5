//! The SQLite store's file (no PostgreSQL counterpart): another program's database is
//! refused without a byte changed; a store another user owns, or that group or others
//! may write, is refused with the fix named.

use fleetgate_store::StoreErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn open(path: &Path) -> Result<std::sync::Arc<dyn fleetgate_store::Store>, fleetgate_store::StoreError> {
    fleetgate_store::open(path.to_str().expect("utf-8 path"))
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// A store path in a fresh private directory.
fn location() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("registry.sqlite3");
    (dir, path)
}

#[test]
fn another_programs_database_is_refused_and_left_byte_for_byte() {
    let (_dir, path) = location();
    {
        let other = rusqlite::Connection::open(&path).unwrap();
        other.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('precious');").unwrap();
    }
    chmod(&path, 0o600);
    let before = std::fs::read(&path).unwrap();
    let err = open(&path).unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Corrupt, "{err}");
    let text = err.to_string();
    assert!(text.contains("another program's SQLite database") && text.contains("registry.sqlite3"), "{text}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "not a byte of it changed");
    assert!(!sibling(&path, "-wal").exists(), "no WAL switch");
    let mode: String =
        rusqlite::Connection::open(&path).unwrap().query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "delete");
}

#[test]
fn a_database_with_no_table_but_another_programs_marks_is_refused() {
    for pragma in ["PRAGMA user_version = 7", "PRAGMA application_id = 1234"] {
        let (_dir, path) = location();
        rusqlite::Connection::open(&path).unwrap().execute_batch(pragma).unwrap();
        chmod(&path, 0o600);
        let before = std::fs::read(&path).unwrap();
        let err = open(&path).unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Corrupt, "{pragma}: {err}");
        assert_eq!(std::fs::read(&path).unwrap(), before, "{pragma}");
    }
}

#[test]
fn an_empty_file_and_an_empty_database_are_adopted() {
    let (_dir, path) = location();
    std::fs::File::create(&path).unwrap();
    chmod(&path, 0o600);
    assert!(open(&path).unwrap().list_workers().unwrap().is_empty());
    let (_dir, path) = location();
    rusqlite::Connection::open(&path).unwrap().execute_batch("PRAGMA journal_mode = WAL").unwrap();
    chmod(&path, 0o600);
    assert!(open(&path).unwrap().list_workers().unwrap().is_empty());
}

#[test]
fn a_store_group_or_others_may_write_is_refused_with_the_fix() {
    let (_dir, path) = location();
    drop(open(&path).unwrap());
    for mode in [0o666, 0o620, 0o602] {
        chmod(&path, mode);
        let before = std::fs::read(&path).unwrap();
        let err = open(&path).unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Permission, "{mode:o}: {err}");
        let text = err.to_string();
        assert!(text.contains(&format!("mode {mode:04o}")), "{text}");
        assert!(text.contains(&format!("chmod 600 {}", path.display())), "{text}");
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }
    chmod(&path, 0o600);
    open(&path).expect("private again: opens");
}

#[test]
fn an_empty_world_writable_file_is_not_used_as_a_store() {
    // The attack: another user leaves an empty 0666 file where the store will be.
    let (_dir, path) = location();
    std::fs::File::create(&path).unwrap();
    chmod(&path, 0o666);
    let err = open(&path).unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Permission, "{err}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "nothing was written to it");
}

#[test]
fn a_wal_or_shm_file_others_may_write_is_refused() {
    for suffix in ["-wal", "-shm"] {
        let (_dir, path) = location();
        drop(open(&path).unwrap());
        let planted = sibling(&path, suffix);
        std::fs::File::create(&planted).unwrap();
        chmod(&planted, 0o666);
        let err = open(&path).unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Permission, "{suffix}: {err}");
        assert!(err.to_string().contains(&format!("chmod 600 {}", planted.display())), "{err}");
    }
}

#[test]
fn a_store_in_a_directory_others_may_write_is_refused_unless_sticky() {
    let (_dir, path) = location();
    let shared = path.parent().unwrap();
    drop(open(&path).unwrap());
    chmod(shared, 0o777);
    let err = open(&path).unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Permission, "{err}");
    let text = err.to_string();
    assert!(text.contains(&format!("store directory {}", shared.display())) && text.contains("mode 0777"), "{text}");
    // Nothing is made where the store would be either.
    let fresh = shared.join("fresh.sqlite3");
    assert!(open(&fresh).is_err());
    assert!(!fresh.exists(), "no store made in a directory others may empty");
    chmod(shared, 0o1777);
    open(&path).expect("sticky: others may not remove it, opens");
    chmod(shared, 0o700);
}

#[test]
fn a_symlinked_wal_or_shm_sibling_is_refused() {
    for suffix in ["-wal", "-shm"] {
        let (dir, path) = location();
        drop(open(&path).unwrap());
        let planted = sibling(&path, suffix);
        let _ = std::fs::remove_file(&planted);
        // A private regular file of our own behind the link: only the link is wrong.
        let target = dir.path().join("elsewhere");
        std::fs::File::create(&target).unwrap();
        chmod(&target, 0o600);
        std::os::unix::fs::symlink(&target, &planted).unwrap();
        let err = open(&path).unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Permission, "{suffix}: {err}");
        assert!(err.to_string().contains(&format!("{} is a symbolic link", planted.display())), "{err}");
    }
}

#[test]
fn a_store_another_user_owns_is_refused_with_the_fix() {
    // The decision is a pure function of (owner, euid, mode), unit-tested in the crate;
    // here the real file, which needs root to give it away.
    if rustix::process::geteuid().as_raw() != 0 {
        eprintln!("*** not root: a_store_another_user_owns_is_refused_with_the_fix checks the mode rule only ***");
        return;
    }
    let (_dir, path) = location();
    drop(open(&path).unwrap());
    rustix::fs::chown(&path, Some(rustix::process::Uid::from_raw(65534)), None).unwrap();
    let err = open(&path).unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Permission, "{err}");
    let text = err.to_string();
    assert!(text.contains("owned by uid 65534") && text.contains(&format!("chown 0 {}", path.display())), "{text}");
    rustix::fs::chown(&path, Some(rustix::process::Uid::from_raw(0)), None).unwrap();
    open(&path).expect("owned again: opens");
}

#[test]
fn a_store_file_deleted_or_replaced_while_open_is_named() {
    let (dir, path) = location();
    let store = open(&path).unwrap();
    store.check_location().expect("the path names the file opened");
    let aside = dir.path().join("aside.sqlite3");
    std::fs::rename(&path, &aside).unwrap();
    let err = store.check_location().unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Replaced, "{err}");
    assert!(err.to_string().contains("it was deleted"), "{err}");
    std::fs::copy(&aside, &path).unwrap();
    let err = store.check_location().unwrap_err();
    assert!(err.to_string().contains("replaced by another file"), "{err}");
    std::fs::rename(&aside, &path).unwrap();
    store.check_location().expect("back at its path");
}
