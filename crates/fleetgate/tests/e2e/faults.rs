//! Disk and store faults under a serving gateway (issue 19): the SQLite store on a small
//! tmpfs in a private mount namespace of the gateway's own, filled up and remounted
//! read-only under it; on an ext4 loop device the kernel turns read-only after an error; and
//! the store's write lock held past its 5 s deadline. Each time a
//! mutating `tools/call` is refused with a named blocker, reads are still forwarded to the
//! real `mcp-server-git`, the gateway keeps answering, and once the fault clears mutations
//! are forwarded again and the audit trail is whole. Driven over raw stdio JSON-RPC.

use crate::stdiokit::StdioGateway as Raw;
use crate::support::{FleetDir, bin, peer, roster, serial, wait_until};
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

/// A one-member fleet (so its gate passes mutations while healthy) whose gateway serves
/// `mcp-server-git` on the fleet's checkout.
fn fleet(name: &str) -> (FleetDir, Vec<String>) {
    let f = FleetDir::new(&roster(name, &["author"], ""));
    std::fs::write(f.repo().join("a.txt"), "a\n").unwrap();
    let downstream = vec![
        peer(".venv/bin/mcp-server-git").display().to_string(),
        "--repository".into(),
        f.repo().display().to_string(),
    ];
    (f, downstream)
}

/// A tool call's (`isError`, first text).
fn call(g: &mut Raw, name: &str, arguments: Value) -> (bool, String) {
    let answer = g.request("tools/call", json!({"name": name, "arguments": arguments}));
    let result = &answer["result"];
    assert!(result.is_object(), "{name}: {answer}");
    (result["isError"].as_bool().unwrap_or(false), result["content"][0]["text"].as_str().unwrap_or("").to_owned())
}

fn stage(g: &mut Raw, f: &FleetDir) -> (bool, String) {
    call(g, "git_add", json!({"repo_path": f.repo(), "files": ["a.txt"]}))
}

fn status(g: &mut Raw, f: &FleetDir) -> (bool, String) {
    call(g, "git_status", json!({"repo_path": f.repo()}))
}

/// A mutating call is forwarded (and answered by the downstream).
fn assert_forwarded(g: &mut Raw, f: &FleetDir) {
    let (err, text) = stage(g, f);
    assert!(!err, "the mutation is forwarded: {text}");
}

/// Poll a mutating call until it is refused (bounded); the refusal's text.
fn refused_mutation(g: &mut Raw, f: &FleetDir, within: f64) -> String {
    let mut last = (false, String::new());
    let refused = wait_until(within, || {
        last = stage(g, f);
        last.0
    });
    assert!(refused, "a mutating call was still forwarded under the fault: {}", last.1);
    last.1
}

/// Poll a mutating call until it is forwarded again (bounded).
fn mutation_allowed_again(g: &mut Raw, f: &FleetDir) {
    let mut last = (true, String::new());
    let allowed = wait_until(30.0, || {
        last = stage(g, f);
        !last.0
    });
    assert!(allowed, "mutations were not allowed again once the fault cleared: {}", last.1);
}

/// `PRAGMA integrity_check` of the store file.
fn integrity(store: &std::path::Path) -> String {
    let db = rusqlite::Connection::open(store).unwrap();
    db.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap()
}

/// The audit trail through the CLI, run in the namespace of process `pid` (`nsenter -m`: the
/// CLI resolves the store's path, so `/proc/PID/root/…` would name the host's directory),
/// once `ready` holds of its entries (bounded): entries, oldest first.
fn audit(pid: u32, store: &std::path::Path, f: &FleetDir, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let cli = |args: &[&str]| -> Value {
        let out = Command::new("nsenter")
            .args(["-t", &pid.to_string(), "-m", "--"])
            .arg(bin())
            .env_clear()
            .arg("--store")
            .arg(store)
            .arg("--config")
            .arg(f.config())
            .args(args)
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("fleetgate {args:?}: {e}: {}", String::from_utf8_lossy(&out.stderr));
        })
    };
    let mut entries = Vec::new();
    wait_until(15.0, || {
        entries = cli(&["audit", "--json", "--limit", "1000"])["entries"].as_array().cloned().unwrap_or_default();
        ready(&entries)
    });
    entries
}

