fn main() -> std::process::ExitCode {
    fleetgate::run_cli()
}
