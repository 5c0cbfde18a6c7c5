//! Load driver for the Streamable HTTP benchmark (not a test; see
//! BENCHMARKS.md and `scripts/bench-http`): N concurrent MCP sessions calling
//! one read tool as fast as answers come, for a fixed time; prints requests/s,
//! latency percentiles and, with `--pid`, the CPU time the server process spent
//! in that window, as one JSON line.
//!
//! http_bench URL SESSIONS SECONDS TOOL ARGS_JSON [--pid PID] [--latencies FILE] [--stateless [--warmup N]]
//!
//! Each session is a real MCP session, as rmcp's Streamable HTTP client runs
//! one: its own `initialize` (offering 2025-11-25, the newest version that has
//! the handshake), the `Mcp-Session-Id` the server hands out carried on every
//! later request, a DELETE at the end. Each session has its own HTTP client with
//! a keep-alive pool: rmcp's default client pools nothing, so it would open a
//! TCP connection per call. The driver counts the connections it opens (each new
//! connection resolves the host once, through a counting resolver), so the
//! output shows the reuse.
//!
//! `--pid PID`: `utime + stime` of /proc/PID/stat (every thread of that process;
//! not its children) read right after the sessions are initialized and right
//! after the last call returns, so the CPU figure covers the timed calls only;
//! beside it, the same for the process's descendants (its downstream servers),
//! reported apart as `downstream_cpu_s` with their count.
//! `--latencies FILE`: every successful call's latency in microseconds, one a
//! line, for pooling percentiles over several rounds.
//! `--stateless`: each client speaks the sessionless generation (2026-07-28) as
//! rmcp runs it: `server/discover` once, then every request self-contained, with
//! no `Mcp-Session-Id`, so any replica behind a balancer can answer it. Still
//! one HTTP client (and keep-alive pool) per client, and each client names
//! itself apart (`http_bench-I`), so each is an attachment of its own as each
//! session is. `--warmup N`: before the timed window, the clients one after
//! another make N untimed calls each: behind a round-robin balancer of N
//! replicas that reaches every replica, so no downstream starts in the window.
//!
//! A failed `initialize` or call is counted, not fatal: a session whose call
//! fails stops there and its first error is reported, so a peer that breaks
//! under load shows up in the figures rather than aborting the run.

use rmcp::model::{CallToolRequestParams, ClientConfig, Implementation, ProtocolVersion};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Bound on one `initialize` or `tools/call`, so a wedged server ends a session
/// (counted as an error) instead of the run.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Resolves every name to one address and counts the resolutions: reqwest
/// resolves the host once per new TCP connection, so this counts connections.
struct CountingResolver {
    ip: IpAddr,
    resolutions: Arc<AtomicUsize>,
}

impl reqwest::dns::Resolve for CountingResolver {
    fn resolve(&self, _name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        self.resolutions.fetch_add(1, Ordering::Relaxed);
        let addr = SocketAddr::new(self.ip, 0);
        Box::pin(async move { Ok(Box::new(std::iter::once(addr)) as reqwest::dns::Addrs) })
    }
}

/// The unit of /proc's CPU times (`sysconf(_SC_CLK_TCK)`): 100 on every Linux
/// architecture this runs on.
const USER_HZ: f64 = 100.0;

/// `ppid` and `utime + stime` (seconds) of a process, from /proc/PID/stat: the
/// times cover every thread of the process, not its children.
fn stat(pid: u32) -> Option<(u32, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after its ')' start at 3.
    let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split_whitespace().collect();
    let ppid = fields.get(1)?.parse().ok()?;
    let ticks = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some((ppid, ticks / USER_HZ))
}

