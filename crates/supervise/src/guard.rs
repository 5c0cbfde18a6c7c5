//! The guard of a guarded child ([`crate::ChildSpec::guard`]): a small process between the
//! supervisor and the command, so that the command's whole process group dies with the
//! supervisor even when the supervisor gets no chance to clean up (`kill -9`, a crash).
//!
//! The supervisor starts the guard as the leader of a new process group, with the read end
//! of a pipe on fd [`DEATH_PIPE_FD`] whose write end only the supervisor holds. The guard
//! starts the command in its own group (the command inherits its stdio, environment and
//! directory) and then waits for one of:
//! * the command exits: the guard SIGKILLs what the command left running (below), then
//!   exits the same way (its status, or its signal, SIGTERM included), so the supervisor
//!   judges the command's exit as if it were its direct child;
//! * EOF on the pipe, which the kernel delivers once the supervisor is gone: the guard
//!   SIGKILLs every descendant, then the group, itself included;
//! * SIGTERM (the supervisor stopping the group): the command got it too; the guard keeps
//!   waiting for the command, so the command's grace is its own.
//!
//! The guard is a child subreaper (`PR_SET_CHILD_SUBREAPER`): a descendant whose parent
//! dies is reparented to the guard, not to init, so every process the command started is
//! in the guard's tree of descendants — also one that left the group or the session
//! (`setsid`, `setpgid`, a daemon's double fork). Those the group kill cannot reach are
//! found by that tree in `/proc` and killed one by one. (A process that is reparented
//! outside the tree — by a subreaper of its own — is beyond it.)

use std::ffi::OsString;
use std::io::Read as _;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitCode;

/// The guard's fd holding the read end of the supervisor's pipe.
pub const DEATH_PIPE_FD: i32 = 3;

/// Run as the guard of `argv` (`-- program args…`, or `program args…`): start the command
/// and wait as described in the module documentation. Returns only when the command has
/// exited (normally, or by a signal the guard could not re-raise on itself) or could not
/// be started; the exit code to end the process with.
pub fn run(argv: &[OsString]) -> ExitCode {
    let argv = match argv.split_first() {
        Some((dashes, rest)) if dashes == "--" => rest,
        _ => argv,
    };
    let Some((program, args)) = argv.split_first() else {
        eprintln!("downstream-guard: no command given (usage: … -- PROGRAM [ARGS…])");
        return ExitCode::from(2);
    };
    let pipe = match death_pipe() {
        Ok(pipe) => pipe,
        Err(e) => {
            eprintln!("downstream-guard: no death pipe on fd {DEATH_PIPE_FD} ({e}): start it through ChildSpec::guard");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("downstream-guard: cannot start a runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(guard(program, args, pipe))
}

/// Fd 3, checked to be open and kept from the command (close-on-exec).
#[expect(unsafe_code, reason = "taking ownership of the inherited fd 3 needs from_raw_fd")]
fn death_pipe() -> std::io::Result<OwnedFd> {
    // SAFETY: fd 3 is borrowed only to ask whether it is open; nothing else in this process
    // owns it (the guard is started with it and takes it before anything opens a file).
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(DEATH_PIPE_FD) };
    rustix::io::fcntl_setfd(borrowed, rustix::io::FdFlags::CLOEXEC)?;
    // SAFETY: it is open (fcntl succeeded) and owned by nobody else, see above.
    Ok(unsafe { OwnedFd::from_raw_fd(DEATH_PIPE_FD) })
}

async fn guard(program: &OsString, args: &[OsString], pipe: OwnedFd) -> ExitCode {
    use tokio::signal::unix::{SignalKind, signal};
    // Installed before the command exists: a stop's SIGTERM to the group is the command's
    // to act on; the guard waits for it.
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            eprintln!("downstream-guard: cannot handle SIGTERM: {e}");
            return ExitCode::from(1);
        }
    };
    // Before the command exists, so none of its descendants can be orphaned past the guard.
    if let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
        eprintln!(
            "downstream-guard: cannot become a child subreaper ({e}): a descendant that leaves the group may survive"
        );
    }
    let mut child = match tokio::process::Command::new(program).args(args).kill_on_drop(false).spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("downstream-guard: cannot start {}: {e}", program.to_string_lossy());
            return ExitCode::from(127);
        }
    };
    std::thread::spawn(move || watch_supervisor(pipe));
    loop {
        tokio::select! {
            status = child.wait() => return match status {
                Ok(status) => {
                    kill_descendants();
                    exit_like(status)
                }
                Err(e) => {
                    eprintln!("downstream-guard: cannot wait for the command: {e}");
                    ExitCode::from(1)
                }
            },
            received = term.recv() => if received.is_none() { break },
        }
    }
    // The signal stream ended (it does not, while the runtime runs): keep waiting.
    let status = child.wait().await.unwrap_or_default();
    kill_descendants();
    exit_like(status)
}

