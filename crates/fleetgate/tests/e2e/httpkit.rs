//! The HTTP side of the e2e tests: `fleetgate serve --transport http` as a process, and a
//! small keep-alive client for raw requests (stateless 2026-07-28 ones, batches, limits).

use crate::support::{FleetDir, bin, wait_until};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// One `fleetgate serve --transport http` process, its stderr in a file.
pub struct HttpGateway {
    pub child: Child,
    pub stderr: PathBuf,
    pub addr: String,
}

impl HttpGateway {
    pub fn start(f: &FleetDir, token: Option<&str>, downstream: &[&str]) -> Self {
        Self::start_logging(f, token, downstream, "debug")
    }

    /// [`start`](Self::start) with another log filter (`info` for tests that send many
    /// requests).
    pub fn start_logging(f: &FleetDir, token: Option<&str>, downstream: &[&str], log: &str) -> Self {
        Self::start_with_env(f, token, downstream, log, &[])
    }

    /// [`start_logging`](Self::start_logging) with more `KEY=value` pairs in its environment.
    pub fn start_with_env(
        f: &FleetDir,
        token: Option<&str>,
        downstream: &[&str],
        log: &str,
        env: &[(&str, &str)],
    ) -> Self {
        Self::start_at(f, "127.0.0.1:0", token, downstream, log, env)
    }

    /// [`start_with_env`](Self::start_with_env) listening on `listen` (a port chosen before
    /// the gateway starts, when its URL must be known in its configuration).
    pub fn start_at(
        f: &FleetDir,
        listen: &str,
        token: Option<&str>,
        downstream: &[&str],
        log: &str,
        env: &[(&str, &str)],
    ) -> Self {
        Self::start_as(f, "prgs-author", listen, token, downstream, log, env)
    }

    /// [`start_at`](Self::start_at) serving `profile`.
    pub fn start_as(
        f: &FleetDir,
        profile: &str,
        listen: &str,
        token: Option<&str>,
        downstream: &[&str],
        log: &str,
        env: &[(&str, &str)],
    ) -> Self {
        let stderr = f.dir.path().join("gateway.stderr");
        let mut cmd = Command::new(bin());
        cmd.env_clear()
            .env("GITEA_CLIENT_MANAGED", "1")
            .env("GITEA_MCP_COHORT_ID", "fleet-http")
            .env("FLEETGATE_LOG", log)
            .arg("--store")
            .arg(f.store())
            .arg("--config")
            .arg(f.config())
            .args(["serve", "--profile", profile, "--transport", "http", "--listen", listen])
            .arg("--repo-root")
            .arg(f.repo());
        if let Some(token) = token {
            cmd.env("FLEETGATE_HTTP_TOKEN", token);
        }
        cmd.envs(env.iter().copied());
        if !downstream.is_empty() {
            cmd.arg("--").args(downstream);
        }
        Self::spawned(cmd, stderr)
    }

    /// `cmd` started with its stderr in `stderr`, once it reports the address it listens on.
    fn spawned(mut cmd: Command, stderr: PathBuf) -> Self {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let mut g = Self { child, stderr, addr: String::new() };
        let mut addr = None;
        let found = wait_until(30.0, || {
            addr = g
                .log()
                .lines()
                .find_map(|l| l.strip_prefix("fleetgate serve: listening on http://"))
                .map(|a| a.trim_end_matches("/mcp").to_owned());
            addr.is_some()
        });
        assert!(found, "the gateway did not report its address: {}", g.log());
        g.addr = addr.unwrap();
        g
    }