/// The refused mutation (by its blocker) is in the trail, the ids increase without a gap.
fn assert_trail_records(entries: &[Value], blocker: &str) {
    let ids: Vec<i64> = entries.iter().filter_map(|e| e["id"].as_i64()).collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "audit ids increase without a gap: {ids:?}");
    assert!(
        entries.iter().any(|e| e["tool"] == "git_add" && e["allowed"] == false && e["blocker_kind"] == blocker),
        "the refusal ({blocker}) is in the trail: {entries:?}"
    );
    assert!(entries.iter().any(|e| e["tool"] == "git_add" && e["allowed"] == true), "and the allowed ones");
}

/// The gateway in a private mount namespace with the store on a 4 MiB tmpfs of its own,
/// reached from outside through `/proc/PID/root`; started healthy (a mutation forwarded).
struct SmallDisk {
    f: FleetDir,
    at: Tmpfs,
    g: Raw,
}

/// The gateway's tmpfs: its mount point, in the namespace of process `pid`.
struct Tmpfs {
    pid: u32,
    mount: PathBuf,
}

impl SmallDisk {
    fn start(name: &str) -> Self {
        let probe = Command::new("unshare").args(["-m", "--propagation", "private", "true"]).status();
        assert!(
            probe.is_ok_and(|s| s.success()),
            "this test needs root and mount namespaces (`unshare -m`): run it as root on Linux"
        );
        let (f, downstream) = fleet(name);
        let mount = f.dir.path().join("disk");
        std::fs::create_dir(&mount).unwrap();
        let store = mount.join("registry.sqlite3");
        let downstream: Vec<&str> = downstream.iter().map(String::as_str).collect();
        let mut serve = f.serve_argv("prgs-author", "c", &downstream);
        let at = serve.iter().position(|a| a == "--store").unwrap();
        serve[at + 1] = store.display().to_string();
        let mut argv: Vec<String> = ["unshare", "-m", "--propagation", "private", "sh", "-c"].map(str::to_owned).into();
        argv.push(r#"mount -t tmpfs -o size=4m,mode=0700 fleetgate-disk "$0" && exec /usr/bin/env "$@""#.to_owned());
        argv.push(mount.display().to_string());
        argv.extend(serve);
        let mut g = Raw::start(&argv);
        assert_forwarded(&mut g, &f);
        Self { f, at: Tmpfs { pid: g.pid(), mount }, g }
    }
}

impl Tmpfs {
    /// A path on the gateway's tmpfs, seen from outside its namespace.
    fn inside(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{}", self.pid, self.mount.join(name).display()))
    }

    fn store(&self) -> PathBuf {
        self.inside("registry.sqlite3")
    }

    /// Run `mount ARGS` in the gateway's mount namespace: what it printed when it failed.
    fn try_mount(&self, args: &[&str]) -> String {
        let pid = self.pid.to_string();
        let out = Command::new("nsenter").args(["-t", &pid, "-m", "mount"]).args(args).output().unwrap();
        if out.status.success() { String::new() } else { String::from_utf8_lossy(&out.stderr).into_owned() }
    }

    /// Fill the tmpfs to the last byte.
    fn fill(&self) {
        let mut filler = std::fs::File::create(self.inside("filler")).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        loop {
            match filler.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(28), "filled up to ENOSPC: {e}");
                    break;
                }
            }
        }
        let _ = filler.write(&[0u8; 1]);
    }
}

#[test]
fn a_full_filesystem_under_a_serving_gateway_refuses_mutations_until_space_is_freed() {
    let _serial = serial();
    let mut disk = SmallDisk::start("disk-full");
    let SmallDisk { f, at, g } = &mut disk;

    at.fill();
    let refusal = refused_mutation(g, f, 30.0);
    assert!(refusal.starts_with("audit_unavailable"), "{refusal}");
    assert!(refusal.contains("disk is full") && refusal.contains("a full disk"), "named, with the action: {refusal}");
    let (err, text) = status(g, f);
    assert!(!err && text.contains("a.txt"), "reads are still forwarded: {text}");
    let context = g.control("gitea_get_runtime_context", json!({}));
    assert_eq!(context["worker_heartbeat"]["running"], true, "alive, its supervisor running: {context}");

    std::fs::remove_file(at.inside("filler")).unwrap();
    mutation_allowed_again(g, f);
    let entries = audit(at.pid, &at.mount.join("registry.sqlite3"), f, |e| e.iter().any(|e| e["allowed"] == false));
    assert_trail_records(&entries, "audit_unavailable");
    assert_eq!(integrity(&at.store()), "ok");
}

