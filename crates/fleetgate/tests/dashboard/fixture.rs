//! The fixtures the dashboard's tests and its benchmark share (the benchmark includes this
//! file by path): a fleet on an island, a small HTTP/1.1 client, and the Chromium driver.
//!
//! Why an island: every `fleetgate … serve` on a host is a fleet process to every
//! inventory on that host, so other people's gateways would close the gate. In a PID
//! namespace with its own `/proc` (`unshare --pid --fork --mount-proc`, as root), the
//! dashboard observes exactly the members spawned here; the network is shared, so a
//! browser reaches it on loopback.

use std::io::{BufRead, BufReader, Read, Write};

pub use fleetgate_testkit::browser::Browser;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The revision every island member's row records.
pub const HEAD: &str = "82d71b77028a7abd4f8ab4a4e4d89658a187f73d";
const ROLES: [&str; 5] = ["author", "reviewer", "merger", "controller", "reconciler"];

pub fn wait_until(secs: f64, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cond()
}

/// Member `i` (1-based): the five prgs roles first, then `m<i>`.
pub fn member(i: usize) -> (String, String, String) {
    match ROLES.get(i - 1) {
        Some(role) => (format!("gitea-{role}"), format!("prgs-{role}"), (*role).to_owned()),
        None => (format!("fleet-m{i}"), format!("prgs-m{i}"), "member".to_owned()),
    }
}

/// A roster of `n` members whose processes carry `marker`.
pub fn roster(marker: &str, n: usize) -> String {
    // A forge dialect, so the page has the keyword note to show.
    let mut out = format!("[fleet]\nname = \"island\"\nforge = \"gitea-mcp\"\nprocess_match = [\"{marker}\"]\n");
    for i in 1..=n {
        let (namespace, profile, role) = member(i);
        out.push_str(&format!(
            "\n[[members]]\nnamespace = \"{namespace}\"\nprofile = \"{profile}\"\nrole = \"{role}\"\n"
        ));
    }
    out
}

/// Reads a child's stderr on a thread: returns the dashboard's address once it prints its
/// listening line; everything is kept for assertions and echoed for a failing test's log.
/// The line `watch_stderr` ends the log with once the process's stderr is closed: after it,
/// the log holds everything the process wrote.
pub const STDERR_CLOSED: &str = "(stderr closed)\n";

pub fn watch_stderr(stderr: impl Read + Send + 'static) -> (std::sync::mpsc::Receiver<SocketAddr>, Arc<Mutex<String>>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let log = Arc::new(Mutex::new(String::new()));
    let kept = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[dashboard] {line}");
            // Logged before the address is announced: a test that got the address finds
            // the line in the log.
            kept.lock().unwrap().push_str(&format!("{line}\n"));
            if let Some(rest) = line.strip_prefix("fleetgate dashboard: listening on http://") {
                let _ = tx.send(rest.trim_end_matches('/').parse().unwrap());
            }
        }
        kept.lock().unwrap().push_str(STDERR_CLOSED);
    });
    (rx, log)
}

/// A fleet of `n` sleeping members and the dashboard, alone in a PID namespace.
pub struct Island {
    pub dir: tempfile::TempDir,
    pub marker: String,
    pub addr: SocketAddr,
    fleetgate: PathBuf,
    _log: Arc<Mutex<String>>,
    child: Child,
}

const ISLAND: &str = r#"
i=0
while [ "$i" -lt "$FLEET_MEMBERS" ]; do
  i=$((i + 1))
  (exec -a "$FLEET_MARKER-$i" sleep 86400) &
done
"$FLEETGATE" --store "$FLEET_STORE" --config "$FLEET_CONFIG" dashboard "$@" &
wait
"#;

