//! A second host for real (issue #19). Two "hosts" on this machine, each a gateway alone
//! in its own PID and mount namespaces (`unshare --pid --fork --mount-proc`), so neither's
//! `/proc` shows the other's processes. Host B also has its own network namespace, joined
//! to this one by a veth pair, its own machine id and kernel boot id bind-mounted over
//! `/etc/machine-id` and `/proc/sys/kernel/random/boot_id`, and its own checkout on a
//! tmpfs only its mount namespace sees. Both use one PostgreSQL database: host A on
//! loopback, host B over the veth through a TCP forwarder this test runs on the host end
//! (the `scripts/with-postgres` servers listen on 127.0.0.1 only). Each gateway is pid 1
//! of its namespace: the two rows claim the same pid.
//!
//! Host A's inventory (run inside A's namespaces) corroborates B's member only through
//! B's published observation; then B's veth is deleted, and A names B's member unknown and
//! fails closed once B's last observation is older than the TTL, while A's own pid 1 never
//! stands in for B's. Needs root (namespaces, veth): without it the test fails, loudly.

use crate::support::{FleetDir, bin, serial, wait_until};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Instant;

/// The fleet's TTL: a remote host's observation older than this corroborates nothing.
const TTL_SECONDS: u64 = 3;
const PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";
const COHORT: &str = "two-hosts";

fn roster() -> String {
    let mut out =
        format!("[fleet]\nname = \"two-hosts\"\ntool_prefix = \"gitea_\"\nheartbeat_ttl_seconds = {TTL_SECONDS}\n");
    for role in ["author", "reviewer"] {
        out.push_str(&format!(
            "\n[[members]]\nnamespace = \"gitea-{role}\"\nprofile = \"prgs-{role}\"\nrole = \"{role}\"\n"
        ));
    }
    out
}

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program} {args:?}: {e}"))
}

fn must(program: &str, args: &[&str]) {
    let out = run(program, args);
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Root, `unshare`, `nsenter` and `ip` (iproute2, which scripts/install-peers installs):
/// this test cannot run without them, and says so.
fn require_root_and_tools() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let euid = status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|l| l.split_whitespace().nth(1));
    assert_eq!(
        euid,
        Some("0"),
        "the second-host test needs root (PID, mount and network namespaces, a veth pair): run it as root, as CI does"
    );
    for tool in ["unshare", "nsenter", "ip", "mount"] {
        let found = run("sh", &["-c", &format!("command -v {tool}")]);
        assert!(found.status.success(), "{tool} is missing: run scripts/install-peers (iproute2, util-linux)");
    }
}

/// A network namespace joined to this one by a veth pair: `host_addr` here, `guest_addr`
/// inside. Deleted (namespace and link) on drop.
struct Net {
    ns: String,
    host_if: String,
    host_addr: String,
}

impl Net {
    fn up(tag: &str) -> Self {
        let octet = 1 + (fleetgate_host::nonce() % 250) as u8;
        let net = Self {
            ns: format!("fg-{tag}"),
            host_if: format!("fgh{}", &tag[..8]),
            host_addr: format!("10.251.{octet}.1"),
        };
        let guest_if = format!("fgg{}", &tag[..8]);
        must("ip", &["netns", "add", &net.ns]);
        must("ip", &["link", "add", &net.host_if, "type", "veth", "peer", "name", &guest_if]);
        must("ip", &["link", "set", &guest_if, "netns", &net.ns]);
        must("ip", &["addr", "add", &format!("{}/30", net.host_addr), "dev", &net.host_if]);
        must("ip", &["link", "set", &net.host_if, "up"]);
        must("ip", &["-n", &net.ns, "addr", "add", &format!("10.251.{octet}.2/30"), "dev", &guest_if]);
        must("ip", &["-n", &net.ns, "link", "set", &guest_if, "up"]);
        must("ip", &["-n", &net.ns, "link", "set", "lo", "up"]);
        net
    }

    /// Cut the host off: the veth pair is deleted (both ends), its connections go nowhere.
    fn cut(&self) {
        must("ip", &["link", "del", &self.host_if]);
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let _ = run("ip", &["link", "del", &self.host_if]);
        let _ = run("ip", &["netns", "del", &self.ns]);
    }
}

