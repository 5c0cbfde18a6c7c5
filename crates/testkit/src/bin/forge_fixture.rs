//! `fleetgate-forge-fixture`: the forge stand-in as a process of its own (MCP on stdio), for
//! the tests, the benchmarks and `fleetgate demo`. Its flags: `--help`.

fn main() -> std::process::ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    fleetgate_testkit::forge::run(&argv)
}
