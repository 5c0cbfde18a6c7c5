//! External commands as supervised tasks: [`ChildSpec`], [`run_child`] and
//! [`Supervisor::spawn_child`].
//!
//! Each run spawns the command in a process group of its own, so it and
//! everything it forks are signalled together. No run leaves a process
//! behind:
//! * on a stop, the group gets SIGTERM, then SIGKILL after the spec's grace;
//! * when the run ends for any reason (exit, stop, abort of the future), a
//!   guard SIGKILLs whatever is left of the group;
//! * if the supervising process dies, the child gets SIGKILL from the kernel
//!   (Linux `PR_SET_PDEATHSIG`), and its stdin — a pipe the supervisor holds —
//!   reaches EOF, which is how an MCP server learns its client is gone.
//!
//! Exit status 0 is a finish and anything else a failure naming the status or
//! signal; a *permanent* child (the gateway's downstream server) fails on any
//! exit the supervisor did not ask for, status 0 included.
//!
//! The parent-death signal is tied to the thread that spawned the child:
//! runs are spawned from tokio worker threads, which live as long as their
//! runtime. It reaches the direct child only; the child's own descendants
//! rely on the stdin EOF, or on the group kill when the supervisor stops them.
//!
//! A *guarded* run ([`ChildSpec::guard`]) closes that gap: the supervisor
//! starts a guard process ([`crate::guard`]) that leads the group and starts
//! the command in it, and holds the write end of a pipe whose read end the
//! guard holds on fd [`crate::guard::DEATH_PIPE_FD`]. However the supervising
//! process ends, `kill -9` included, the kernel closes that write end; the
//! guard reads EOF and SIGKILLs the whole group, grandchildren included.

use crate::policy::SpawnError;
use crate::supervisor::{StopSignal, Supervisor};
use rustix::process::{Pid, Signal};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout, Command};

/// Where one of a child's standard streams goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildStdio {
    /// `/dev/null`.
    Null,
    /// A pipe to the supervisor, handed to [`ChildSpec::on_spawn`] (or held
    /// open for the run's life when there is no callback).
    Piped,
    /// The supervising process's own stream.
    Inherit,
}

impl ChildStdio {
    fn to_stdio(self) -> Stdio {
        match self {
            Self::Null => Stdio::null(),
            Self::Piped => Stdio::piped(),
            Self::Inherit => Stdio::inherit(),
        }
    }
}

/// One run's process and the pipes that were asked for, given to the
/// [`ChildSpec::on_spawn`] callback as soon as the run's process exists.
///
/// Dropping `stdin` closes it: the child sees EOF.
#[derive(Debug)]
pub struct SpawnedChild {
    /// The process id, which is also its process group id.
    pub pid: u32,
    /// Its stdin, when [`ChildStdio::Piped`].
    pub stdin: Option<ChildStdin>,
    /// Its stdout, when [`ChildStdio::Piped`].
    pub stdout: Option<ChildStdout>,
    /// Its stderr, when [`ChildStdio::Piped`].
    pub stderr: Option<ChildStderr>,
}

type OnSpawn = Arc<dyn Fn(SpawnedChild) + Send + Sync>;

/// An external command to run as a supervised task.
///
/// Defaults: stdin piped (so the child sees EOF when the supervisor is gone),
/// stdout to `/dev/null` (the gateway's stdout carries MCP frames and must
/// never receive a child's output by accident), stderr inherited (logs), the
/// environment inherited, a 2 s SIGTERM grace, and exit status 0 counted as
/// a finish.
#[derive(Clone)]
pub struct ChildSpec {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    env_clear: bool,
    cwd: Option<PathBuf>,
    stdin: ChildStdio,
    stdout: ChildStdio,
    stderr: ChildStdio,
    permanent: bool,
    term_grace: Duration,
    on_spawn: Option<OnSpawn>,
    guard: Option<(OsString, Vec<OsString>)>,
}

