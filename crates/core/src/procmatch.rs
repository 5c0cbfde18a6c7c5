//! Which command lines are fleet servers: every fleetgate gateway (`fleetgate …
//! serve`, wherever its global flags sit) and every command line containing
//! one of the roster's `process_match` substrings, but for fleetgate's own tools that only
//! name a server (`fleetgate doctor --snippet -- python mcp_server.py`, the downstream
//! guard) — and which of those stand on their
//! own: a process in a gateway's downstream tree (under its guard, at any depth) is part
//! of that gateway's member, judged here from the listing's (pid, ppid) links alone.

use std::collections::{BTreeSet, HashMap};

/// Global flags of the fleetgate CLI that take a value (skipped when looking
/// for the subcommand).
const VALUE_FLAGS: &[&str] = &["--store", "--config"];

/// fleetgate's subcommands that never serve MCP themselves, though their command lines may
/// name a server (`doctor --snippet -- …`, `pr`'s forge command): a neighbour's doctor run
/// must not close this fleet's gate. `serve` is a gateway; `debug` (the test fixtures) and
/// any subcommand not listed here are matched like any other command line (fail closed).
pub const TOOLS: &[&str] = &[
    "dashboard",
    "demo",
    "completions",
    "init",
    "man",
    "worker",
    "runtime",
    "inventory",
    "env",
    "capability",
    "approvals",
    "prune",
    "rules",
    "audit",
    "doctor",
    "pr",
    "tools",
    "help",
];

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

    /// `argv` is the guard a gateway starts its downstream through (`fleetgate
    /// downstream-guard -- <the downstream>`, or its former spelling `fleetgate debug
    /// downstream-guard`): not a server itself, though its command line holds the
    /// downstream's.
    pub fn is_downstream_guard(argv: &[String]) -> bool {
        fleetgate_subcommand(argv).is_some_and(|mut words| match words.next() {
            Some("downstream-guard") => true,
            Some("debug") => words.next() == Some("downstream-guard"),
            _ => false,
        })
    }

    /// `argv` is one of fleetgate's own tools ([`TOOLS`]): never a server itself.
    pub fn is_fleetgate_tool(argv: &[String]) -> bool {
        fleetgate_subcommand(argv).is_some_and(|mut words| words.next().is_some_and(|w| TOOLS.contains(&w)))
    }

    /// `argv` is a fleet server of either kind.
    pub fn matches(&self, argv: &[String]) -> bool {
        if Self::is_gateway(argv) {
            return true;
        }
        if Self::is_downstream_guard(argv) || Self::is_fleetgate_tool(argv) {
            return false;
        }
        let line = argv.join(" ");
        self.substrings.iter().any(|s| line.contains(s.as_str()))
    }
}

/// One process of a host's listing, as far as the matcher judges it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listed<'a> {
    /// Its pid.
    pub pid: i64,
    /// Its parent's pid, as the listing read it (0: none this listing can see).
    pub ppid: i64,
    /// Its command line.
    pub argv: &'a [String],
}

/// The parent links of one listing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ancestry {
    parent: HashMap<i64, i64>,
}

impl Ancestry {
    /// The links `(pid, ppid)` of one listing.
    pub fn new(links: impl IntoIterator<Item = (i64, i64)>) -> Self {
        Self { parent: links.into_iter().collect() }
    }

    /// The nearest proper ancestor of `pid` among `owners`, following the parent links.
    /// `None` when the chain leaves the listing first — a parent the listing does not hold
    /// (gone meanwhile, or outside this PID namespace), no parent (pid ≤ 0) — or loops
    /// (links read at different instants may): nothing is attributed on a guess.
    pub fn owner_of(&self, pid: i64, owners: &BTreeSet<i64>) -> Option<i64> {
        let mut at = pid;
        // A chain longer than the listing has visited some pid twice: a loop.
        for _ in 0..self.parent.len() {
            let parent = *self.parent.get(&at)?;
            // Back at the start: a loop, and `pid` is not its own ancestor.
            if parent <= 0 || parent == at || parent == pid {
                return None;
            }
            if owners.contains(&parent) {
                return Some(parent);
            }
            at = parent;
        }
        None
    }
}

