//! A real `fleetgate serve` over stdio, driven with raw JSON-RPC lines (the tests that need
//! a request's exact `_meta`, or the process's stderr).

use crate::support::wait_until;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};

pub struct StdioGateway {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next: u64,
    /// Where its stderr goes (`None`: dropped).
    pub stderr: Option<PathBuf>,
}

impl StdioGateway {
    /// `/usr/bin/env ARGV…` (a `serve_argv`), stderr dropped, initialised.
    pub fn start(argv: &[String]) -> Self {
        Self::start_logging(argv, None)
    }

    /// `/usr/bin/env ARGV…`, its stderr written to `stderr`, initialised.
    pub fn start_logging(argv: &[String], stderr: Option<&Path>) -> Self {
        let err = match stderr {
            Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
            None => Stdio::null(),
        };
        let mut child = Command::new("/usr/bin/env")
            .args(argv)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .unwrap();
        let (stdin, stdout) = (child.stdin.take(), BufReader::new(child.stdout.take().unwrap()));
        let mut g = Self { child, stdin, stdout, next: 1, stderr: stderr.map(Path::to_path_buf) };
        let init = g.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}),
        );
        assert!(init.get("result").is_some(), "{init}");
        g.notify("notifications/initialized");
        g
    }

    fn notify(&mut self, method: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": method})).unwrap();
        stdin.flush().unwrap();
    }

    /// Send one request and read lines until its answer.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).unwrap();
        stdin.flush().unwrap();
        loop {
            let mut line = String::new();
            assert!(self.stdout.read_line(&mut line).unwrap() > 0, "the gateway ended");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    /// A control tool's structured answer.
    pub fn control(&mut self, name: &str, arguments: Value) -> Value {
        let answer = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        answer["result"]["structuredContent"].clone()
    }

    /// The process's pid (`/usr/bin/env` execs the command, so the command's).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its stderr so far.
    pub fn log(&self) -> String {
        self.stderr.as_ref().map(|p| std::fs::read_to_string(p).unwrap_or_default()).unwrap_or_default()
    }

    /// The first line of stderr starting with `prefix`, the rest of it (polled, bounded).
    pub fn logged(&self, prefix: &str) -> String {
        let mut found = None;
        wait_until(30.0, || {
            found = self.log().lines().find_map(|l| l.strip_prefix(prefix)).map(str::to_owned);
            found.is_some()
        });
        found.unwrap_or_else(|| panic!("no {prefix:?} on stderr: {}", self.log()))
    }

    /// The orderly end: stdin EOF, then its exit status (bounded).
    pub fn stop(mut self) -> ExitStatus {
        drop(self.stdin.take());
        let mut status = None;
        let ended = wait_until(15.0, || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        assert!(ended, "the gateway did not stop on stdin EOF: {}", self.log());
        status.unwrap()
    }
}

impl Drop for StdioGateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
