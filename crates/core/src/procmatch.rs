//! Which command lines are fleet servers: every fleetgate gateway (`fleetgate …
//! serve`, wherever its global flags sit) and every command line containing
//! one of the roster's `process_match` substrings.

/// Global flags of the fleetgate CLI that take a value (skipped when looking
/// for the subcommand).
const VALUE_FLAGS: &[&str] = &["--store", "--config"];

/// The matcher, built from the roster's `process_match`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetMatcher {
    substrings: Vec<String>,
}

impl FleetMatcher {
    /// A matcher for these substrings (empty ones are ignored).
    pub fn new(process_match: &[String]) -> Self {
        Self { substrings: process_match.iter().filter(|s| !s.is_empty()).cloned().collect() }
    }

    /// `argv` is a fleetgate gateway: its program is named `fleetgate` and its
    /// subcommand is `serve`.
    pub fn is_gateway(argv: &[String]) -> bool {
        fleetgate_subcommand(argv).is_some_and(|mut words| words.next() == Some("serve"))
    }

    /// `argv` is the guard a gateway starts its downstream through (`fleetgate debug
    /// downstream-guard -- <the downstream>`): not a server itself, though its command line
    /// holds the downstream's.
    pub fn is_downstream_guard(argv: &[String]) -> bool {
        fleetgate_subcommand(argv)
            .is_some_and(|mut words| words.next() == Some("debug") && words.next() == Some("downstream-guard"))
    }

    /// `argv` is a fleet server of either kind.
    pub fn matches(&self, argv: &[String]) -> bool {
        if Self::is_gateway(argv) {
            return true;
        }
        if Self::is_downstream_guard(argv) {
            return false;
        }
        let line = argv.join(" ");
        self.substrings.iter().any(|s| line.contains(s.as_str()))
    }
}

/// The words of a `fleetgate` command line from its subcommand on (global flags skipped);
/// `None` when the program is not `fleetgate` or `--` comes first.
fn fleetgate_subcommand(argv: &[String]) -> Option<impl Iterator<Item = &str>> {
    let program = argv.first()?;
    if program.rsplit('/').next() != Some("fleetgate") {
        return None;
    }
    let mut at = 1;
    while let Some(arg) = argv.get(at) {
        if arg == "--" {
            return None;
        }
        if VALUE_FLAGS.contains(&arg.as_str()) {
            at += 2;
            continue;
        }
        if arg.starts_with('-') {
            at += 1;
            continue;
        }
        return Some(argv[at..].iter().map(String::as_str));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn gateways_are_found_wherever_global_flags_sit() {
        assert!(FleetMatcher::is_gateway(&v("/usr/bin/fleetgate serve --profile prgs-author")));
        assert!(FleetMatcher::is_gateway(&v("fleetgate --store /x.db --json serve")));
        assert!(FleetMatcher::is_gateway(&v("fleetgate --config=/c.toml serve -- python mcp_server.py")));
        assert!(!FleetMatcher::is_gateway(&v("fleetgate --store serve worker list")));
        assert!(!FleetMatcher::is_gateway(&v("fleetgate inventory")));
        assert!(!FleetMatcher::is_gateway(&v("notfleetgate serve")));
        assert!(!FleetMatcher::is_gateway(&v("fleetgate -- serve")));
    }

    #[test]
    fn substrings_match_the_whole_command_line() {
        let m = FleetMatcher::new(&["mcp_server.py".to_owned()]);
        assert!(m.matches(&v("python /path/mcp_server.py --role author")));
        assert!(!m.matches(&v("python /path/other_server.py")));
        assert!(m.matches(&v("fleetgate serve")));
        assert!(!FleetMatcher::new(&[String::new()]).matches(&v("anything")));
        let guard = v("/usr/bin/fleetgate debug downstream-guard -- python /path/mcp_server.py");
        assert!(FleetMatcher::is_downstream_guard(&guard));
        assert!(!m.matches(&guard), "the guard is not a server, though it names one");
        assert!(m.matches(&v("fleetgate debug forge-fixture -- python mcp_server.py")));
    }
}
