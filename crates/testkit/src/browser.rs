//! A headless Chromium (Debian's `chromium` and `chromium-driver`) driven by
//! `tests/peers/browser_drive.py` (Selenium, in the workspace's `.venv`) over chromedriver:
//! the page tests' real browser. `scripts/install-peers` installs all three.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// One browser, its driver a child process speaking one JSON step a line.
#[derive(Debug)]
pub struct Browser {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Browser {
    /// Start the driver and its browser; panics, naming the install step, when one is missing.
    pub fn start() -> Self {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let python = root.join(".venv/bin/python");
        assert!(python.exists(), "{} is missing: run scripts/install-peers (scripts/test does)", python.display());
        for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
            assert!(Path::new(tool).exists(), "{tool} is missing: run scripts/install-peers (scripts/test does)");
        }
        let mut child = Command::new(python)
            .arg(root.join("tests/peers/browser_drive.py"))
            .env("SE_AVOID_STATS", "true")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut b = Self { child, stdin, stdout };
        let hello = b.read();
        assert_eq!(hello["ok"], true, "the browser did not start: {hello}");
        b
    }

    fn read(&mut self) -> serde_json::Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the browser driver ended");
        serde_json::from_str(&line).unwrap()
    }

    /// One step; a failed step fails the test, naming it.
    pub fn step(&mut self, step: serde_json::Value) -> serde_json::Value {
        writeln!(self.stdin, "{step}").unwrap();
        self.stdin.flush().unwrap();
        let answer = self.read();
        assert_eq!(answer["ok"], true, "{step}: {answer}");
        answer
    }

    /// Navigate to `url` (and wait for it to load).
    pub fn open(&mut self, url: &str) {
        self.step(serde_json::json!({ "op": "open", "url": url }));
    }

    /// The value of the script `js` (its `return`).
    pub fn eval(&mut self, js: &str) -> serde_json::Value {
        self.step(serde_json::json!({ "op": "eval", "js": js }))["value"].clone()
    }

    /// Poll `js` until truthy (bounded); the seconds it took.
    pub fn wait(&mut self, js: &str, timeout: f64) -> f64 {
        self.step(serde_json::json!({ "op": "wait", "js": js, "timeout": timeout }))["seconds"].as_f64().unwrap()
    }

    /// A PNG of the window to `path`.
    pub fn screenshot(&mut self, path: &Path) {
        self.step(serde_json::json!({ "op": "screenshot", "path": path }));
        assert!(std::fs::metadata(path).map(|m| m.len() > 1000).unwrap_or(false), "{} was not written", path.display());
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{{\"op\":\"quit\"}}");
        let _ = self.stdin.flush();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}