/// Accepts on `listen` and pipes each connection to `target`, both ways, until either end
/// closes: the host end of the veth, for a server that listens on loopback only.
fn forward(listen: &str, target: SocketAddr) -> SocketAddr {
    let listener = TcpListener::bind((listen, 0)).unwrap_or_else(|e| panic!("cannot listen on {listen}: {e}"));
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for inbound in listener.incoming().map_while(Result::ok) {
            let Ok(outbound) = TcpStream::connect(target) else { continue };
            let pipe = |mut from: TcpStream, mut to: TcpStream| {
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16 * 1024];
                    while let Ok(n @ 1..) = from.read(&mut buf) {
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(std::net::Shutdown::Both);
                    let _ = from.shutdown(std::net::Shutdown::Both);
                })
            };
            pipe(inbound.try_clone().unwrap(), outbound.try_clone().unwrap());
            pipe(outbound, inbound);
        }
    });
    addr
}

/// What makes a host another one, beyond its namespaces.
#[derive(Default)]
struct Identity {
    machine_id: Option<PathBuf>,
    boot_id: Option<PathBuf>,
    /// A directory that becomes a tmpfs only this host sees, holding `checkout`, a clone of
    /// `clone_from`.
    private: Option<(PathBuf, PathBuf)>,
}

/// Inside the namespaces: the identity mounted, the checkout cloned, then the gateway
/// exec'd as pid 1. `$1` machine id file, `$2` boot id file, `$3` private dir, `$4` the
/// repository to clone into it (`-` for none), then `/usr/bin/env` arguments.
const HOST_SCRIPT: &str = r#"
set -e
[ "$1" = - ] || mount --bind "$1" /etc/machine-id
[ "$2" = - ] || mount --bind "$2" /proc/sys/kernel/random/boot_id
if [ "$3" != - ]; then
  mount -t tmpfs -o size=16m tmpfs "$3"
  git clone -q "$4" "$3/checkout"
fi
shift 4
exec /usr/bin/env "$@"
"#;

/// One "host": a gateway as pid 1 of its own PID and mount namespaces (and network
/// namespace, when given), its stdin held open by this test.
struct Host {
    child: Child,
    /// The gateway's pid in this test's namespace (nsenter's target).
    outer_pid: i64,
    log: PathBuf,
}

impl Host {
    fn start(netns: Option<&str>, id: &Identity, log: PathBuf, gateway: &[String]) -> Self {
        let mut argv: Vec<String> = Vec::new();
        if let Some(ns) = netns {
            argv.extend(["ip", "netns", "exec", ns].map(String::from));
        }
        argv.extend(
            ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "bash", "-c", HOST_SCRIPT, "host"]
                .map(String::from),
        );
        let opt = |p: Option<&PathBuf>| p.map_or_else(|| "-".to_owned(), |p| p.display().to_string());
        argv.push(opt(id.machine_id.as_ref()));
        argv.push(opt(id.boot_id.as_ref()));
        argv.push(opt(id.private.as_ref().map(|p| &p.0)));
        argv.push(opt(id.private.as_ref().map(|p| &p.1)));
        argv.extend(gateway.iter().cloned());
        let child = Command::new(&argv[0])
            .args(&argv[1..])
            .env_clear()
            .env("PATH", PATH)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let root = i64::from(child.id());
        let mut host = Self { child, outer_pid: 0, log };
        let found = wait_until(20.0, || {
            host.outer_pid = ns_init_below(root).unwrap_or(0);
            host.outer_pid > 0 && cmdline(host.outer_pid).contains(" serve ")
        });
        assert!(found, "the host's gateway did not start as its namespace's pid 1: {}", host.log());
        host
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `ARGS…` run inside this host's PID and mount namespaces (its `/proc`, its
    /// machine id).
    fn exec(&self, args: &[&str]) -> Output {
        Command::new("nsenter")
            .args(["-t", &self.outer_pid.to_string(), "--pid", "--mount", "--"])
            .args(args)
            .env_clear()
            .env("PATH", PATH)
            .output()
            .unwrap()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // --kill-child: the namespace's init, and with it everything inside, dies with unshare.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cmdline(pid: i64) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&raw).replace('\0', " ")
}

/// A process's pids, from this `/proc`'s PID namespace down to its own.
fn ns_pids(pid: &str) -> Vec<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("NSpid:")).unwrap_or("").split_whitespace().map(String::from).collect()
}