impl fmt::Debug for ChildSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Environment values may be secrets (a forge token): show keys only.
        let env_keys: Vec<&OsString> = self.env.iter().map(|(k, _)| k).collect();
        f.debug_struct("ChildSpec")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env_keys", &env_keys)
            .field("env_clear", &self.env_clear)
            .field("cwd", &self.cwd)
            .field("stdin", &self.stdin)
            .field("stdout", &self.stdout)
            .field("stderr", &self.stderr)
            .field("permanent", &self.permanent)
            .field("term_grace", &self.term_grace)
            .field("on_spawn", &self.on_spawn.is_some())
            .field("guard", &self.guard)
            .finish()
    }
}

impl ChildSpec {
    /// Run `program` (looked up on `PATH` when it has no slash).
    pub fn new(program: impl Into<OsString>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            env_clear: false,
            cwd: None,
            stdin: ChildStdio::Piped,
            stdout: ChildStdio::Null,
            stderr: ChildStdio::Inherit,
            permanent: false,
            term_grace: Duration::from_secs(2),
            on_spawn: None,
            guard: None,
        }
    }

    /// Add one argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Add arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Set an environment variable for the child.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Start the child with an empty environment (plus what [`env`](Self::env) sets).
    pub fn env_clear(mut self) -> Self {
        self.env_clear = true;
        self
    }

    /// Run the child in `dir`.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Where stdin comes from.
    pub fn stdin(mut self, stdio: ChildStdio) -> Self {
        self.stdin = stdio;
        self
    }

    /// Where stdout goes.
    pub fn stdout(mut self, stdio: ChildStdio) -> Self {
        self.stdout = stdio;
        self
    }

    /// Where stderr goes.
    pub fn stderr(mut self, stdio: ChildStdio) -> Self {
        self.stderr = stdio;
        self
    }

    /// A permanent child is meant to run until stopped: any exit the
    /// supervisor did not ask for, status 0 included, is a failure.
    pub fn permanent(mut self, permanent: bool) -> Self {
        self.permanent = permanent;
        self
    }

    /// How long a stopped child has between SIGTERM and SIGKILL.
    pub fn term_grace(mut self, grace: Duration) -> Self {
        self.term_grace = grace;
        self
    }

    /// Called with each run's process and pipes right after it is spawned,
    /// before the supervisor waits on it: the way to speak to the child (the
    /// gateway sends them to its MCP client loop). Without a callback, the
    /// pipes stay open, unread, for the run's life: a child that writes more
    /// than a pipe holds to an unread stdout blocks, so pipe only what is read.
    pub fn on_spawn<F>(mut self, callback: F) -> Self
    where
        F: Fn(SpawnedChild) + Send + Sync + 'static,
    {
        self.on_spawn = Some(Arc::new(callback));
        self
    }

    /// Start each run through a guard: `program args… -- <command> <its args…>`, a
    /// process that calls [`crate::guard::run`] (a binary re-executing itself, such as
    /// `fleetgate debug downstream-guard`). The guard leads the run's process group and
    /// SIGKILLs it when the supervising process is gone, however it ended, so no
    /// descendant of the command outlives it. The run's pid is then the guard's.
    pub fn guard<I, S>(mut self, program: impl Into<OsString>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.guard = Some((program.into(), args.into_iter().map(Into::into).collect()));
        self
    }

    /// The program run.
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// The arguments passed.
    pub fn get_args(&self) -> &[OsString] {
        &self.args
    }
}