/// CPU seconds of `pid` itself, and of each of its live descendants (the
/// downstream servers it runs) by pid.
fn cpu_snapshot(pid: u32) -> Option<(f64, HashMap<u32, f64>)> {
    let own = stat(pid)?.1;
    let mut all: Vec<(u32, u32, f64)> = Vec::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        if let Some(p) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok())
            && let Some((ppid, cpu)) = stat(p)
        {
            all.push((p, ppid, cpu));
        }
    }
    let mut family = HashSet::from([pid]);
    let mut descendants = HashMap::new();
    loop {
        let before = descendants.len();
        for &(p, ppid, cpu) in &all {
            if family.contains(&ppid) && family.insert(p) {
                descendants.insert(p, cpu);
            }
        }
        if descendants.len() == before {
            return Some((own, descendants));
        }
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: http_bench URL SESSIONS SECONDS TOOL ARGS_JSON [--pid PID] [--latencies FILE] [--stateless [--warmup N]]"
    );
    std::process::exit(2);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 {
        usage();
    }
    let (url, sessions, seconds, tool, arguments) = (&args[0], &args[1], &args[2], &args[3], &args[4]);
    let (mut pid, mut latencies_file, mut stateless, mut warmup) = (None::<u32>, None::<String>, false, 0usize);
    let mut rest = args[5..].iter();
    while let Some(flag) = rest.next() {
        match flag.as_str() {
            "--pid" => pid = Some(rest.next().unwrap_or_else(|| usage()).parse().expect("--pid")),
            "--latencies" => latencies_file = Some(rest.next().unwrap_or_else(|| usage()).clone()),
            "--stateless" => stateless = true,
            "--warmup" => warmup = rest.next().unwrap_or_else(|| usage()).parse().expect("--warmup"),
            _ => usage(),
        }
    }
    let sessions: usize = sessions.parse().expect("SESSIONS");
    let duration = Duration::from_secs_f64(seconds.parse().expect("SECONDS"));
    let arguments: serde_json::Map<String, serde_json::Value> = serde_json::from_str(arguments).expect("ARGS_JSON");

    // Address the server by name so that every new connection goes through the
    // counting resolver; `localhost` passes the peers' DNS-rebinding checks.
    let mut uri = reqwest::Url::parse(url).expect("URL");
    let ip: IpAddr = uri
        .host_str()
        .and_then(|h| h.trim_start_matches('[').trim_end_matches(']').parse().ok())
        .unwrap_or(IpAddr::from([127, 0, 0, 1]));
    uri.set_host(Some("localhost")).expect("host");
    let uri: Arc<str> = uri.as_str().into();
    let connections = Arc::new(AtomicUsize::new(0));

    let mut init = tokio::task::JoinSet::new();
    for i in 0..sessions {
        let http = reqwest::Client::builder()
            .dns_resolver(CountingResolver { ip, resolutions: connections.clone() })
            .tcp_nodelay(true)
            .no_proxy()
            .build()
            .expect("HTTP client");
        let transport = StreamableHttpClientTransport::with_client(
            http,
            StreamableHttpClientTransportConfig::with_uri(uri.clone()),
        );
        init.spawn(async move {
            let mut client = ClientConfig::default();
            let lifecycle = if stateless {
                client.client_info = Implementation::new(format!("http_bench-{i}"), "1");
                ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::LATEST] }
            } else {
                // A session begins with `initialize`, which the newest protocol version
                // (rmcp's default, 2026-07-28) no longer has: offer the newest one that
                // has it and let each server negotiate down from there.
                client.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
                ClientLifecycleMode::Initialize
            };
            match tokio::time::timeout(CALL_TIMEOUT, client.serve_with_lifecycle(transport, lifecycle)).await {
                Ok(Ok(client)) => Ok(client),
                Ok(Err(e)) => Err(format!("initialize: {e}")),
                Err(_) => Err(format!("initialize: no answer in {CALL_TIMEOUT:?}")),
            }
        });
    }
    let (mut clients, mut init_errors, mut first_error) = (Vec::new(), 0usize, None::<String>);
    while let Some(r) = init.join_next().await {
        match r.expect("initialize task") {
            Ok(c) => clients.push(c),
            Err(e) => {
                init_errors += 1;
                first_error.get_or_insert(e);
            }
        }
    }

    for client in &clients {
        for _ in 0..warmup {
            let params = CallToolRequestParams::new(tool.clone()).with_arguments(arguments.clone());
            let failed = match tokio::time::timeout(CALL_TIMEOUT, client.call_tool(params)).await {
                Ok(Ok(_)) => continue,
                Ok(Err(e)) => format!("warm-up: {e}"),
                Err(_) => format!("warm-up: no answer in {CALL_TIMEOUT:?}"),
            };
            // Counted with the set-up's failures: the timed window never saw it.
            init_errors += 1;
            first_error.get_or_insert(failed);
        }
    }

    let protocol = clients.first().and_then(|c| c.peer_info()).map(|i| i.protocol_version.to_string());
    let connections_at_start = connections.load(Ordering::Relaxed);
    let cpu_before = pid.and_then(cpu_snapshot);
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::new();
    for client in clients {
        let (tool, arguments) = (tool.clone(), arguments.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut error = None;
            while Instant::now() < deadline {
                let t = Instant::now();
                let params = CallToolRequestParams::new(tool.clone()).with_arguments(arguments.clone());
                match tokio::time::timeout(CALL_TIMEOUT, client.call_tool(params)).await {
                    Ok(Ok(result)) if result.is_error != Some(true) => latencies.push(t.elapsed()),
                    Ok(Ok(result)) => error = Some(format!("tools/call refused: {result:?}")),
                    Ok(Err(e)) => error = Some(format!("tools/call: {e}")),
                    Err(_) => error = Some(format!("tools/call: no answer in {CALL_TIMEOUT:?}")),
                }
                if error.is_some() {
                    break;
                }
            }
            (client, latencies, error)
        }));
    }
    let mut all: Vec<Duration> = Vec::new();
    let (mut clients, mut call_errors) = (Vec::new(), 0usize);
    for t in tasks {
        let (client, latencies, error) = t.await.expect("session task");
        all.extend(latencies);
        if let Some(e) = error {
            call_errors += 1;
            first_error.get_or_insert(e);
        }
        clients.push(client);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu_after = pid.and_then(cpu_snapshot);
    let connections_timed = connections.load(Ordering::Relaxed) - connections_at_start;
    for client in clients {
        let _ = tokio::time::timeout(Duration::from_secs(5), client.cancel()).await;
    }

    if let Some(path) = latencies_file {
        let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("--latencies"));
        for d in &all {
            writeln!(out, "{}", d.as_micros()).expect("--latencies");
        }
        out.flush().expect("--latencies");
    }
    all.sort();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    let cpu_s = cpu_before.as_ref().zip(cpu_after.as_ref()).map(|(b, a)| a.0 - b.0);
    // The downstream processes alive across the whole window (a process that
    // ended or began inside it is left out).
    let downstream_cpu_s = cpu_before.as_ref().zip(cpu_after.as_ref()).map(|(b, a)| {
        b.1.iter().filter_map(|(p, before)| a.1.get(p).map(|after| after - before)).fold(0.0, |sum, d| sum + d)
    });
    let downstreams = cpu_before.as_ref().map(|b| b.1.len());
    println!(
        "{}",
        serde_json::json!({
            "sessions": sessions,
            "protocol": protocol,
            "calls": all.len(),
            "seconds": (elapsed * 1000.0).round() / 1000.0,
            "requests_per_s": (all.len() as f64 / elapsed).round(),
            "p50_ms": (pct(0.50) * 1000.0).round() / 1000.0,
            "p99_ms": (pct(0.99) * 1000.0).round() / 1000.0,
            "cpu_s": cpu_s.map(|c| (c * 100.0).round() / 100.0),
            "downstream_cpu_s": downstream_cpu_s.map(|c| (c * 100.0).round() / 100.0),
            "downstream_processes": downstreams,
            "init_errors": init_errors,
            "call_errors": call_errors,
            "first_error": first_error,
            "connections_init": connections_at_start,
            "connections_timed": connections_timed,
        })
    );
}