/// The descendant of `root` that is pid 1 of a PID namespace right below this one.
fn ns_init_below(root: i64) -> Option<i64> {
    let depth = ns_pids("self").len() + 1;
    let mut parent_of = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i64>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<i64>().ok());
        parent_of.insert(pid, ppid.unwrap_or(0));
    }
    let descends = |mut pid: i64| {
        while pid > 1 {
            if pid == root {
                return true;
            }
            pid = parent_of.get(&pid).copied().unwrap_or(0);
        }
        false
    };
    parent_of.keys().copied().find(|&pid| {
        let pids = ns_pids(&pid.to_string());
        pids.len() == depth && pids.last().is_some_and(|p| p == "1") && descends(pid)
    })
}

/// `fleetgate … serve --profile PROFILE` on `store`, with `repo_root` as its checkout.
fn gateway(fleet: &FleetDir, store: &str, profile: &str, repo_root: &Path) -> Vec<String> {
    let mut argv = fleet.serve_argv(profile, COHORT, &[]);
    let at = argv.iter().position(|a| a == "--store").unwrap();
    argv[at + 1] = store.to_owned();
    let at = argv.iter().position(|a| a == "--repo-root").unwrap();
    argv[at + 1] = repo_root.display().to_string();
    argv
}

fn inventory(host: &Host, store: &str, config: &Path) -> serde_json::Value {
    let bin = bin().display().to_string();
    let config = config.display().to_string();
    let out = host.exec(&[&bin, "--store", store, "--config", &config, "inventory", "--json"]);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("inventory on host A: {e}: {}", String::from_utf8_lossy(&out.stderr)))
}

fn member<'a>(v: &'a serde_json::Value, list: &str, profile: &str) -> Option<&'a serde_json::Value> {
    v[list].as_array().unwrap().iter().find(|m| m["profile"] == profile)
}