/// A read-only remount cannot happen under a serving gateway: the kernel refuses to make a
/// filesystem (or a bind mount of it) read-only while a file on it is open for writing, and
/// the gateway holds its store so. The refusal changes nothing: mutations go on.
#[test]
fn a_read_only_remount_is_refused_by_the_kernel_while_the_gateway_holds_the_store() {
    let _serial = serial();
    let mut disk = SmallDisk::start("disk-ro");
    let SmallDisk { f, at, g } = &mut disk;
    for options in ["remount,ro", "remount,ro,bind"] {
        let busy = at.try_mount(&["-o", options, &at.mount.display().to_string()]);
        assert!(busy.contains("busy"), "mount -o {options} under the open store: {busy}");
    }
    assert_forwarded(g, f);
    assert_eq!(integrity(&at.store()), "ok");
}

/// The store's write lock held past its 5 s deadline (`BEGIN EXCLUSIVE` from another
/// connection, as an operator's `sqlite3` would): renewals fail as transient, never fenced,
/// mutations are refused `audit_unavailable`, reads forwarded; released, the lease is renewed
/// and mutations forwarded again.
#[test]
fn a_lock_held_past_the_store_deadline_fails_renewals_as_transient_and_refuses_mutations_until_released() {
    let _serial = serial();
    let (f, downstream) = fleet("lock-held");
    let downstream: Vec<&str> = downstream.iter().map(String::as_str).collect();
    let mut g = Raw::start(&f.serve_argv("prgs-author", "c", &downstream));
    let beat = |g: &mut Raw| g.control("gitea_get_runtime_context", json!({}))["worker_heartbeat"].clone();
    assert_forwarded(&mut g, &f);
    assert!(wait_until(10.0, || beat(&mut g)["beats_renewed"].as_u64() > Some(0)), "renewing before the lock");

    let lock = rusqlite::Connection::open(f.store()).unwrap();
    lock.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let held = std::time::Instant::now();
    let (err, refusal) = stage(&mut g, &f);
    assert!(err && refusal.starts_with("audit_unavailable"), "refused while the lock is held: {refusal}");
    let (err, text) = status(&mut g, &f);
    assert!(!err && text.contains("a.txt"), "reads are still forwarded: {text}");
    let mut seen = Value::Null;
    let failed = wait_until(20.0, || {
        seen = beat(&mut g);
        seen["transient_failures"].as_u64() > Some(0)
    });
    assert!(failed, "a renewal failed past the store deadline: {seen}");
    assert!(held.elapsed() >= std::time::Duration::from_secs(5), "not before the 5 s deadline: {seen}");
    assert_eq!((seen["running"].clone(), seen["stopped_reason"].clone()), (json!(true), Value::Null), "{seen}");
    let renewed = seen["beats_renewed"].as_u64().unwrap();
    drop(lock);

    let mut after = Value::Null;
    let renewing = wait_until(20.0, || {
        after = beat(&mut g);
        after["beats_renewed"].as_u64() > Some(renewed)
    });
    assert!(renewing, "renewed again once released: {after}");
    mutation_allowed_again(&mut g, &f);
    let entries = f.audit_until(|e| e.iter().any(|e| e["allowed"] == false))["entries"].as_array().cloned().unwrap();
    assert_trail_records(&entries, "audit_unavailable");
    assert_eq!(integrity(&f.store()), "ok");
}

/// A loop device over an ext4 image in the fleet's directory, detached when dropped.
struct Ext4 {
    device: String,
}

