//! The one way the tests start and talk to a gateway: the `gateway_fixture` example (the
//! real `serve` with the test policy), driven either with raw lines on its stdin
//! ([`RawGateway`]) or through the official Python MCP SDK client ([`PyClient`],
//! `tests/peers/mcp_drive.py`). Peers are installed by `scripts/install-peers`, run once
//! per test binary. Every wait is bounded.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// How long one answer may take before a test fails (a loaded 2-core CI machine starts
/// Python and Node slowly).
pub const ANSWER: Duration = Duration::from_secs(60);

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the workspace root exists")
}

/// Install the Python and npm peers (idempotent; fast when already installed).
pub fn peers() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let root = workspace_root();
        let status = Command::new(root.join("scripts/install-peers")).status().expect("scripts/install-peers runs");
        assert!(status.success(), "scripts/install-peers failed: {status}");
        root
    })
}

pub fn python() -> PathBuf {
    peers().join(".venv/bin/python")
}

pub fn mcp_server_git() -> PathBuf {
    peers().join(".venv/bin/mcp-server-git")
}

pub fn minimal_server() -> Vec<String> {
    vec![path_text(&python()), path_text(&peers().join("tests/peers/minimal_server.py"))]
}

pub fn server_everything() -> Vec<String> {
    let entry = peers().join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    vec!["node".to_owned(), path_text(&entry), "stdio".to_owned()]
}

pub fn path_text(path: &Path) -> String {
    path.to_str().expect("test paths are UTF-8").to_owned()
}

/// The fixture binary: `cargo test` builds examples next to the test binary's directory.
pub fn fixture() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary knows its path");
    let debug = exe.parent().and_then(Path::parent).expect("target/<profile>/deps/<test>");
    let fixture = debug.join("examples").join("gateway_fixture");
    assert!(fixture.exists(), "{} is missing: run the tests with `cargo test` (it builds examples)", fixture.display());
    fixture
}

/// The rmcp conformance fixture, a downstream built next to the gateway fixture.
pub fn conformance_fixture() -> PathBuf {
    let fixture = fixture().with_file_name("conformance_fixture");
    assert!(fixture.exists(), "{} is missing: run the tests with `cargo test` (it builds examples)", fixture.display());
    fixture
}

/// A test's state directory (the policy's flag file and event log).
pub struct State {
    pub dir: TempDir,
}

impl State {
    pub fn new() -> Self {
        Self { dir: tempfile::tempdir().expect("a temporary directory") }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn allow_mutations(&self) {
        std::fs::write(self.path().join("allow-mutations"), b"").expect("write the flag file");
    }

    pub fn events(&self) -> Vec<String> {
        std::fs::read_to_string(self.path().join("events.log")).unwrap_or_default().lines().map(str::to_owned).collect()
    }
}

/// Poll `check` every 20 ms until it holds or `within` passes.
pub fn wait_until(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `pid` is a live process (a zombie counts as gone).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}

fn spawn_lines(stream: impl std::io::Read + Send + 'static) -> Receiver<String> {
    spawn_pausable_lines(stream, Arc::default())
}

/// [`spawn_lines`] that reads nothing while `paused` holds (the pipe then fills up).
fn spawn_pausable_lines(stream: impl std::io::Read + Send + 'static, paused: Arc<AtomicBool>) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::with_capacity(4096, stream);
        loop {
            while paused.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if tx.send(line.trim_end_matches('\n').to_owned()).is_err() {
                return;
            }
        }
    });
    rx
}

/// The fixture with raw stdin/stdout.
pub struct RawGateway {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// While set, nothing reads the gateway's stdout.
    paused: Arc<AtomicBool>,
}

impl RawGateway {
    /// Start the fixture with `args` (before `--`) and an optional downstream argv.
    pub fn start(state: &State, args: &[&str], downstream: &[String]) -> Self {
        let mut command = Command::new(fixture());
        command.arg("--state").arg(state.path()).args(args);
        if !downstream.is_empty() {
            command.arg("--").args(downstream);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the fixture starts");
        let paused = Arc::new(AtomicBool::new(false));
        let lines = spawn_pausable_lines(child.stdout.take().expect("piped stdout"), paused.clone());
        Self { stdin: child.stdin.take(), child, lines, paused }
    }

    /// Stop reading the gateway's stdout (a client that does not read), or read again.
    pub fn pause_reading(&self, paused: bool) {
        self.paused.store(paused, Ordering::Release);
    }

    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(bytes).expect("write to the gateway");
        stdin.flush().expect("flush to the gateway");
    }