impl FleetMatcher {
    /// The fleet servers of a listing that stand on their own, as indexes into `listing`
    /// in its order: every gateway (each is judged by its own runtime row, wherever it
    /// runs), and every other match that is not in a gateway's downstream tree. A match
    /// whose ancestor chain reaches a gateway ([`Ancestry::owner_of`]) — its downstream,
    /// started through the guard, at any depth, a `setsid` descendant the guard reaped as
    /// subreaper included — is that gateway's member, neither unregistered nor a
    /// duplicate. A match with no gateway above it (a bare server) stands on its own.
    ///
    /// A gateway's own child between its fork and its exec (a downstream's guard, `git`, being
    /// started) still shows the gateway's command line: a process whose parent is a gateway
    /// with the very same command line is that parent's ([`Self::forked_from_gateway`]),
    /// never a gateway of its own — of this fleet (a replica starting a downstream) or of any.
    pub fn fleet_servers(&self, listing: &[Listed<'_>]) -> Vec<usize> {
        let by_pid: HashMap<i64, &Listed<'_>> = listing.iter().map(|p| (p.pid, p)).collect();
        let gateways: BTreeSet<i64> = listing
            .iter()
            .filter(|p| Self::is_gateway(p.argv) && !Self::forked_from_gateway(p, by_pid.get(&p.ppid).copied()))
            .map(|p| p.pid)
            .collect();
        let ancestry = Ancestry::new(listing.iter().map(|p| (p.pid, p.ppid)));
        listing
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                gateways.contains(&p.pid)
                    || (self.matches(p.argv)
                        && !Self::is_gateway(p.argv)
                        && ancestry.owner_of(p.pid, &gateways).is_none())
            })
            .map(|(i, _)| i)
            .collect()
    }
}

impl FleetMatcher {
    /// `process` is a gateway's child that has not run its own program yet: its parent is a
    /// gateway and it shows the parent's command line, word for word (fork copies it; exec
    /// replaces it). Only the gateway's own code makes such a child, and it always execs.
    pub fn forked_from_gateway(process: &Listed<'_>, parent: Option<&Listed<'_>>) -> bool {
        parent.is_some_and(|parent| {
            parent.pid != process.pid && Self::is_gateway(parent.argv) && parent.argv == process.argv
        })
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
        assert!(FleetMatcher::is_downstream_guard(&v("/usr/bin/fleetgate downstream-guard -- python mcp_server.py")));
        assert!(!m.matches(&v("/usr/bin/fleetgate downstream-guard -- python mcp_server.py")));
        assert!(FleetMatcher::is_downstream_guard(&guard));
        assert!(!m.matches(&guard), "the guard is not a server, though it names one");
        assert!(m.matches(&v("fleetgate debug forge-fixture -- python mcp_server.py")));
        // fleetgate's own tools name a server without being one; an unknown subcommand is
        // matched (fail closed).
        let doctor = "/x/fleetgate --config /t/fleet.toml doctor --client codex --snippet -- python3 mcp_server.py";
        assert!(!m.matches(&v(doctor)), "a neighbour's doctor run is not a server");
        assert!(!m.matches(&v("fleetgate --store /s.db pr claim -- mcp_server.py")));
        assert!(m.matches(&v("fleetgate frobnicate -- python mcp_server.py")));
        assert!(m.matches(&v("python mcp_server.py doctor")));
    }

    /// A listing of (pid, ppid, command line).
    fn listing(rows: &[(i64, i64, &str)]) -> Vec<(i64, i64, Vec<String>)> {
        rows.iter().map(|(pid, ppid, cmd)| (*pid, *ppid, v(cmd))).collect()
    }

    fn standing(m: &FleetMatcher, rows: &[(i64, i64, Vec<String>)]) -> Vec<i64> {
        let listed: Vec<Listed<'_>> =
            rows.iter().map(|(pid, ppid, argv)| Listed { pid: *pid, ppid: *ppid, argv }).collect();
        m.fleet_servers(&listed).into_iter().map(|i| listed[i].pid).collect()
    }

