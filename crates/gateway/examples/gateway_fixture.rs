//! The gateway as the integration tests (and `scripts/bench-gateway`) run it: `serve` with
//! the test control plane of `tests/support/policy.rs`.
//!
//! ```text
//! gateway_fixture --state DIR [--forbid TOOL]... [--max-bytes N] [--log FILTER]
//!                 [--backoff-ms N] [--budget N] [--quarantine-s N] [--call-timeout-ms N]
//!                 [--http ADDR] [--sharing session|gateway] [-- DOWNSTREAM ARGV...]
//! ```
//!
//! With `--http` it serves Streamable HTTP on ADDR (`127.0.0.1:0` picks a port) instead of
//! stdio, and writes the address it listens on to `DIR/listen-addr`.
//!
//! Exits 0 after an orderly shutdown, 1 with the cause on stderr otherwise, 2 on bad usage.

#[path = "../tests/support/policy.rs"]
mod policy;

use fleetgate_gateway::{ConnectionLimits, DownstreamCommand, GatewayOptions, HttpOptions, Limits};
use fleetgate_supervise::SupervisionConfig;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

fn usage(message: &str) -> ExitCode {
    eprintln!("gateway_fixture: {message}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut state: Option<PathBuf> = None;
    let mut forbidden = BTreeSet::new();
    let mut options = GatewayOptions { server_name: "fleetgate-test".to_owned(), ..GatewayOptions::default() };
    let mut supervision = SupervisionConfig::default();
    let mut downstream = Vec::new();
    let mut http = None;
    let mut at = 0;
    while at < args.len() {
        let flag = args[at].as_str();
        if flag == "--" {
            downstream.extend(args[at + 1..].iter().cloned());
            break;
        }
        let Some(value) = args.get(at + 1) else { return usage(&format!("{flag} needs a value")) };
        at += 2;
        let parsed: Result<(), String> = match flag {
            "--state" => {
                state = Some(PathBuf::from(value));
                Ok(())
            }
            "--forbid" => {
                forbidden.insert(value.clone());
                Ok(())
            }
            "--max-bytes" => number(value).map(|n| options.max_message_bytes = n),
            "--log" => {
                options.log_filter = Some(value.clone());
                Ok(())
            }
            "--backoff-ms" => number::<u32>(value).map(|n| supervision.backoff_seconds = vec![f64::from(n) / 1000.0]),
            "--budget" => number(value).map(|n| supervision.failure_budget = n),
            "--quarantine-s" => {
                number::<u32>(value).map(|n| supervision.quarantine_backoff_seconds = vec![f64::from(n)])
            }
            "--call-timeout-ms" => number(value).map(|n| options.call_timeout = Duration::from_millis(n)),
            "--http" => value.parse().map(|addr| http = Some(addr)).map_err(|_| format!("`{value}` is not an address")),
            "--sharing" => fleetgate_gateway::Sharing::parse(value)
                .map(|sharing| options.sharing = sharing)
                .ok_or_else(|| format!("`{value}` is neither session nor gateway")),
            other => Err(format!("unknown argument `{other}`")),
        };
        if let Err(message) = parsed {
            return usage(&message);
        }
    }
    let Some(dir) = state else { return usage("--state DIR is required") };
    supervision.jitter_ratio = 0.0;
    supervision.stop_grace_seconds = 2.0;
    options.supervision = match supervision.validate() {
        Ok(settings) => settings,
        Err(e) => return usage(&e.to_string()),
    };
    options.downstream = DownstreamCommand::from_argv(downstream);
    let addr_file = dir.join("listen-addr");
    let control = match policy::TestPolicy::new(dir, forbidden) {
        Ok(policy) => Arc::new(policy),
        Err(e) => {
            eprintln!("gateway_fixture: open the state directory's events.log: {e}");
            return ExitCode::FAILURE;
        }
    };
    options.observer = Some(control.clone());
    let served = match http {
        None => fleetgate_gateway::run(options, control),
        Some(listen) => {
            let http = HttpOptions {
                listen,
                allow_remote: false,
                allowed_hosts: Vec::new(),
                bearer_token: None,
                principals: None,
                oauth: None,
                profile: None,
                limits: Limits::default(),
                connections: ConnectionLimits::default(),
                advertise: None,
            };
            fleetgate_gateway::run_http(options, http, control, move |addr| {
                if let Err(e) = std::fs::write(&addr_file, addr.to_string()) {
                    eprintln!("gateway_fixture: cannot write {}: {e}", addr_file.display());
                }
            })
        }
    };
    match served {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gateway_fixture: {e}");
            ExitCode::FAILURE
        }
    }
}

fn number<T: std::str::FromStr>(text: &str) -> Result<T, String> {
    text.parse().map_err(|_| format!("`{text}` is not a number"))
}