#[test]
fn a_member_on_a_second_host_is_corroborated_through_the_store_and_fails_closed_when_cut_off() {
    let _serial = serial();
    require_root_and_tools();
    let Some(db) = fleetgate_testkit::pg::PgDatabase::fresh("fg_hosts") else { return };
    let url_a = db.url.clone();
    let fleet = FleetDir::new(&roster());
    let tag = format!("{:016x}", fleetgate_host::nonce() as u64);
    let dir = fleet.dir.path();

    // Host B: its network behind a veth, reaching the database through the forwarder.
    let net = Net::up(&tag[..10]);
    let (_, after_at) = url_a.split_once('@').unwrap();
    let (server, _) = after_at.split_once('/').unwrap();
    let target: SocketAddr = server.parse().expect("the harness server is an IP:port");
    let forwarded = forward(&net.host_addr, target);
    let url_b = url_a.replacen(server, &forwarded.to_string(), 1);
    let b_machine = format!("{:032x}", fleetgate_host::nonce());
    let b_boot =
        format!("{:08x}-0000-4000-8000-{:012x}", fleetgate_host::nonce() as u32, fleetgate_host::nonce() as u64 >> 16);
    std::fs::write(dir.join("b-machine-id"), format!("{b_machine}\n")).unwrap();
    std::fs::write(dir.join("b-boot-id"), format!("{b_boot}\n")).unwrap();
    let b_private = dir.join("b-host");
    std::fs::create_dir(&b_private).unwrap();
    let b_checkout = b_private.join("checkout");
    let b_identity = Identity {
        machine_id: Some(dir.join("b-machine-id")),
        boot_id: Some(dir.join("b-boot-id")),
        private: Some((b_private.clone(), fleet.repo())),
    };

    let host_a = Host::start(
        None,
        &Identity::default(),
        dir.join("a.log"),
        &gateway(&fleet, &url_a, "prgs-author", &fleet.repo()),
    );
    let host_b = Host::start(
        Some(&net.ns),
        &b_identity,
        dir.join("b.log"),
        &gateway(&fleet, &url_b, "prgs-reviewer", &b_checkout),
    );
    // B's checkout is B's alone: here, its mount point is an empty directory.
    assert!(!b_checkout.exists(), "host B's tmpfs leaked into this mount namespace");

    // Both rows written, each with its own host, both pid 1.
    let rows = || fleet_rows(&url_a);
    let mut listed = serde_json::Value::Null;
    assert!(
        wait_until(30.0, || {
            listed = rows();
            listed.as_array().is_some_and(|r| r.iter().filter(|r| r["status"] == "running").count() == 2)
        }),
        "rows {listed}\nhost A: {}\nhost B: {}",
        host_a.log(),
        host_b.log()
    );
    let row_of = |profile: &str| listed.as_array().unwrap().iter().find(|r| r["profile"] == profile).unwrap().clone();
    let (row_a, row_b) = (row_of("prgs-author"), row_of("prgs-reviewer"));
    assert_eq!((row_a["pid"].as_i64(), row_b["pid"].as_i64()), (Some(1), Some(1)), "{listed}");
    assert_eq!(row_b["host"]["host_id"], b_machine.as_str());
    assert_eq!(row_b["host"]["boot_id"], b_boot.as_str());
    let a_machine = std::fs::read_to_string("/etc/machine-id").unwrap().trim().to_owned();
    assert_eq!(row_a["host"]["host_id"], a_machine.as_str());
    assert_ne!(row_a["host"]["boot_id"], row_b["host"]["boot_id"]);

    // Host A's /proc holds A's gateway and never B's.
    let seen = host_a.exec(&["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"]);
    let seen = String::from_utf8_lossy(&seen.stdout);
    assert!(seen.contains("prgs-author") && !seen.contains("prgs-reviewer"), "{seen}");

    // A corroborates B's member by B's observation alone: the gate is open, nothing is
    // unregistered, no hard diagnostic judges B's checkout from here.
    let store_a = url_a.as_str();
    let mut v = serde_json::Value::Null;
    let open = wait_until(20.0, || {
        v = inventory(&host_a, store_a, &fleet.config());
        v["mutation_gate_satisfied"] == true
    });
    assert!(open, "{}\nhost B: {}", v["blocked_reasons"], host_b.log());
    assert_eq!(v["running_member_count"], 2, "{v}");
    for profile in ["prgs-author", "prgs-reviewer"] {
        let m = member(&v, "running_members", profile).unwrap_or_else(|| panic!("{profile} not running: {v}"));
        assert_eq!((m["pid"].as_i64(), &m["liveness"]), (Some(1), &serde_json::json!("alive")));
    }
    assert_eq!(v["unregistered_processes"], serde_json::json!([]), "{v}");
    assert_eq!(v["runtime_diagnostics"], serde_json::json!([]), "{v}");

    // Cut B off. Its gateway keeps running, but publishes nothing any more: once its last
    // observation is older than the TTL, A names its member unknown and the gate closes.
    net.cut();
    let cut_at = Instant::now();
    let closed = wait_until(TTL_SECONDS as f64 + 15.0, || {
        v = inventory(&host_a, store_a, &fleet.config());
        v["mutation_gate_satisfied"] == false
    });
    assert!(closed, "host B cut off, yet A's gate stays open: {v}");
    eprintln!(
        "second host: A's gate closed {:.1}s after B was cut off (TTL {TTL_SECONDS}s)",
        cut_at.elapsed().as_secs_f64()
    );
    let reviewer = member(&v, "stale_members", "prgs-reviewer").unwrap_or_else(|| panic!("B's member not stale: {v}"));
    assert_eq!(
        (&reviewer["liveness"], &reviewer["health"]),
        (&serde_json::json!("unknown"), &serde_json::json!("unknown"))
    );
    assert_eq!(member(&v, "configured_members", "prgs-reviewer").unwrap()["health"], "unknown", "{v}");
    let reasons = v["incomplete_reasons"].to_string();
    assert!(reasons.contains(&format!("host {b_machine}'s last observation is")), "{reasons}");
    // A's own pid 1 is alive and observed, and is still not taken for B's pid 1.
    let author = member(&v, "running_members", "prgs-author").unwrap_or_else(|| panic!("A's member: {v}"));
    assert_eq!(author["pid"], 1);
    assert!(member(&v, "running_members", "prgs-reviewer").is_none(), "{v}");
    assert_eq!(v["unregistered_processes"], serde_json::json!([]), "{v}");

    // B's namespace killed outright: still unknown, never running, the gate still closed.
    drop(host_b);
    let v = inventory(&host_a, store_a, &fleet.config());
    assert_eq!(v["mutation_gate_satisfied"], false, "{v}");
    assert!(member(&v, "running_members", "prgs-reviewer").is_none(), "{v}");
    drop(host_a);
}

/// The store's runtime rows, read from this namespace.
fn fleet_rows(store: &str) -> serde_json::Value {
    let out = Command::new(bin()).env_clear().args(["--store", store, "runtime", "list", "--json"]).output().unwrap();
    serde_json::from_slice::<serde_json::Value>(&out.stdout).map_or(serde_json::Value::Null, |v| v["runtimes"].clone())
}