    #[test]
    fn a_gateways_downstream_tree_is_its_member_and_a_bare_server_stands_alone() {
        let m = FleetMatcher::new(&["mcp_server.py".to_owned()]);
        let rows = listing(&[
            (1, 0, "/sbin/init"),
            (90, 1, "bash"),
            (100, 90, "/usr/bin/fleetgate serve --profile prgs-author -- python mcp_server.py"),
            (101, 100, "/usr/bin/fleetgate debug downstream-guard -- python mcp_server.py"),
            // The downstream, its own child, and a `setsid` daemon the guard reaped as subreaper.
            (102, 101, "python mcp_server.py"),
            (103, 102, "python mcp_server.py --worker"),
            (104, 101, "python mcp_server.py --daemon"),
            // A bare server beside it, and one under a guard no gateway runs.
            (200, 90, "python /srv/mcp_server.py"),
            (300, 1, "/usr/bin/fleetgate debug downstream-guard -- python mcp_server.py"),
            (301, 300, "python mcp_server.py"),
            // Its parent not listed (gone, or outside this PID namespace).
            (400, 399, "python mcp_server.py"),
            // A gateway under another's guard is a member of its own (its own row judges it).
            (500, 101, "/usr/bin/fleetgate serve --profile prgs-reviewer"),
        ]);
        assert_eq!(standing(&m, &rows), [100, 200, 301, 400, 500]);
        let ancestry = Ancestry::new(rows.iter().map(|(pid, ppid, _)| (*pid, *ppid)));
        let gateways = BTreeSet::from([100, 500]);
        assert_eq!(ancestry.owner_of(102, &gateways), Some(100));
        assert_eq!(ancestry.owner_of(104, &gateways), Some(100));
        assert_eq!(ancestry.owner_of(100, &gateways), None, "a gateway is not its own ancestor");
        assert_eq!(ancestry.owner_of(200, &gateways), None);
        assert_eq!(ancestry.owner_of(400, &gateways), None, "a missing parent attributes nothing");
        assert_eq!(ancestry.owner_of(999, &gateways), None, "nor does a pid the listing lacks");
    }

    /// Issue 54: a gateway's child between fork and exec shows its parent's command line. It
    /// is the parent's — a replica's, another fleet's, any gateway's — never a gateway of its
    /// own; a gateway started by a gateway with another command line still is one.
    #[test]
    fn a_gateways_child_before_its_exec_is_the_gateways() {
        let m = FleetMatcher::new(&["mcp_server.py".to_owned()]);
        let replica = "/usr/bin/fleetgate serve --profile prgs-author --transport http --listen 127.0.0.1:8081";
        let rows = listing(&[
            (1, 0, "/sbin/init"),
            (100, 1, replica),
            // Forked for a downstream's guard, not yet executed: the replica's own words.
            (101, 100, replica),
            // Its guard after the exec, and the downstream under it.
            (102, 100, "/usr/bin/fleetgate downstream-guard -- python mcp_server.py"),
            (103, 102, "python mcp_server.py"),
            // Another gateway's fork (another fleet's), and a child of that fork not yet
            // executed either.
            (200, 1, "/usr/bin/fleetgate --store /other.sqlite3 serve --profile p"),
            (201, 200, "/usr/bin/fleetgate --store /other.sqlite3 serve --profile p"),
            // Same words under something that is not a gateway: a gateway of its own.
            (300, 90, replica),
            (90, 1, "bash"),
            // A gateway under a gateway with other words: a gateway of its own.
            (400, 100, "/usr/bin/fleetgate serve --profile prgs-reviewer"),
        ]);
        assert_eq!(standing(&m, &rows), [100, 200, 300, 400]);
        let listed: Vec<Listed<'_>> =
            rows.iter().map(|(pid, ppid, argv)| Listed { pid: *pid, ppid: *ppid, argv }).collect();
        let find = |pid: i64| listed.iter().find(|l| l.pid == pid);
        assert!(FleetMatcher::forked_from_gateway(find(101).unwrap(), find(100)));
        assert!(!FleetMatcher::forked_from_gateway(find(300).unwrap(), find(90)));
        assert!(!FleetMatcher::forked_from_gateway(find(100).unwrap(), None), "no parent in the listing");
        assert!(!FleetMatcher::forked_from_gateway(find(100).unwrap(), find(100)), "not its own parent");
    }

