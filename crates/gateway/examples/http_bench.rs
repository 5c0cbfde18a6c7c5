//! Load driver for the Streamable HTTP benchmark (not a test; see
//! BENCHMARKS.md and `scripts/bench-http`): N concurrent MCP sessions calling
//! one read tool as fast as answers come, for a fixed time; prints requests/s
//! and latency percentiles as one JSON line.
//!
//! http_bench URL SESSIONS SECONDS TOOL ARGS_JSON

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use std::time::{Duration, Instant};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, sessions, seconds, tool, arguments] = args.as_slice() else {
        eprintln!("usage: http_bench URL SESSIONS SECONDS TOOL ARGS_JSON");
        std::process::exit(2);
    };
    let sessions: usize = sessions.parse().expect("SESSIONS");
    let duration = Duration::from_secs_f64(seconds.parse().expect("SECONDS"));
    let arguments: serde_json::Map<String, serde_json::Value> = serde_json::from_str(arguments).expect("ARGS_JSON");
    let mut clients = Vec::new();
    for _ in 0..sessions {
        let transport = StreamableHttpClientTransport::from_uri(url.as_str());
        clients.push(().serve(transport).await.expect("initialize"));
    }
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::new();
    for client in clients {
        let (tool, arguments) = (tool.clone(), arguments.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                let params = CallToolRequestParams::new(tool.clone()).with_arguments(arguments.clone());
                let result = client.call_tool(params).await.expect("tools/call");
                assert!(result.is_error != Some(true), "the call was refused: {result:?}");
                latencies.push(t.elapsed());
            }
            let _ = client.cancel().await;
            latencies
        }));
    }
    let mut all: Vec<Duration> = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("session task"));
    }
    let elapsed = start.elapsed().as_secs_f64();
    all.sort();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    println!(
        "{}",
        serde_json::json!({
            "sessions": sessions,
            "calls": all.len(),
            "requests_per_s": (all.len() as f64 / elapsed).round(),
            "p50_ms": (pct(0.50) * 1000.0).round() / 1000.0,
            "p99_ms": (pct(0.99) * 1000.0).round() / 1000.0,
        })
    );
}
