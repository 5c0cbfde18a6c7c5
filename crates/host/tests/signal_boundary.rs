//! The observation path sends signal 0 and nothing else. Checked where we own
//! the boundary: no source file of the crates that observe and decide (core,
//! host, store, the CLI) may reach a signal-sending API, except the probe,
//! which can only test with signal 0.

mod common;

use common::sources;
use std::path::Path;

const SIGNAL_APIS: &[&str] =
    &["kill_process", "kill_process_group", "libc::kill", "nix::sys::signal", "Signal::", "killpg"];

#[test]
fn only_the_probe_touches_signals_and_only_with_signal_zero() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for krate in ["core", "host", "store", "fleetgate"] {
        sources(&crates.join(krate).join("src"), &mut files);
    }
    assert!(files.len() > 10, "the scan found the sources: {files:?}");
    let probe = crates.join("host/src/probe.rs");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        if file == probe {
            assert!(text.contains("test_kill_process"), "the probe uses the signal-0-only API");
            assert!(
                !text.contains("kill_process(")
                    || text.matches("kill_process(").count() == text.matches("test_kill_process(").count()
            );
            continue;
        }
        for api in SIGNAL_APIS {
            assert!(
                !text.contains(api),
                "{} reaches a signal API ({api}); only host/src/probe.rs may, with signal 0",
                file.display()
            );
        }
    }
}
