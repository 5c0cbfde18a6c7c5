//! fleetgate: the binary. It parses the command line (clap, in `cli::args`, the only raw
//! flags anywhere), resolves each command's settings (`cli::context::Ctx`, `ServeSettings`,
//! `DashboardSettings`), implements the gate's `Observer` on the real host, runs the
//! command, prints its answer and maps it to the documented exit code.
//!
//! The work is done below it: decisions in `fleetgate_core`, the configuration in
//! `fleetgate_config`, the control plane in `fleetgate_control`, the doctor in
//! `fleetgate_doctor`, the page in `fleetgate_dashboard`; storage is `fleetgate_store`, the
//! operating system `fleetgate_host`, MCP `fleetgate_gateway`. The only product crate that
//! uses clap (the test kit's forge fixture parses its own flags with it too) and the only
//! crate that uses anyhow; nothing imports it.

#![deny(missing_docs)]

pub mod cli;

use cli::args::{Cli, Command};
use cli::context::Ctx;
use cli::output::{Exit, Reply};
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

/// Parse the command line, run the command, print its answer, and return the
/// documented exit code.
pub fn run_cli() -> ExitCode {
    use clap::Parser;
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => Exit::Ok.into(),
                _ => Exit::Usage.into(),
            };
        }
    };
    let json = cli.json;
    if let Command::DownstreamGuard { command } | Command::Debug(cli::args::DebugCommand::DownstreamGuard { command }) =
        &cli.command
    {
        // Before anything else: no store, no roster, no environment read.
        return fleetgate_supervise::guard::run(command);
    }
    // Generated from the flag definitions; they read no store, configuration or environment.
    if let Command::Completions { shell } = &cli.command {
        clap_complete::generate(
            *shell,
            &mut <Cli as clap::CommandFactory>::command(),
            "fleetgate",
            &mut std::io::stdout(),
        );
        return ExitCode::SUCCESS;
    }
    if let Command::Man = &cli.command {
        let page = clap_mangen::Man::new(<Cli as clap::CommandFactory>::command());
        return match page.render(&mut std::io::stdout().lock()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("fleetgate: cannot write the manual page: {e}");
                Exit::Failure.into()
            }
        };
    }
    // Before the configuration is read: init writes it (and may replace a broken one).
    if let Command::Init(args) = &cli.command {
        let reply = cli::init::run(cli.config.as_deref(), json, fleetgate_host::env::capture(), args);
        return match reply {
            Ok(reply) => {
                print_reply(&reply, json);
                reply.exit.into()
            }
            Err(e) => {
                eprintln!("fleetgate: {}", cli::output::shown(&format!("{e:#}"), usize::MAX));
                Exit::Failure.into()
            }
        };
    }
    // A throwaway fleet of its own (issue 54): the operator's configuration is never read, so
    // neither a roster `fleetgate init` wrote nor a broken one changes or stops the demo.
    if let Command::Demo { forge } = &cli.command {
        let env = fleetgate_host::env::capture();
        let clock: Arc<dyn fleetgate_core::Clock> = Arc::new(fleetgate_host::clock::SystemClock);
        let ctx = Ctx::for_config(fleetgate_config::FleetConfig::builtin(), env, clock, json);
        return finish(cli::demo::run(&ctx, forge), json);
    }
    if let Command::Serve(_) | Command::Dashboard(_) = &cli.command {
        // Long-running, with a downstream (serve) and other same-user processes around: its
        // secrets leave its own environment first (`/proc/PID/environ`), while it has one
        // thread and no child, by executing itself again without them (same pid).
        if let Err(e) = fleetgate_host::env::seal_secrets() {
            eprintln!("fleetgate: {e}");
            return Exit::Failure.into();
        }
        // Long-running: stdout belongs to MCP (serve) or to nobody (dashboard); causes go to stderr only.
        let outcome = Ctx::resolve(&cli, fleetgate_host::env::capture(), Arc::new(fleetgate_host::clock::SystemClock))
            .and_then(|ctx| match &cli.command {
                Command::Serve(args) => cli::serve::run(&ctx, args),
                Command::Dashboard(args) => cli::dashboard::run(&ctx, args),
                _ => Err(anyhow::anyhow!("not a long-running command")),
            });
        return match outcome {
            Ok(code) => ExitCode::from(code),
            Err(e) => {
                eprintln!("fleetgate: {}", cli::output::terminal_text(&format!("{e:#}")));
                Exit::Failure.into()
            }
        };
    }
    if let Command::Pr(_) | Command::Capability { .. } = &cli.command {
        // These may start `[workflow] forge_command`, a same-user child that can read this
        // process's `/proc/PID/environ`: the secrets leave it first, as for `serve`.
        if let Err(e) = fleetgate_host::env::seal_secrets() {
            eprintln!("fleetgate: {e}");
            return Exit::Failure.into();
        }
    }
    let reply = Ctx::resolve(&cli, fleetgate_host::env::capture(), Arc::new(fleetgate_host::clock::SystemClock))
        .and_then(|ctx| dispatch(&ctx, &cli.command));
    finish(reply, json)
}

