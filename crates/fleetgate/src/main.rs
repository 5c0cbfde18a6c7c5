//! The `fleetgate` binary: everything is in the library (`fleetgate::run_cli`).

fn main() -> std::process::ExitCode {
    fleetgate::run_cli()
}