    pub fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).expect("serialise");
        line.push(b'\n');
        self.send_bytes(&line);
    }

    /// The next stdout line, parsed. Every line must be a JSON-RPC 2.0 object: stdout
    /// carries MCP frames only.
    pub fn next(&mut self, within: Duration) -> Option<Value> {
        match self.lines.recv_timeout(within) {
            Ok(line) => {
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {line:?}"));
                assert_eq!(value["jsonrpc"], "2.0", "stdout carried a non-JSON-RPC frame: {line}");
                Some(value)
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => None,
        }
    }

    /// The next frame that is not a notification.
    pub fn answer(&mut self) -> Value {
        let deadline = Instant::now() + ANSWER;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let frame = self.next(left).expect("the gateway answered in time");
            if frame.get("method").is_none() {
                return frame;
            }
        }
    }

    /// Send a request and wait for the answer with its id (other answers are kept out).
    pub fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let answer = self.answer();
        assert_eq!(answer["id"], json!(id), "answers come in order here: {answer}");
        answer
    }

    pub fn initialize(&mut self) -> Value {
        self.initialize_with(json!({}))
    }

    /// `initialize` declaring `capabilities` (and `notifications/initialized`); the answer.
    pub fn initialize_with(&mut self, capabilities: Value) -> Value {
        let answer = self.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
                "clientInfo": {"name": "raw-test", "version": "9.9"}}),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        answer
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Wait for the process to exit; its status code.
    pub fn exit_code(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code();
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").arg(format!("-{signal}")).arg(self.child.id().to_string()).status();
        assert!(status.is_ok_and(|s| s.success()), "kill -{signal} worked");
    }
}

impl Drop for RawGateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Python SDK client driving the fixture (`tests/peers/mcp_drive.py`).
pub struct PyClient {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// The gateway's `initialize` result as the SDK parsed it.
    pub init: Value,
}

impl PyClient {
    pub fn start(state: &State, args: &[&str], downstream: &[String]) -> Self {
        let mut command = Command::new(python());
        command
            .arg(peers().join("tests/peers/mcp_drive.py"))
            .arg(fixture())
            .arg("--state")
            .arg(state.path())
            .args(args);
        if !downstream.is_empty() {
            command.arg("--").args(downstream);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the Python driver starts");
        let lines = spawn_lines(child.stdout.take().expect("piped stdout"));
        let mut client = Self { stdin: child.stdin.take(), child, lines, init: Value::Null };
        let init = client.read();
        assert_eq!(init["ok"], true, "initialize through the gateway failed: {init}");
        client.init = init["result"].clone();
        client
    }

    fn read(&mut self) -> Value {
        let line = self.lines.recv_timeout(ANSWER).expect("the Python driver answered in time");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("driver printed a non-JSON line ({e}): {line}"))
    }

    /// Run one step; the driver's `{"ok", "result" | "error"}`.
    pub fn step(&mut self, step: Value) -> Value {
        let stdin = self.stdin.as_mut().expect("driver stdin open");
        writeln!(stdin, "{step}").expect("write a step");
        stdin.flush().expect("flush a step");
        self.read()
    }

    /// Run a step that must succeed; its result.
    pub fn ok(&mut self, step: Value) -> Value {
        let answer = self.step(step.clone());
        assert_eq!(answer["ok"], true, "{step} failed: {answer}");
        answer["result"].clone()
    }

    pub fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.ok(json!({"op": "call_tool", "name": name, "arguments": arguments}))
    }

    /// Close the session (stdin EOF to the driver, which closes the gateway's stdin) and
    /// wait for the driver to exit.
    pub fn finish(mut self) {
        self.stdin.take();
        let deadline = Instant::now() + ANSWER;
        while self.child.try_wait().expect("try_wait").is_none() {
            assert!(Instant::now() < deadline, "the Python driver did not exit after stdin EOF");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for PyClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text of a tool result's first content block.
pub fn text(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text content in {result}")).to_owned()
}

/// A tool of a `tools/list` result, by name.
pub fn tool<'a>(listed: &'a Value, name: &str) -> Option<&'a Value> {
    listed["tools"].as_array()?.iter().find(|t| t["name"] == name)
}