    /// Replica `n` of `profile` behind a load balancer at `balancer` (its `Host` accepted),
    /// logging to a file of its own.
    pub fn replica(f: &FleetDir, profile: &str, n: usize, balancer: &str, token: &str, downstream: &[String]) -> Self {
        let stderr = f.dir.path().join(format!("{profile}-{n}.stderr"));
        let mut cmd = Command::new(bin());
        cmd.env_clear()
            .env("GITEA_CLIENT_MANAGED", "1")
            .env("GITEA_MCP_COHORT_ID", "flow-a")
            .env("FLEETGATE_LOG", "info")
            .env("FLEETGATE_HTTP_TOKEN", token)
            .arg("--store")
            .arg(f.store_arg())
            .arg("--config")
            .arg(f.config())
            .args(["serve", "--profile", profile, "--transport", "http", "--listen", "127.0.0.1:0"])
            .args(["--allowed-host", balancer])
            .arg("--repo-root")
            .arg(f.repo())
            .arg("--")
            .args(downstream);
        Self::spawned(cmd, stderr)
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// SIGTERM (through kill(1): the tests reach no signal API themselves) and wait.
    pub fn stop(mut self) {
        let ok = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status().unwrap();
        assert!(ok.success());
        assert!(wait_until(15.0, || self.child.try_wait().unwrap().is_some()), "the gateway did not stop on SIGTERM");
        assert!(self.child.try_wait().unwrap().unwrap().success(), "exit status: {}", self.log());
    }
}

impl Drop for HttpGateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The headers a stateless (2026-07-28) request carries.
pub const STATELESS: &str = "2026-07-28";

/// A keep-alive HTTP client for raw requests to one gateway.
pub struct Raw {
    agent: ureq::Agent,
    url: String,
}

/// One raw answer: the status and the JSON-RPC message of the body (an SSE body's first
/// `data:` line), `Value::Null` when there is none.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    /// The `Mcp-Session-Id` the answer names (an answered `initialize`).
    pub session: Option<String>,
}

impl Raw {
    pub fn new(g: &HttpGateway) -> Self {
        let config = ureq::Agent::config_builder().http_status_as_error(false).build();
        Self { agent: config.into(), url: g.url() }
    }

    /// POST `message` with `headers`.
    pub fn post(&self, message: &Value, headers: &[(&str, &str)]) -> Answer {
        let mut request = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let mut response = request.send(message.to_string()).expect("the gateway answers");
        let status = response.status().as_u16();
        let session = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let text = response.body_mut().read_to_string().unwrap_or_default();
        let json = text
            .lines()
            .find_map(|l| l.strip_prefix("data: ").filter(|d| d.starts_with('{')))
            .map_or_else(|| serde_json::from_str(&text).unwrap_or(Value::Null), |d| serde_json::from_str(d).unwrap());
        Answer { status, body: json, session }
    }

    /// A stateless 2026-07-28 request of `method` from the client `name`, with `token`.
    pub fn stateless(&self, id: u64, method: &str, params: Value, name: &str, token: Option<&str>) -> Answer {
        let mut params = params;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientInfo": { "name": name, "version": "1.0" },
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        let message = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let bearer = token.map(|t| format!("Bearer {t}"));
        let tool = params.get("name").and_then(Value::as_str).map(str::to_owned);
        let mut headers = vec![("MCP-Protocol-Version", STATELESS), ("Mcp-Method", method)];
        if let Some(tool) = tool.as_deref() {
            headers.push(("Mcp-Name", tool));
        }
        if let Some(bearer) = bearer.as_deref() {
            headers.push(("Authorization", bearer));
        }
        self.post(&message, &headers)
    }

    /// A 2025-11-25 `initialize` (a new session), with `token`.
    pub fn initialize(&self, name: &str, token: Option<&str>) -> Answer {
        let message = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": name, "version": "1" } } });
        let bearer = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = bearer.as_deref().map(|b| vec![("Authorization", b)]).unwrap_or_default();
        self.post(&message, &headers)
    }
}

/// `fleetgate serve --transport http` that is expected to refuse to start: its exit code
/// and stderr.
pub fn refused_start(f: &FleetDir, env: &[(&str, &str)], extra: &[&str]) -> (Option<i32>, String) {
    let mut cmd = Command::new(bin());
    cmd.env_clear().arg("--store").arg(f.store()).arg("--config").arg(f.config());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.args(["serve", "--profile", "prgs-author", "--transport", "http"]).args(extra);
    let stderr = f.dir.path().join("refused.stderr");
    let mut child =
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(std::fs::File::create(&stderr).unwrap()).spawn().unwrap();
    // A gateway that starts after all must fail the test, not hang it.
    let ended = wait_until(20.0, || child.try_wait().unwrap().is_some());
    if !ended {
        let _ = child.kill();
    }
    let code = child.wait().unwrap().code();
    assert!(ended, "the gateway started instead of refusing: {}", std::fs::read_to_string(&stderr).unwrap_or_default());
    (code, std::fs::read_to_string(&stderr).unwrap_or_default())
}