/// Block until the supervisor is gone (EOF or an error on the pipe), then SIGKILL the
/// group: the command, its descendants in the group, and the guard.
fn watch_supervisor(pipe: OwnedFd) {
    let mut pipe = std::fs::File::from(pipe);
    let mut buffer = [0_u8; 64];
    loop {
        match pipe.read(&mut buffer) {
            Ok(0) => break,
            Ok(_) => {}
            // A signal (the SIGTERM the guard handles) interrupted the read: not the end.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    kill_descendants();
    let group = rustix::process::getpgrp();
    let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    // Not the group's leader after all (started outside a supervisor): take the command's
    // group down with the process itself.
    std::process::exit(137);
}

/// Rounds of [`kill_descendants`] at most: each kills every live descendant, so only a
/// process forked meanwhile needs another.
const SWEEPS: usize = 16;

/// SIGKILL every live descendant of this process (its tree in `/proc`, reparented orphans
/// included, see the module doc), again until none is left or [`SWEEPS`] rounds passed.
fn kill_descendants() {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    for _ in 0..SWEEPS {
        let descendants = descendants_of(me, &processes());
        if descendants.is_empty() {
            return;
        }
        for pid in descendants {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

/// Every process as `(pid, parent pid, alive)` (a zombie is not alive), from `/proc`.
fn processes() -> Vec<(i32, i32, bool)> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|entry| {
            let pid: i32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let stat = fleetgate_host::procfs::parse_pid_stat(&stat)?;
            Some((pid, i32::try_from(stat.ppid).ok()?, !stat.zombie))
        })
        .collect()
}

/// The live descendants of `root` in `table` (a zombie's own children included).
fn descendants_of(root: i32, table: &[(i32, i32, bool)]) -> Vec<i32> {
    let mut found = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for &(pid, ppid, alive) in table {
            // Each process has one parent, so each is reached once.
            if ppid == parent && pid != root {
                frontier.push(pid);
                if alive {
                    found.push(pid);
                }
            }
        }
    }
    found
}

/// End this process the way the command ended: its exit code, or its signal re-raised on
/// itself — SIGTERM too, once its own handler is put back to the default — so the
/// supervisor sees what it would have seen of the command. The shell's `128 + signal` only
/// when the signal could not be raised.
fn exit_like(status: std::process::ExitStatus) -> ExitCode {
    if let Some(code) = status.code() {
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let Some(signal) = status.signal() else { return ExitCode::from(1) };
    if let Some(raised) = rustix::process::Signal::from_named_raw(signal) {
        if signal == libc::SIGTERM {
            default_disposition(signal);
        }
        let _ = rustix::process::kill_process(rustix::process::getpid(), raised);
    }
    ExitCode::from(u8::try_from(128 + signal).unwrap_or(1))
}

/// Put `signal`'s disposition back to the default (the guard's SIGTERM handler would
/// otherwise catch the re-raised signal).
#[expect(unsafe_code, reason = "resetting a signal's disposition is libc's `signal`")]
fn default_disposition(signal: i32) {
    // SAFETY: `SIG_DFL` installs no handler; nothing runs in a handler afterwards, and the
    // process ends right after (by the signal re-raised, or by returning).
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
    }
}

#[cfg(test)]
mod tests {
    use super::descendants_of;

    #[test]
    fn descendants_are_the_whole_live_tree_below_the_root() {
        // 1 ─ 10 ─ 11 ─ 12 (zombie) ─ 13;  1 ─ 20 (not ours)
        let table = [(10, 1, true), (11, 10, true), (12, 11, false), (13, 12, true), (20, 1, true)];
        let mut below = descendants_of(10, &table);
        below.sort_unstable();
        assert_eq!(below, [11, 13]);
        assert!(descendants_of(20, &table).is_empty());
    }
}