/// A command's reply printed (JSON or text), or its error on stderr (and as JSON with
/// `--json`); the exit code either way.
fn finish(reply: anyhow::Result<Reply>, json: bool) -> ExitCode {
    match reply {
        Ok(reply) => {
            print_reply(&reply, json);
            reply.exit.into()
        }
        Err(e) => {
            let cause = format!("{e:#}");
            if json {
                print_reply(
                    &Reply { value: serde_json::json!({ "error": cause }), text: String::new(), exit: Exit::Failure },
                    true,
                );
            }
            eprintln!("fleetgate: {}", cli::output::shown(&cause, usize::MAX));
            Exit::Failure.into()
        }
    }
}

fn dispatch(ctx: &Ctx, command: &Command) -> anyhow::Result<Reply> {
    match command {
        Command::Worker(cmd) => cli::worker::run(ctx, cmd),
        Command::Runtime(cmd) => cli::runtime::run(ctx, cmd),
        Command::Env(cmd) => cli::gate::env(ctx, cmd),
        Command::Capability { profile, tool, worker, read_only_hint, arguments } => {
            cli::gate::capability(ctx, profile, tool, worker.as_deref(), *read_only_hint, arguments.as_deref())
        }
        Command::Audit { since, limit } => cli::gate::audit(ctx, since.as_deref(), limit),
        Command::Rules(cmd) => cli::rules::run(ctx, cmd),
        Command::Approvals(cmd) => cli::rules::approvals(ctx, cmd),
        Command::Prune(args) => cli::runtime::prune_history(ctx, args),
        Command::Inventory { answering_namespace } => cli::inventory::run(ctx, answering_namespace.as_deref()),
        Command::Doctor(args) => cli::doctor::run(ctx, args),
        Command::Pr(cmd) => cli::pr::pr(ctx, cmd),
        Command::Tools(cmd) => cli::tools::tools(ctx, cmd),
        Command::Debug(cmd) => cli::debug::run(ctx, cmd),
        Command::Serve(_)
        | Command::Demo { .. }
        | Command::Dashboard(_)
        | Command::DownstreamGuard { .. }
        | Command::Completions { .. }
        | Command::Init(_)
        | Command::Man => Err(anyhow::anyhow!("this command runs outside the reply path")),
    }
}

fn print_reply(reply: &Reply, json: bool) {
    // A command that streamed its output as it went (`approvals watch`) has nothing left.
    if reply.value.is_null() && reply.text.is_empty() {
        return;
    }
    let mut out = std::io::stdout().lock();
    // JSON escapes every control character itself; the readable form goes through the last
    // guard, so no value reaches the terminal as an escape sequence.
    let _ = if json {
        writeln!(out, "{}", reply.value)
    } else {
        writeln!(out, "{}", cli::output::terminal_text(&reply.text))
    };
}
