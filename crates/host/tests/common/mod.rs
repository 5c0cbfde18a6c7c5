//! Shared by the source-boundary tests: every `.rs` file below a directory.

use std::path::{Path, PathBuf};

/// Every `.rs` file below `dir` (nothing when it does not exist).
pub fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
