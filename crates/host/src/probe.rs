//! The liveness probe: signal 0, and never any other signal.
//!
//! **Invariant:** this module is the only code in fleetgate's observation path
//! that calls `kill(2)`, and it only ever passes signal 0 (via
//! `rustix::process::test_kill_process`, which cannot send anything else).

pub use fleetgate_core::inventory::PidProbe;
use rustix::io::Errno;
use rustix::process::{Pid, test_kill_process};

/// Probe `pid` with signal 0. `None` or a non-positive pid is `Unknown` without probing.
pub fn probe_pid(pid: Option<i64>) -> PidProbe {
    let Some(raw) = pid.filter(|p| *p > 0).and_then(|p| i32::try_from(p).ok()) else {
        return PidProbe::Unknown;
    };
    let Some(pid) = Pid::from_raw(raw) else {
        return PidProbe::Unknown;
    };
    classify_errno(test_kill_process(pid))
}

/// The seed's mapping: no such process → dead; permission denied → alive
/// (it exists); any other error → unknown.
pub fn classify_errno(result: Result<(), Errno>) -> PidProbe {
    match result {
        Ok(()) => PidProbe::Alive,
        Err(Errno::SRCH) => PidProbe::Dead,
        Err(Errno::PERM) => PidProbe::Alive,
        Err(_) => PidProbe::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive_and_bad_pids_are_unknown() {
        assert_eq!(probe_pid(Some(i64::from(std::process::id()))), PidProbe::Alive);
        assert_eq!(probe_pid(None), PidProbe::Unknown);
        assert_eq!(probe_pid(Some(0)), PidProbe::Unknown);
        assert_eq!(probe_pid(Some(-4)), PidProbe::Unknown);
    }

    #[test]
    fn an_exited_child_is_dead() {
        let mut child = std::process::Command::new("true").spawn().expect("spawn true");
        let pid = i64::from(child.id());
        child.wait().expect("reap");
        assert_eq!(probe_pid(Some(pid)), PidProbe::Dead);
    }

    #[test]
    fn errno_mapping_is_the_seeds() {
        assert_eq!(classify_errno(Err(Errno::PERM)), PidProbe::Alive);
        assert_eq!(classify_errno(Err(Errno::SRCH)), PidProbe::Dead);
        assert_eq!(classify_errno(Err(Errno::INVAL)), PidProbe::Unknown);
    }

    #[test]
    fn probing_a_live_process_does_not_disturb_it() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = i64::from(child.id());
        for _ in 0..100 {
            assert_eq!(probe_pid(Some(pid)), PidProbe::Alive);
        }
        assert!(child.try_wait().unwrap().is_none(), "signal 0 must not end or stop the process");
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