impl Island {
    /// Start `n` members (unregistered) and `FLEETGATE dashboard --listen 127.0.0.1:0 ARGS…`.
    pub fn start(fleetgate: &Path, n: usize, args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let marker = format!("fgdash-{:016x}", fleetgate_host::nonce() as u64);
        std::fs::write(dir.path().join("fleet.toml"), roster(&marker, n)).unwrap();
        // The marker reaches the script through the environment only: a command line
        // carrying it would itself be a fleet process.
        let mut child = Command::new("unshare")
            .args(["--pid", "--fork", "--mount-proc", "--kill-child", "bash", "-c", ISLAND, "island"])
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("FLEET_MEMBERS", n.to_string())
            .env("FLEET_MARKER", &marker)
            .env("FLEETGATE", fleetgate)
            .env("FLEET_STORE", dir.path().join("registry.sqlite3"))
            .env("FLEET_CONFIG", dir.path().join("fleet.toml"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("unshare (util-linux) runs the island");
        let (addr, log) = watch_stderr(child.stderr.take().unwrap());
        let addr = addr
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("the island's dashboard did not start (is unshare --pid allowed here?)"));
        let island = Self { dir, marker, addr, fleetgate: fleetgate.to_owned(), _log: log, child };
        assert!(wait_until(30.0, || island.pids().len() == n), "the island's members did not start");
        island
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `fleetgate --store … --config …` + args, from outside the island.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(&self.fleetgate)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .arg("--store")
            .arg(self.dir.path().join("registry.sqlite3"))
            .arg("--config")
            .arg(self.dir.path().join("fleet.toml"))
            .args(args)
            .output()
            .unwrap()
    }

    /// The island's store, opened from outside (a test or bench acting as a gateway would).
    pub fn store(&self) -> Arc<dyn fleetgate_store::Store> {
        fleetgate_store::open(self.dir.path().join("registry.sqlite3").to_str().unwrap()).unwrap()
    }

    /// Member index → (pid on this host, pid inside the island).
    pub fn pids(&self) -> std::collections::BTreeMap<usize, (i64, i64)> {
        let prefix = format!("{}-", self.marker);
        let mut out = std::collections::BTreeMap::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i64>() else { continue };
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
            let argv0 = String::from_utf8_lossy(cmdline.split(|b| *b == 0).next().unwrap_or_default()).into_owned();
            let Some(i) = argv0.strip_prefix(&prefix).and_then(|i| i.parse().ok()) else { continue };
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let inner = status.lines().find_map(|l| l.strip_prefix("NSpid:")).and_then(|l| l.split_whitespace().last());
            if let Some(inner) = inner.and_then(|p| p.parse().ok()) {
                out.insert(i, (pid, inner));
            }
        }
        out
    }

    /// The pid member `i` has inside the island (what its row records).
    pub fn inner_pid(&self, i: usize) -> i64 {
        self.pids()[&i].1
    }

    /// `fleetgate runtime register` for member `i`, one cohort, one revision.
    pub fn register(&self, i: usize) -> serde_json::Value {
        let (namespace, profile, role) = member(i);
        let pid = self.inner_pid(i).to_string();
        let out = self.cli(&[
            "runtime",
            "register",
            "--namespace",
            &namespace,
            "--profile",
            &profile,
            "--role",
            &role,
            "--pid",
            &pid,
            "--cohort",
            "island",
            "--startup-head",
            HEAD,
            "--json",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// SIGKILL member `i`.
    pub fn kill(&self, i: usize) {
        let (host_pid, _) = self.pids()[&i];
        let status = Command::new("kill").args(["-KILL", &host_pid.to_string()]).status().unwrap();
        assert!(status.success());
    }
}

impl Drop for Island {
    fn drop(&mut self) {
        // --kill-child: the island's init, and with it every process inside, dies with unshare.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream
}

fn parse_head(head: &str) -> (u16, Vec<(String, String)>) {
    let mut lines = head.lines();
    let status = lines.next().unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].strip_prefix("\r\n").unwrap_or(&rest[n..]);
    }
    out
}

/// One complete request/answer (not for `/events`, which never ends).
pub fn http(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut stream = request(addr, method, path, headers);
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let (status, headers) = parse_head(head);
    let chunked = headers.iter().any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    Answer { status, headers, body: if chunked { dechunk(body) } else { body.to_owned() } }
}

pub fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Answer {
    http(addr, "GET", path, headers)
}

/// `GET /events`: the answer's head and its first event's `id` and `data`.
pub fn first_event(addr: SocketAddr, headers: &[(&str, &str)]) -> (u16, Vec<(String, String)>, String, String) {
    let mut reader = BufReader::new(request(addr, "GET", "/events", headers));
    let mut head = String::new();
    loop {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the stream ended in its head");
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let (status, headers) = parse_head(&head);
    let (mut id, mut data) = (String::new(), String::new());
    for line in reader.lines().map_while(Result::ok) {
        if let Some(v) = line.strip_prefix("id:") {
            id = v.trim().to_owned();
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.trim_start());
        } else if line.is_empty() && !data.is_empty() {
            break;
        }
    }
    (status, headers, id, data)
}
