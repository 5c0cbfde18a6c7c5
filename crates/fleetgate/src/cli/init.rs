//! `fleetgate init`: a first, commented `fleet.toml` for a forge profile, written where the
//! other commands read it, never over an existing file (`--force` keeps a backup), checked by
//! loading it back; then the doctor's next step, or with `--client` the doctor's repair of
//! those clients (a diff, written only with `--apply`).

use crate::cli::args::{DoctorArgs, InitArgs};
use crate::cli::context::Ctx;
use crate::cli::output::{Exit, Reply};
use anyhow::{Context as _, anyhow, bail};
use fleetgate_config::FleetConfig;
use fleetgate_config::template::{forge_config, parse_remote};
use fleetgate_core::env::EnvSnapshot;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn git_remote_url(repo_root: &Path, remote: &str) -> anyhow::Result<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo_root)
        .args(["remote", "get-url", remote])
        .output()
        .context("cannot run git")?;
    if !out.status.success() {
        bail!(
            "the checkout {} has no git remote {remote:?} ({}): pass --remote NAME, or run init in the checkout",
            repo_root.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Where the file goes: `--config`, else the default configuration path.
fn target(explicit: Option<&Path>, env: &EnvSnapshot) -> anyhow::Result<PathBuf> {
    match explicit {
        Some(path) => Ok(path.to_owned()),
        None => fleetgate_host::paths::default_config_path(env)
            .ok_or_else(|| anyhow!("no configuration path: pass --config FILE, or set HOME or XDG_CONFIG_HOME")),
    }
}

/// A new file beside `path`, named `<name>.<what>.<random>`: created exclusively (`O_EXCL`: it
/// is never a file or link someone placed there) with `mode` (less the umask), removed if
/// dropped before it is kept.
fn beside(path: &Path, what: &str, mode: u32) -> anyhow::Result<tempfile::NamedTempFile> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    tempfile::Builder::new()
        .prefix(&format!("{name}.{what}."))
        .rand_bytes(16)
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a file beside {}", path.display()))
}

/// A copy of `path` beside it, under a name nobody can guess, with the file's own mode from
/// its first byte; its path.
fn back_up(path: &Path) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let original = std::fs::read(path).with_context(|| format!("cannot back {} up: cannot read it", path.display()))?;
    let mode = std::fs::metadata(path).map_or(0o600, |m| m.permissions().mode() & 0o777);
    let copy = beside(path, "bak", mode)?;
    copy.as_file()
        .write_all(&original)
        .and_then(|()| copy.as_file().sync_all())
        .with_context(|| format!("cannot back {} up", path.display()))?;
    let (_, saved) = copy.keep().with_context(|| format!("cannot back {} up", path.display()))?;
    Ok(saved)
}

/// Run `fleetgate init`.
pub fn run(config: Option<&Path>, json: bool, env: EnvSnapshot, args: &InitArgs) -> anyhow::Result<Reply> {
    let Some(dialect) = fleetgate_core::dialect::by_name(&args.forge) else {
        bail!(
            "--forge {:?} is not a known forge dialect (known: {})",
            args.forge,
            fleetgate_core::dialect::NAMES.join(", ")
        );
    };
    let root = args.repo_root.clone().unwrap_or_else(|| PathBuf::from("."));
    let url = git_remote_url(&root, &args.remote)?;
    let remote = parse_remote(&url).map_err(|why| {
        // A credential in the URL is never shown.
        let shown = fleetgate_core::redact::redact_url_userinfo(&url).unwrap_or_else(|| url.clone());
        anyhow!(
            "the remote {:?} is {shown:?}, which names no forge repository fleetgate writes a roster for: {why}",
            args.remote
        )
    })?;
    let text = forge_config(dialect, &args.remote, &remote);
    let path = target(config, &env)?;
    // Checked before anything is written: the file init writes is one fleetgate reads.
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    FleetConfig::parse(&text, &path.display().to_string()).map_err(|e| anyhow!("internal: {e}"))?;
    let mut backup = None;
    if path.exists() {
        if !args.force {
            bail!(
                "{} exists: fleetgate init never writes over a configuration (pass --force to replace it, keeping a backup)",
                path.display()
            );
        }
        backup = Some(back_up(&path)?);
    }
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // The new file is written under a name nobody can guess or plant (created exclusively,
    // never through a link), then renamed over the target.
    let partial = beside(&path, "partial", 0o666)?;
    partial
        .as_file()
        .write_all(text.as_bytes())
        .and_then(|()| partial.as_file().sync_all())
        .with_context(|| format!("cannot write {}", partial.path().display()))?;
    partial.persist(&path).map_err(|e| e.error).with_context(|| format!("cannot write {}", path.display()))?;
    let written = FleetConfig::load(Some(&path), &env)?;
    let mut lines = vec![format!(
        "wrote {} ({} members, {}/{} on {})",
        path.display(),
        written.members.len(),
        remote.org,
        remote.repo,
        remote.host
    )];
    if let Some(saved) = &backup {
        lines.push(format!("the previous file is {}", saved.display()));
    }
    // A member's `fleetgate serve` reads the default path unless its wrapper names the roster.
    let default = fleetgate_host::paths::default_config_path(&env);
    if default.as_deref() != Some(path.as_path()) {
        lines.push(format!(
            "note: this is not the default configuration path ({}): the doctor's repairs wrap members with \
             `fleetgate --config {} serve …` (a member wrapped before is the finding other_roster)",
            default.map_or_else(|| "none: HOME is not set".to_owned(), |d| d.display().to_string()),
            path.display()
        ));
    }
    let mut value = serde_json::json!({
        "path": path.display().to_string(),
        "backup": backup.as_ref().map(|b| b.display().to_string()),
        "binding": { "remote": args.remote, "org": remote.org, "repo": remote.repo, "host": remote.host },
        "members": written.members.iter().map(|m| &m.profile).collect::<Vec<_>>(),
    });
    if args.clients.is_empty() {
        lines.push(format!(
            "next: add the members to your clients with `fleetgate --config {} doctor --client claude-code --fix` \
             (then --apply), or rerun init with --client",
            path.display()
        ));
        return Ok(Reply { value, text: lines.join("\n"), exit: Exit::Ok });
    }
    let ctx = Ctx::for_config(written, env, Arc::new(fleetgate_host::clock::SystemClock), json);
    let doctor = DoctorArgs {
        clients: args.clients.clone(),
        home: args.home.clone(),
        project: args.repo_root.clone(),
        fix: true,
        apply: args.apply,
        snippet: false,
        downstream: Vec::new(),
    };
    let repaired = super::doctor::run(&ctx, &doctor)?;
    lines.push(repaired.text);
    value["doctor"] = repaired.value;
    Ok(Reply { value, text: lines.join("\n"), exit: repaired.exit })
}