    #[test]
    fn a_gateway_that_is_pid_1_of_its_namespace_owns_its_tree() {
        let m = FleetMatcher::new(&["mcp_server.py".to_owned()]);
        let rows = listing(&[
            (1, 0, "/usr/bin/fleetgate serve --profile prgs-author"),
            (2, 1, "/usr/bin/fleetgate debug downstream-guard -- python mcp_server.py"),
            (3, 2, "python mcp_server.py"),
        ]);
        assert_eq!(standing(&m, &rows), [1]);
    }

    #[test]
    fn a_loop_in_the_links_attributes_nothing() {
        let m = FleetMatcher::new(&["mcp_server.py".to_owned()]);
        // Links read at different instants may loop; none reaches the gateway.
        let rows = listing(&[
            (10, 1, "/usr/bin/fleetgate serve"),
            (20, 21, "python mcp_server.py"),
            (21, 20, "sh"),
            (30, 30, "python mcp_server.py --self-parent"),
        ]);
        assert_eq!(standing(&m, &rows), [10, 20, 30]);
        // A gateway on a loop is not its own ancestor.
        let looped = Ancestry::new([(5, 6), (6, 5)]);
        assert_eq!(looped.owner_of(5, &BTreeSet::from([5])), None);
        assert_eq!(looped.owner_of(6, &BTreeSet::from([5])), Some(5));
    }

    use proptest::prelude::*;

    /// The nearest gateway above `pid`, by a walk that remembers every pid it visited.
    fn reference_owner(parent: &HashMap<i64, i64>, pid: i64, owners: &BTreeSet<i64>) -> Option<i64> {
        let mut seen = BTreeSet::from([pid]);
        let mut at = pid;
        loop {
            let up = *parent.get(&at)?;
            if up <= 0 || !seen.insert(up) {
                return None;
            }
            if owners.contains(&up) {
                return Some(up);
            }
            at = up;
        }
    }

    proptest! {
        /// Any links (forests, loops, missing parents): attributed exactly when a walk
        /// that remembers where it has been reaches an owner, and to the nearest one.
        #[test]
        fn attribution_is_the_nearest_owner_on_the_parent_chain(
            links in proptest::collection::hash_map(1_i64..40, -1_i64..45, 0..40),
            owners in proptest::collection::btree_set(1_i64..40, 0..6),
            pid in 1_i64..45,
        ) {
            let ancestry = Ancestry::new(links.clone());
            prop_assert_eq!(ancestry.owner_of(pid, &owners), reference_owner(&links, pid, &owners));
        }

        /// A match with no gateway on its parent chain always stands on its own: no listing
        /// hides a bare server (the gate fails closed on it).
        #[test]
        fn a_match_with_no_gateway_above_it_is_never_hidden(
            links in proptest::collection::hash_map(1_i64..30, 0_i64..32, 1..30),
            gateways in proptest::collection::btree_set(1_i64..30, 0..4),
        ) {
            let m = FleetMatcher::new(&["mcp_server.py".to_owned()]);
            let gateway = v("/usr/bin/fleetgate serve");
            let server = v("python mcp_server.py");
            let listed: Vec<Listed<'_>> = links
                .iter()
                .map(|(pid, ppid)| Listed {
                    pid: *pid,
                    ppid: *ppid,
                    argv: if gateways.contains(pid) { &gateway } else { &server },
                })
                .collect();
            let kept: BTreeSet<i64> = m.fleet_servers(&listed).into_iter().map(|i| listed[i].pid).collect();
            let listed_gateways: BTreeSet<i64> = gateways.iter().copied().filter(|g| links.contains_key(g)).collect();
            // Every gateway here has the same words: one whose parent is a gateway is that
            // parent's child before its exec, the parent's and no gateway of its own. Only a
            // gateway's words make a fork: a server under such a child (or under a loop of
            // them, as a torn listing may show) is owned only through a gateway present.
            let forked = |pid: &i64| {
                listed_gateways.contains(pid)
                    && links.get(pid).is_some_and(|p| p != pid && listed_gateways.contains(p))
            };
            let present: BTreeSet<i64> = listed_gateways.iter().copied().filter(|g| !forked(g)).collect();
            for pid in links.keys() {
                let owned = !present.contains(pid) && (forked(pid) || reference_owner(&links, *pid, &present).is_some());
                prop_assert_eq!(kept.contains(pid), !owned, "pid {}", pid);
            }
        }
    }
}