/// Why a run of a child failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChildError {
    /// The command could not be started.
    #[error("spawn `{program}`: {source}")]
    Spawn {
        /// The program, lossily as text.
        program: String,
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },
    /// Waiting for the child failed.
    #[error("wait for `{program}`: {source}")]
    Wait {
        /// The program, lossily as text.
        program: String,
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },
    /// It exited with a non-zero status.
    #[error("`{program}` exited with status {code}")]
    Exited {
        /// The program, lossily as text.
        program: String,
        /// Its exit status.
        code: i32,
    },
    /// It was killed by a signal.
    #[error("`{program}` was killed by signal {signal} ({name})")]
    Signalled {
        /// The program, lossily as text.
        program: String,
        /// The signal number.
        signal: i32,
        /// The signal's name, e.g. `SIGKILL`, or `unknown`.
        name: &'static str,
    },
    /// A permanent child exited with status 0 without being asked to.
    #[error("`{program}` exited with status 0, but a permanent child must keep running")]
    ExitedPermanent {
        /// The program, lossily as text.
        program: String,
    },
    /// A status that is neither an exit code nor a signal.
    #[error("`{program}` ended with an unrecognised status: {status}")]
    Unrecognised {
        /// The program, lossily as text.
        program: String,
        /// The status as the platform shows it.
        status: String,
    },
}

impl Supervisor {
    /// Supervise `spec` as task `task` of `flow`: each run spawns the
    /// command; its exit decides finish or failure (see [`run_child`]).
    pub fn spawn_child(&self, task: &str, flow: &str, spec: ChildSpec) -> Result<(), SpawnError> {
        let spec = Arc::new(spec);
        self.spawn_with_stop(task, flow, move |stop| {
            let spec = Arc::clone(&spec);
            async move { run_child(&spec, stop).await }
        })
    }
}

/// One run of `spec`: spawn it, wait for its exit or for `stop`, and leave
/// no process of its group behind.
///
/// `Ok(())` when it exited with status 0 (unless permanent) or when it was
/// stopped; an error naming the status or signal otherwise.
pub async fn run_child(spec: &ChildSpec, stop: StopSignal) -> Result<(), ChildError> {
    let program = spec.program.to_string_lossy().into_owned();
    if stop.is_stopped() {
        return Ok(());
    }
    let (mut command, death_pipe) = match &spec.guard {
        None => {
            let mut command = Command::new(&spec.program);
            command.args(&spec.args);
            die_with_parent(&mut command);
            (command, None)
        }
        Some((guard, guard_args)) => {
            let mut command = Command::new(guard);
            command.args(guard_args).arg("--").arg(&spec.program).args(&spec.args);
            let (reader, writer) =
                std::io::pipe().map_err(|source| ChildError::Spawn { program: program.clone(), source })?;
            hand_over_death_pipe(&mut command, reader.into());
            (command, Some(writer))
        }
    };
    command
        .stdin(spec.stdin.to_stdio())
        .stdout(spec.stdout.to_stdio())
        .stderr(spec.stderr.to_stdio())
        .process_group(0)
        .kill_on_drop(false);
    if spec.env_clear {
        command.env_clear();
    }
    command.envs(spec.env.iter().map(|(k, v)| (k, v)));
    if let Some(dir) = &spec.cwd {
        command.current_dir(dir);
    }
    let spawned = command.spawn();
    // The guard's end of the pipe (moved into the hook) is closed here; ours is held for
    // the run's life, and by the kernel's bookkeeping until this process is gone.
    drop(command);
    let mut child = spawned.map_err(|source| ChildError::Spawn { program: program.clone(), source })?;
    let _death_pipe = death_pipe;
    // Armed before anything else can fail or be cancelled: from here on,
    // however this future ends, the group is killed.
    let group = ProcessGroup(child.id().and_then(|id| i32::try_from(id).ok()).and_then(Pid::from_raw));
    let io = SpawnedChild {
        pid: child.id().unwrap_or_default(),
        stdin: child.stdin.take(),
        stdout: child.stdout.take(),
        stderr: child.stderr.take(),
    };
    let _unclaimed = match &spec.on_spawn {
        Some(callback) => {
            callback(io);
            None
        }
        None => Some(io),
    };
    let exited = tokio::select! {
        status = child.wait() => Some(status),
        () = stop.stopped() => None,
    };
    let Some(status) = exited else {
        group.signal(Signal::TERM);
        if tokio::time::timeout(spec.term_grace, child.wait()).await.is_err() {
            group.signal(Signal::KILL);
            let _ = child.wait().await;
        }
        return Ok(());
    };
    let status = status.map_err(|source| ChildError::Wait { program: program.clone(), source })?;
    judge(program, status, spec.permanent)
}

