//! The liveness probe: signal 0, and never any other signal.
//!
//! **Invariant:** this module is the only code in fleetgate's observation path
//! that calls `kill(2)`, and it only ever passes signal 0 (via
//! `rustix::process::test_kill_process`, which cannot send anything else).

use rustix::io::Errno;
use rustix::process::{Pid, test_kill_process};

/// What signal 0 says about a pid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PidLiveness {
    /// The process exists (including when we may not signal it).
    Alive,
    /// No such process.
    Dead,
    /// Pid absent, not positive, or the probe failed otherwise.
    Unknown,
}

impl PidLiveness {
    /// Alive, and nothing less, counts as alive.
    pub fn is_alive(self) -> bool {
        self == Self::Alive
    }
}

/// Probe `pid` with signal 0. `None` or a non-positive pid is `Unknown` without probing.
pub fn probe_pid(pid: Option<i64>) -> PidLiveness {
    let Some(raw) = pid.filter(|p| *p > 0).and_then(|p| i32::try_from(p).ok()) else {
        return PidLiveness::Unknown;
    };
    let Some(pid) = Pid::from_raw(raw) else {
        return PidLiveness::Unknown;
    };
    match test_kill_process(pid) {
        Ok(()) => PidLiveness::Alive,
        Err(Errno::SRCH) => PidLiveness::Dead,
        Err(Errno::PERM) => PidLiveness::Alive,
        Err(_) => PidLiveness::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive_and_bad_pids_are_unknown() {
        assert_eq!(probe_pid(Some(i64::from(std::process::id()))), PidLiveness::Alive);
        assert_eq!(probe_pid(None), PidLiveness::Unknown);
        assert_eq!(probe_pid(Some(0)), PidLiveness::Unknown);
        assert_eq!(probe_pid(Some(-4)), PidLiveness::Unknown);
    }

    #[test]
    fn an_exited_child_is_dead() {
        let mut child = std::process::Command::new("true").spawn().expect("spawn true");
        let pid = i64::from(child.id());
        child.wait().expect("reap");
        assert_eq!(probe_pid(Some(pid)), PidLiveness::Dead);
    }

    #[test]
    fn pid_one_is_alive_even_without_permission() {
        // As root this is Ok, otherwise EPERM: both must read alive.
        assert_eq!(probe_pid(Some(1)), PidLiveness::Alive);
    }
}
