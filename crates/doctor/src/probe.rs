//! What the doctor reads off the machine: which file a command names on a PATH, whether a
//! wrapper's command is fleetgate's own binary, a client's file read and parsed. The shell's
//! side of the survey; the judgement (`findings::classify`) stays pure.

use crate::findings::FileState;
use crate::read::{self, FileError};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Whether `command` names an executable: an absolute path, or a name found
/// in one of `path`'s directories.
pub fn on_path(command: &str, path: &str) -> bool {
    resolve(command, path).is_some()
}

/// The file `command` names: an absolute path, or the first executable of
/// that name in one of `path`'s directories.
pub fn resolve(command: &str, path: &str) -> Option<PathBuf> {
    let executable = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if Path::new(command).is_absolute() {
        return executable(Path::new(command)).then(|| PathBuf::from(command));
    }
    path.split(':').filter(|d| !d.is_empty()).map(|d| Path::new(d).join(command)).find(|p| executable(p))
}

/// Device and inode of fleetgate's binaries: this process's own executable
/// and the `fleetgate` that `path` resolves to (symlinks followed).
pub fn fleetgate_binaries(path: &str) -> Vec<(u64, u64)> {
    let current = std::env::current_exe().ok();
    [current, resolve("fleetgate", path)]
        .into_iter()
        .flatten()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect()
}

/// Whether a wrapper's `command` is fleetgate's binary: the bare name
/// `fleetgate` (the client resolves it through the user's own PATH, as the
/// doctor's own repairs write it), or an absolute path to the same file
/// (device and inode, symlinks followed) as this doctor's executable or as
/// the `fleetgate` on PATH. A relative path (`.devtools/fleetgate`, resolved
/// against whatever directory the client runs in), a variable, or any other
/// file is not.
pub fn is_fleetgate(command: &str, binaries: &[(u64, u64)]) -> bool {
    command == "fleetgate"
        || (Path::new(command).is_absolute()
            && std::fs::metadata(command).is_ok_and(|m| binaries.contains(&(m.dev(), m.ino()))))
}

/// A client's file: absent, unreadable, not UTF-8 (where), or parsed; and its bytes.
pub fn read_file(
    path: &Path,
    parse: impl Fn(&str) -> Result<read::ParsedFile, FileError>,
) -> (FileState, Option<Vec<u8>>) {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (FileState::Absent, None),
        Err(e) => {
            return (
                FileState::Failed(FileError { line: 1, column: 1, message: format!("cannot read it: {e}") }),
                None,
            );
        }
    };
    let state = match std::str::from_utf8(&bytes) {
        Ok(text) => parse(text).map_or_else(FileState::Failed, FileState::Parsed),
        Err(e) => {
            let valid = String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned();
            let (line, column) = read::line_col(&valid, valid.len());
            FileState::Failed(FileError { line, column, message: "not utf-8".into() })
        }
    };
    (state, Some(bytes))
}

#[cfg(test)]
mod tests {
    use super::{fleetgate_binaries, is_fleetgate};

    /// Fleetgate's binary is a file, not a name: the same device and inode as this
    /// executable (through a link too); a copy, a relative path or a variable is not.
    #[test]
    fn fleetgate_binary_is_judged_by_device_and_inode() {
        let exe = std::env::current_exe().unwrap();
        let binaries = fleetgate_binaries("");
        let dir = tempfile::tempdir().unwrap();
        let (link, copy) = (dir.path().join("fleetgate"), dir.path().join("copy/fleetgate"));
        std::os::unix::fs::symlink(&exe, &link).unwrap();
        std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
        std::fs::copy(&exe, &copy).unwrap();
        assert!(is_fleetgate(exe.to_str().unwrap(), &binaries));
        assert!(is_fleetgate(link.to_str().unwrap(), &binaries));
        assert!(is_fleetgate("fleetgate", &binaries), "the name, resolved by the user's own PATH");
        assert!(!is_fleetgate(copy.to_str().unwrap(), &binaries), "another file, though the same bytes");
        assert!(!is_fleetgate(".devtools/fleetgate", &binaries));
        assert!(!is_fleetgate("${workspaceFolder}/fleetgate", &binaries));
        let on_path = fleetgate_binaries(copy.parent().unwrap().to_str().unwrap());
        assert!(is_fleetgate(copy.to_str().unwrap(), &on_path), "PATH's fleetgate is fleetgate's binary");
    }
}