fn judge(program: String, status: ExitStatus, permanent: bool) -> Result<(), ChildError> {
    match (status.code(), status.signal()) {
        (Some(0), _) if permanent => Err(ChildError::ExitedPermanent { program }),
        (Some(0), _) => Ok(()),
        (Some(code), _) => Err(ChildError::Exited { program, code }),
        (None, Some(signal)) => Err(ChildError::Signalled { program, signal, name: signal_name(signal) }),
        (None, None) => Err(ChildError::Unrecognised { program, status: status.to_string() }),
    }
}

fn signal_name(signal: i32) -> &'static str {
    // The numbers below 16 are the same on every Unix fleetgate runs on.
    match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => "unknown",
    }
}

/// The run's process group; SIGKILLed when dropped, so leftovers of an
/// exited child, and the whole group of an aborted run, do not outlive the
/// run.
///
/// After the leader is reaped, its pid cannot be reused while any member of
/// the group lives (the kernel keeps the id in use as a group id), so the
/// final kill reaches the leftovers or nobody (`ESRCH`, ignored).
struct ProcessGroup(Option<Pid>);

impl ProcessGroup {
    fn signal(&self, signal: Signal) {
        if let Some(pgid) = self.0 {
            // ESRCH (nobody left) is the expected answer once all exited.
            let _ = rustix::process::kill_process_group(pgid, signal);
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.signal(Signal::KILL);
    }
}

/// Ask the kernel to SIGKILL the child when the thread that spawned it dies.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[expect(
    unsafe_code,
    reason = "Command::pre_exec is unsafe; the hook only makes async-signal-safe syscalls and does not allocate"
)]
fn die_with_parent(command: &mut Command) {
    let parent = rustix::process::getpid();
    let hook = move || -> io::Result<()> {
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
        // The parent may have died between fork and prctl, in which case the
        // signal will never come: refuse to run as an orphan.
        if rustix::process::getppid() != Some(parent) {
            return Err(rustix::io::Errno::SRCH.into());
        }
        Ok(())
    };
    // SAFETY: the hook runs in the forked child before exec. It calls only
    // prctl(2) and getppid(2), both async-signal-safe, and builds its error
    // from an errno without allocating.
    unsafe {
        command.pre_exec(hook);
    }
}

/// Give the guard `reader` as its fd [`crate::guard::DEATH_PIPE_FD`] (the pipe is
/// close-on-exec, so no other child of this process keeps either end).
#[expect(
    unsafe_code,
    reason = "Command::pre_exec is unsafe; the hook only makes async-signal-safe syscalls and does not allocate"
)]
fn hand_over_death_pipe(command: &mut Command, reader: std::os::fd::OwnedFd) {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let hook = move || -> io::Result<()> {
        if reader.as_raw_fd() == crate::guard::DEATH_PIPE_FD {
            // Already in place: only make it survive the exec.
            return Ok(rustix::io::fcntl_setfd(&reader, rustix::io::FdFlags::empty())?);
        }
        // SAFETY: fd 3 of the forked child is replaced, not read: `dup2` closes whatever
        // it was; the handle is forgotten, never dropped, so nothing closes it again.
        let mut target = std::mem::ManuallyDrop::new(unsafe { OwnedFd::from_raw_fd(crate::guard::DEATH_PIPE_FD) });
        rustix::io::dup2(&reader, &mut target)?;
        Ok(())
    };
    // SAFETY: the hook runs in the forked child before exec. It calls only dup2(2) and
    // fcntl(2), both async-signal-safe, and builds its error from an errno without
    // allocating.
    unsafe {
        command.pre_exec(hook);
    }
}

/// Elsewhere there is no parent-death signal: stdin EOF is the only layer.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn die_with_parent(_command: &mut Command) {}