/// Poll until `wait_until` says so, with a message.
pub fn eventually(what: &str, secs: f64, cond: impl FnMut() -> bool) {
    assert!(wait_until(secs, cond), "{what}: not within {secs} s");
}

/// One raw HTTP/1.1 connection, kept alive across requests: for tests about connections
/// themselves (timeouts, the cap), where a pooled client would hide which one is used.
pub struct Conn {
    pub stream: std::net::TcpStream,
    addr: String,
}

/// One response read off a [`Conn`]: the status, the headers (names lower-cased) and the
/// body (chunked bodies decoded).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message of the body (an SSE body's first `data:` line), `Null` if none.
    pub fn json(&self) -> Value {
        self.body.lines().find_map(|l| l.strip_prefix("data: ").filter(|d| d.starts_with('{'))).map_or_else(
            || serde_json::from_str(&self.body).unwrap_or(Value::Null),
            |d| serde_json::from_str(d).unwrap(),
        )
    }
}

impl Conn {
    pub fn open(addr: &str) -> Self {
        let stream = std::net::TcpStream::connect(addr).expect("the gateway accepts the connection");
        stream.set_read_timeout(Some(std::time::Duration::from_secs(20))).unwrap();
        Self { stream, addr: addr.to_owned() }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        use std::io::Write;
        self.stream.write_all(bytes).unwrap();
    }

    /// Send one request of `method` to `/mcp` with `headers` and `body`.
    pub fn send(&mut self, method: &str, headers: &[(&str, &str)], body: &str) {
        let mut request = format!(
            "{method} /mcp HTTP/1.1\r\nHost: {}\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        if !body.is_empty() && !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type")) {
            request.push_str("Content-Type: application/json\r\n");
        }
        for (k, v) in headers {
            request.push_str(&format!("{k}: {v}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        self.send_raw(request.as_bytes());
    }

    /// Send a request and read its whole response.
    pub fn request(&mut self, method: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        self.send(method, headers, body);
        self.read_reply()
    }

    /// Read one response head, and the body it announces (`Content-Length` or chunked).
    pub fn read_reply(&mut self) -> Reply {
        let head = self.read_head();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let status = status_line.get(9..12).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{status_line:?}"));
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let find = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let body = if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            let mut body = Vec::new();
            loop {
                let size = usize::from_str_radix(self.read_line().trim(), 16).expect("a chunk size");
                let chunk = self.read_exact(size + 2);
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
            body
        } else {
            let length = find("content-length").map_or(0, |v| v.parse().unwrap());
            self.read_exact(length)
        };
        Reply { status, headers, body: String::from_utf8_lossy(&body).into_owned() }
    }

    fn read_exact(&mut self, n: usize) -> Vec<u8> {
        use std::io::Read;
        let mut bytes = vec![0; n];
        self.stream.read_exact(&mut bytes).expect("the whole body");
        bytes
    }

    fn read_line(&mut self) -> String {
        let mut line = Vec::new();
        while !line.ends_with(b"\r\n") {
            line.extend(self.read_exact(1));
        }
        String::from_utf8_lossy(&line).into_owned()
    }

    /// Read one response head (alone: an event stream's, whose body does not end).
    pub fn read_head(&mut self) -> String {
        let mut head = String::new();
        loop {
            let line = self.read_line();
            if line == "\r\n" {
                return head;
            }
            head.push_str(&line);
        }
    }

    /// Whether the gateway closed this connection within `secs`: a read sees EOF (or a
    /// reset) rather than waiting. Bytes that arrive meanwhile are skipped.
    pub fn closed_within(&mut self, secs: f64) -> bool {
        use std::io::Read;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
        let mut buf = [0_u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    return false;
                }
                Err(_) => return true,
            }
        }
    }
}

/// A 2025-11-25 `initialize` and `notifications/initialized` on `conn`: the session id.
pub fn open_session(conn: &mut Conn, headers: &[(&str, &str)]) -> String {
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "raw", "version": "1" } } });
    let reply = conn.request("POST", headers, &init.to_string());
    assert_eq!(reply.status, 200, "{reply:?}");
    let session = reply.header("mcp-session-id").expect("a session id").to_owned();
    let mut with_session = headers.to_vec();
    with_session.push(("Mcp-Session-Id", session.as_str()));
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    let reply = conn.request("POST", &with_session, &initialized.to_string());
    assert_eq!(reply.status, 202, "{reply:?}");
    session
}
