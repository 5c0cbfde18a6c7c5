//! `fleetgate doctor` through the real binary, on real-format configuration
//! trees (`tests/fixtures/doctor/<client>/{home,project}`) copied into a
//! temporary directory, with a PATH that holds fleetgate and stand-ins for
//! the commands the fixtures launch.

mod fix;
mod report;
mod workflows;

use crate::support::{bin, json_of};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Every per-client fixture tree.
pub const CLIENTS: [&str; 6] = ["claude-code", "claude-desktop", "gemini", "codex", "cursor", "vscode"];

/// The commands the fixtures launch that a machine is expected to have.
const STAND_INS: [&str; 4] = ["python3", "uvx", "npx", "node"];

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/doctor")
}

/// A fixture copied into a temporary directory.
pub struct Tree {
    pub dir: tempfile::TempDir,
    pub home: PathBuf,
    pub project: PathBuf,
    pub bin: PathBuf,
}

fn copy_dir(from: &Path, to: &Path, project: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target, project);
        } else {
            // Claude Code keys its local scope by the project's absolute path.
            let text = std::fs::read_to_string(entry.path()).unwrap();
            std::fs::write(&target, text.replace("@PROJECT@", project.to_str().unwrap())).unwrap();
        }
    }
}

/// Copy `fixtures/doctor/<name>` (absent halves are created empty).
pub fn tree(name: &str) -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let (home, project, bin) = (dir.path().join("home"), dir.path().join("project"), dir.path().join("bin"));
    for (half, to) in [("home", &home), ("project", &project)] {
        let from = fixtures().join(name).join(half);
        if from.is_dir() {
            copy_dir(&from, to, &project);
        } else {
            std::fs::create_dir_all(to).unwrap();
        }
    }
    std::fs::create_dir_all(&bin).unwrap();
    // The roster at the default path of the tree's own XDG_CONFIG_HOME, so the repairs'
    // wrappers need no `--config` (a roster elsewhere: `fix::a_roster_off_the_default_path…`).
    let roster = dir.path().join("xdg/fleetgate/fleet.toml");
    std::fs::create_dir_all(roster.parent().unwrap()).unwrap();
    std::fs::copy(fixtures().join("fleet.toml"), &roster).unwrap();
    for name in STAND_INS {
        let path = bin.join(name);
        std::fs::write(&path, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    Tree { dir, home, project, bin }
}

impl Tree {
    /// `fleetgate --config fleet.toml doctor --home H --project P ARGS…`, the roster at the
    /// default path.
    pub fn command(&self, args: &[&str]) -> Command {
        self.command_with(&self.dir.path().join("xdg/fleetgate/fleet.toml"), args)
    }

    /// As [`Tree::command`], the roster read from `roster`.
    pub fn command_with(&self, roster: &Path, args: &[&str]) -> Command {
        let fleetgate_dir = bin().parent().unwrap().to_owned();
        let mut cmd = Command::new(bin());
        cmd.env_clear()
            .env("PATH", format!("{}:{}", self.bin.display(), fleetgate_dir.display()))
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.dir.path().join("xdg"))
            .current_dir(self.dir.path())
            .arg("--config")
            .arg(roster)
            .arg("doctor")
            .arg("--home")
            .arg(&self.home)
            .arg("--project")
            .arg(&self.project)
            .args(args);
        cmd
    }

    pub fn doctor(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run fleetgate doctor")
    }

    /// Every file under the tree's home and project, with its bytes.
    pub fn files(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, out);
                } else {
                    out.insert(path.clone(), std::fs::read(&path).unwrap());
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(&self.home, &mut out);
        walk(&self.project, &mut out);
        out
    }

    /// `text` with the tree's paths replaced by `$HOME` and `$PROJECT`.
    pub fn normalize(&self, text: &str) -> String {
        text.replace(self.project.to_str().unwrap(), "$PROJECT").replace(self.home.to_str().unwrap(), "$HOME")
    }
}

pub fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `(kind, profile)` of every finding in a JSON report, sorted.
pub fn kinds(report: &serde_json::Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["kind"].as_str().unwrap().to_owned(), f["profile"].as_str().unwrap_or("-").to_owned()))
        .collect();
    out.sort();
    out
}

/// Run and parse, asserting the exit code.
pub fn json(tree: &Tree, args: &[&str], exit: i32) -> serde_json::Value {
    let out = tree.doctor(args);
    assert_eq!(code(&out), Some(exit), "{args:?}: {}\n{}", stderr(&out), String::from_utf8_lossy(&out.stdout));
    json_of(&out)
}
