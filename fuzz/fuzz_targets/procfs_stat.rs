//! The `/proc` stat parsers (crates/host/src/procfs.rs): `btime` from `/proc/stat`, the
//! parent pid, zombie state, start ticks and image addresses from `/proc/<pid>/stat`, and the start time
//! made of them.
//! The input is read as both files (a seed holds a `btime` line and a pid's stat line).
//!
//! Invariants: no panic on any text (a command name may hold spaces, parentheses and
//! newlines); what parses round-trips through the canonical form of the line; a start
//! time is never later than boot plus the start ticks (it is rounded down), for any
//! clock-tick rate.
#![no_main]

use fleetgate_host::procfs::{PidStat, parse_btime, parse_pid_stat};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The scan reads both files with `read_to_string`: text that is not UTF-8 never gets here.
    let Ok(text) = std::str::from_utf8(data) else { return };
    let boot = parse_btime(text);
    if let Some(boot) = boot {
        assert!(text.lines().any(|l| l.starts_with("btime ")), "btime without a btime line");
        assert_eq!(parse_btime(&format!("cpu 1 2 3\nbtime {boot}\nprocesses 9\n")), Some(boot));
    }
    let Some(stat) = parse_pid_stat(text) else { return };
    let line = canonical(stat);
    assert_eq!(parse_pid_stat(&line), Some(stat), "the canonical line {line:?} does not round-trip");
    for ticks in [i64::MIN, -1, 0, 1, 100, 250, i64::MAX] {
        let boot = boot.unwrap_or(1_700_000_000);
        if let Some(at) = stat.started_at(boot, ticks) {
            let whole = i128::from(stat.start_ticks) / i128::from(ticks.max(1));
            assert_eq!(i128::from(at.unix()), i128::from(boot) + whole, "rounded down to the second");
        }
    }
});

/// A `/proc/<pid>/stat` line with these fields (the 52 fields of Linux 6, most zero), its
/// command name holding the characters that make the format tricky.
fn canonical(stat: PidStat) -> String {
    let mut fields = vec!["0".to_owned(); 52];
    fields[0] = "4711".into();
    fields[1] = "(a ) (b)\n c)".into();
    fields[2] = if stat.zombie { "Z" } else { "S" }.into();
    fields[3] = stat.ppid.to_string();
    fields[21] = stat.start_ticks.to_string();
    for (i, address) in [25, 26, 47, 48].into_iter().zip(stat.image) {
        fields[i] = address.to_string();
    }
    fields.join(" ") + "\n"
}