impl Ext4 {
    fn new(image: &std::path::Path) -> Self {
        std::fs::File::create(image).unwrap().set_len(32 << 20).unwrap();
        let out = Command::new("losetup").args(["-f", "--show"]).arg(image).output().unwrap();
        assert!(
            out.status.success(),
            "this test needs root and a free loop device (`losetup -f`): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ext4 = Self { device: String::from_utf8_lossy(&out.stdout).trim().to_owned() };
        ext4.run("mkfs.ext4", &["-q", "-F"]);
        ext4
    }

    fn run(&self, program: &str, args: &[&str]) {
        let out = Command::new(program).args(args).arg(&self.device).output().unwrap();
        assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// A gateway whose store is on this filesystem, mounted `errors=remount-ro` at `mount` in
    /// a private mount namespace of its own (the mount ends with it).
    fn gateway(&self, f: &FleetDir, downstream: &[String], mount: &std::path::Path) -> Raw {
        let downstream: Vec<&str> = downstream.iter().map(String::as_str).collect();
        let mut serve = f.serve_argv("prgs-author", "c", &downstream);
        let at = serve.iter().position(|a| a == "--store").unwrap();
        serve[at + 1] = mount.join("fleet/registry.sqlite3").display().to_string();
        let mut argv: Vec<String> = ["unshare", "-m", "--propagation", "private", "sh", "-c"].map(str::to_owned).into();
        argv.push(r#"dev=$1; shift; mount -o errors=remount-ro "$dev" "$0" && exec /usr/bin/env "$@""#.to_owned());
        argv.push(mount.display().to_string());
        argv.push(self.device.clone());
        argv.extend(serve);
        Raw::start(&argv)
    }

    /// What the kernel does on a metadata error under `errors=remount-ro`: the filesystem goes
    /// read-only at once, open files and all (ext4's own test hook for it).
    fn fail(&self) {
        let name = self.device.rsplit('/').next().unwrap();
        std::fs::write(format!("/sys/fs/ext4/{name}/trigger_fs_error"), "fleetgate fault test").unwrap();
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.device).status();
    }
}

/// The kernel turning the store's filesystem read-only under a serving gateway (ext4 after an
/// error, `errors=remount-ro`, which unlike `mount -o remount,ro` does not wait for writers):
/// mutations are refused `audit_unavailable`, reads forwarded, the gateway answers. Such a
/// filesystem comes back only through fsck and a new mount, which the open store prevents:
/// the operator stops the gateway, repairs, and starts it again, and then the store is whole
/// (what had reached the disk before the fault is there, `integrity_check` ok) and mutations
/// go on.
#[test]
fn a_filesystem_the_kernel_turns_read_only_refuses_mutations_and_a_restart_after_fsck_recovers() {
    let _serial = serial();
    let (f, downstream) = fleet("disk-error");
    let mount = f.dir.path().join("ext4");
    std::fs::create_dir(&mount).unwrap();
    let ext4 = Ext4::new(&f.dir.path().join("ext4.img"));

    let mut g = ext4.gateway(&f, &downstream, &mount);
    assert_forwarded(&mut g, &f);
    let pid = g.pid();
    // On disk, not only in the page cache: under `synchronous = NORMAL` a commit reaches the
    // disk with the filesystem's next journal commit, and an aborted journal loses what had not
    // (as a crash would; docs/policy.md, "The audit log").
    let synced = Command::new("sync").arg("-f").arg(format!("/proc/{pid}/root{}", mount.display())).status();
    assert!(synced.unwrap().success());
    ext4.fail();
    let refusal = refused_mutation(&mut g, &f, 30.0);
    assert!(refusal.starts_with("audit_unavailable"), "{refusal}");
    assert!(refusal.contains("disk I/O error") && refusal.contains("read-only"), "named, with the action: {refusal}");
    let (err, text) = status(&mut g, &f);
    assert!(!err && text.contains("a.txt"), "reads are still forwarded: {text}");
    let context = g.control("gitea_get_runtime_context", json!({}));
    assert_eq!(context["worker_heartbeat"]["running"], true, "alive, its supervisor running: {context}");
    g.stop();
    assert!(wait_until(10.0, || !std::path::Path::new(&format!("/proc/{pid}")).exists()), "its namespace ended");

    let repaired = Command::new("fsck.ext4").args(["-f", "-y"]).arg(&ext4.device).status().unwrap();
    assert!(repaired.code().is_some_and(|c| c <= 1), "fsck repaired it: {repaired}");
    let mut g = ext4.gateway(&f, &downstream, &mount);
    assert_forwarded(&mut g, &f);
    let store = mount.join("fleet/registry.sqlite3");
    let entries = audit(g.pid(), &store, &f, |e| e.iter().filter(|e| e["allowed"] == true).count() >= 2);
    let allowed = entries.iter().filter(|e| e["tool"] == "git_add" && e["allowed"] == true).count();
    assert!(allowed >= 2, "the mutation committed before the fault and the one after: {entries:?}");
    let ids: Vec<i64> = entries.iter().filter_map(|e| e["id"].as_i64()).collect();
    assert!(ids.windows(2).all(|w| w[1] > w[0]), "in order: {ids:?}");
    // Read inside its namespace: SQLite does not open this store through `/proc/PID/root`.
    let check =
        "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('PRAGMA integrity_check').fetchone()[0])";
    let out = Command::new("nsenter")
        .args(["-t", &g.pid().to_string(), "-m", "python3", "-c", check])
        .arg(&store)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok", "{}", String::from_utf8_lossy(&out.stderr));
}
