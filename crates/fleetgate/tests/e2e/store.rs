//! The store deleted or replaced under a real `fleetgate serve` (issue 18 item 6): the
//! gateway refuses every mutating call `store_replaced` and says so on its runtime
//! context, until the file it opened is back. Driven over raw stdio JSON-RPC lines.

use crate::support::{FleetDir, roster, serial, spawn_env};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

pub(crate) struct Raw {
    pub(crate) child_pid: u32,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Raw {
    pub(crate) fn start(argv: &[String]) -> Self {
        let mut child = spawn_env(argv, Stdio::piped());
        let (stdin, stdout) = (child.stdin.take().unwrap(), BufReader::new(child.stdout.take().unwrap()));
        let mut raw = Self { child_pid: child.id(), child, stdin, stdout, next: 1 };
        let init = raw.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}),
        );
        assert!(init.get("result").is_some(), "{init}");
        writeln!(raw.stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
        raw
    }

    /// Send one request and read lines until its answer.
    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        writeln!(self.stdin, "{}", json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).unwrap();
        self.stdin.flush().unwrap();
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
    pub(crate) fn control(&mut self, name: &str, arguments: Value) -> Value {
        let answer = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        answer["result"]["structuredContent"].clone()
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_store_deleted_or_replaced_under_a_serving_gateway_refuses_mutations() {
    let _serial = serial();
    let f = FleetDir::new(&roster("store-replaced", &["author"], ""));
    let mut g = Raw::start(&f.serve_argv("prgs-author", "c", &[]));
    let gate = |g: &mut Raw| g.control("gitea_resolve_task_capability", json!({"tool": "git_add"}));
    let health = |g: &mut Raw| g.control("gitea_get_runtime_context", json!({}))["store_health"].clone();
    assert_eq!(health(&mut g)["ok"], true);
    assert_ne!(gate(&mut g)["blocker_kind"], "store_replaced");

    // `rm` of the store: the next CLI call would make a fresh one at the path.
    let aside = f.dir.path().join("aside.sqlite3");
    std::fs::rename(f.store(), &aside).unwrap();
    let verdict = gate(&mut g);
    assert_eq!((verdict["allowed"].clone(), verdict["blocker_kind"].clone()), (json!(false), json!("store_replaced")));
    assert!(verdict["blocked_reasons"].to_string().contains("it was deleted"), "{verdict}");
    let h = health(&mut g);
    assert_eq!((h["ok"].clone(), h["blocker_kind"].clone()), (json!(false), json!("store_replaced")), "{h}");

    // Another file at the path.
    std::fs::copy(&aside, f.store()).unwrap();
    assert!(gate(&mut g)["blocked_reasons"].to_string().contains("replaced by another file"));

    // The file it opened, back: decided as before.
    std::fs::rename(&aside, f.store()).unwrap();
    assert_ne!(gate(&mut g)["blocker_kind"], "store_replaced");
    assert_eq!(health(&mut g)["ok"], true);
}
