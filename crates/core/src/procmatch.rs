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
        let Some(program) = argv.first() else { return false };
        if program.rsplit('/').next() != Some("fleetgate") {
            return false;
        }
        let mut args = argv[1..].iter();
        while let Some(arg) = args.next() {
            if arg == "--" {
                return false;
            }
            if VALUE_FLAGS.contains(&arg.as_str()) {
                args.next();
                continue;
            }
            if arg.starts_with('-') {
                continue;
            }
            return arg == "serve";
        }
        false
    }

    /// `argv` is a fleet server of either kind.
    pub fn matches(&self, argv: &[String]) -> bool {
        if Self::is_gateway(argv) {
            return true;
        }
        let line = argv.join(" ");
        self.substrings.iter().any(|s| line.contains(s.as_str()))
    }
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
    }
}
