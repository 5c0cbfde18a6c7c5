//! The `/proc` environ and cmdline parsers (crates/host/src/procfs.rs): NUL-separated
//! bytes of another process, any bytes at all; and what the scan does with a command
//! line next (the gateway matcher, the redaction of secrets).
//!
//! Invariants: no panic; no key holds `=` or NUL, no value or argument holds NUL, no
//! argument is empty; both parses round-trip through their canonical bytes; and a secret
//! flag's value (`--password VALUE`, `-token VALUE`, `-p VALUE`) never shows in the redacted
//! command line.
#![no_main]

use fleetgate_core::procmatch::FleetMatcher;
use fleetgate_core::redact::redact_argv;
use fleetgate_host::procfs::{parse_cmdline, parse_environ};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let env = parse_environ(data);
    let pairs: Vec<(&str, &str)> = env.iter().collect();
    let mut bytes = Vec::new();
    for (key, value) in &pairs {
        assert!(!key.contains(['=', '\0']) && !value.contains('\0'), "{key:?}={value:?}");
        bytes.extend_from_slice(format!("{key}={value}\0").as_bytes());
    }
    assert_eq!(parse_environ(&bytes).iter().collect::<Vec<_>>(), pairs, "environ does not round-trip");

    let argv = parse_cmdline(data);
    assert!(argv.iter().all(|a| !a.is_empty() && !a.contains('\0')), "{argv:?}");
    assert_eq!(argv.len(), data.split(|b| *b == 0).filter(|s| !s.is_empty()).count());
    let joined: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    assert_eq!(parse_cmdline(&joined), argv, "cmdline does not round-trip");

    let _ = FleetMatcher::is_gateway(&argv);
    let _ = FleetMatcher::new(&argv).matches(&argv);
    let shown = redact_argv(&argv);
    // `--password VALUE` (or `-token`, `-p`), the flag not itself another flag's value; VALUE plain enough
    // that it can only show if it was copied (alphanumeric, in no other argument).
    for (i, pair) in argv.windows(2).enumerate() {
        let (flag, value) = (&pair[0], &pair[1]);
        let flag_position = i == 0 || !argv[i - 1].starts_with('-');
        let plain = value.bytes().all(|b| b.is_ascii_alphanumeric());
        let unique = argv.iter().enumerate().all(|(j, a)| j == i + 1 || !a.contains(value.as_str()));
        if matches!(flag.as_str(), "--password" | "-token" | "-p") && flag_position && plain && unique {
            assert!(!shown.contains(value.as_str()), "the secret {value:?} shows in {shown:?}");
        }
    }
});
