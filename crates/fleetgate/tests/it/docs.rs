//! The reference pages under `docs/reference/` are generated from the code — the commands
//! from the clap definitions, the environment keys from core's declaration, the blockers from
//! core's table in precedence order, the configuration keys from `fleetgate_config::reference` — and this test fails when one is stale. Regenerate with
//! `FLEETGATE_BLESS_DOCS=1 cargo test -p fleetgate --test it docs`.

use clap::CommandFactory as _;
use fleetgate::cli::args::Cli;
use fleetgate_core::BlockerKind;
use fleetgate_core::env::{DECLARED, KeyName};
use std::fmt::Write as _;
use std::path::PathBuf;

fn docs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/reference")
}

const GENERATED: &str = "<!-- Generated from the code by crates/fleetgate/tests/it/docs.rs: do not edit. -->\n\n";

fn commands() -> String {
    fn walk(command: &clap::Command, path: &str, out: &mut String) {
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
            let full = format!("{path} {}", sub.get_name());
            let about = sub.get_long_about().or(sub.get_about()).map(ToString::to_string).unwrap_or_default();
            let _ = writeln!(out, "## `{full}`\n\n{about}\n");
            let args: Vec<String> = sub
                .get_arguments()
                .filter(|a| !a.is_hide_set() && !a.is_global_set() && a.get_id() != "help" && a.get_id() != "version")
                .map(|a| {
                    let name = match (a.get_long(), a.get_short()) {
                        (Some(long), _) => format!("--{long}"),
                        (None, Some(short)) => format!("-{short}"),
                        (None, None) => format!("<{}>", a.get_id().as_str().to_uppercase()),
                    };
                    let help = a.get_help().map(ToString::to_string).unwrap_or_default();
                    format!("- `{name}`: {help}")
                })
                .collect();
            if !args.is_empty() {
                let _ = writeln!(out, "{}\n", args.join("\n"));
            }
            if let Some(examples) = sub.get_after_help().map(ToString::to_string) {
                let lines: Vec<&str> = examples.lines().filter_map(|l| l.strip_prefix("  ")).collect();
                let _ = writeln!(out, "Examples:\n\n```sh\n{}\n```\n", lines.join("\n"));
            }
            walk(sub, &full, out);
        }
    }
    let cli = Cli::command();
    let mut out =
        format!("{GENERATED}# Commands\n\nEvery command of `fleetgate`, as `--help` describes it. Global flags: ");
    let globals: Vec<String> = cli
        .get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| {
            format!(
                "`--{}` ({})",
                a.get_long().unwrap_or_default(),
                a.get_help().map(ToString::to_string).unwrap_or_default()
            )
        })
        .collect();
    let _ = writeln!(out, "{}.\n", globals.join("; "));
    walk(&cli, "fleetgate", &mut out);
    out
}

fn environment() -> String {
    let mut out = format!(
        "{GENERATED}# Environment keys\n\nEvery key fleetgate reads (`fleetgate env keys`). `PREFIX_` is the \
         fleet's `env_prefix` (default `GITEA_`); a set key of that prefix that is not declared here is refused \
         (`fleetgate env check`).\n\n| Key | Meaning | Secret |\n| --- | --- | --- |\n"
    );
    for spec in DECLARED {
        let name = match spec.name {
            KeyName::Prefixed(suffix) => format!("PREFIX_{suffix}"),
            KeyName::Plain(name) => name.to_owned(),
        };
        let _ = writeln!(out, "| `{name}` | {} | {} |", spec.meaning, if spec.secret { "yes" } else { "no" });
    }
    out
}

fn blockers() -> String {
    let mut out = format!(
        "{GENERATED}# Blockers\n\nWhat a refused call names in `blocker_kind`, in the gate's precedence order: when \
         several hold, the first listed is the one reported. Each refusal also carries its reasons and the operator \
         action for the case at hand; the action below is the general one.\n\n| # | Blocker | Meaning | Operator action |\n| --- | --- | --- | --- |\n"
    );
    for (i, kind) in BlockerKind::ALL.iter().enumerate() {
        let _ = writeln!(out, "| {} | `{}` | {} | {} |", i + 1, kind.as_str(), kind.meaning(), kind.operator_action());
    }
    out
}

/// `<` and `>` outside code spans escaped, so `<PREFIX>` in a help text shows as written
/// instead of vanishing into the book's HTML as an unknown tag.
fn escape_angles(page: &str) -> String {
    let mut out = String::with_capacity(page.len());
    let mut in_code = false;
    for (i, line) in page.split_inclusive('\n').enumerate() {
        if i == 0 && line.starts_with("<!--") {
            out.push_str(line);
            continue;
        }
        for c in line.chars() {
            match c {
                '`' => {
                    in_code = !in_code;
                    out.push(c);
                }
                '<' if !in_code => out.push_str("&lt;"),
                '>' if !in_code => out.push_str("&gt;"),
                _ => out.push(c),
            }
        }
    }
    out
}

#[test]
fn the_generated_reference_pages_are_current() {
    let mut pages = vec![
        ("commands.md".to_owned(), commands()),
        ("config.md".to_owned(), format!("{GENERATED}{}", fleetgate_config::reference::render())),
        ("environment.md".to_owned(), environment()),
        ("blockers.md".to_owned(), blockers()),
    ];
    // One page per forge dialect: every tool and method, what it does, the invariants it
    // may meet, the roles that may make it.
    for name in fleetgate_core::dialect::NAMES {
        let dialect = fleetgate_core::dialect::by_name(name).unwrap();
        pages.push((format!("{name}.md"), format!("{GENERATED}{}", dialect.reference())));
    }
    let bless = fleetgate_testkit::pg::harness_env("FLEETGATE_BLESS_DOCS").is_some();
    let mut stale = Vec::new();
    for (file, content) in &pages {
        let file = file.as_str();
        let content = escape_angles(content);
        let path = docs().join(file);
        if bless {
            std::fs::create_dir_all(docs()).unwrap();
            std::fs::write(&path, &content).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(content.as_str()) {
            stale.push(file);
        }
    }
    assert!(
        stale.is_empty(),
        "docs/reference/{stale:?} no longer match the code: regenerate with \
         `FLEETGATE_BLESS_DOCS=1 cargo test -p fleetgate --test it docs`"
    );
}

/// The book names every invariant with what it holds and what lifting it gives up, as the
/// code says: the policy chapter and the threat model.
#[test]
fn the_book_names_every_invariant_as_the_code_states_it() {
    let policy = std::fs::read_to_string(docs().join("../policy.md")).unwrap();
    let threat = std::fs::read_to_string(docs().join("../threat-model.md")).unwrap();
    for i in fleetgate_core::effect::Invariant::ALL {
        let row = format!("| `{i}` | {} | {} |", i.holds(), i.exposes());
        assert!(policy.contains(&row), "docs/policy.md lacks {row}");
        let lift = format!("| `{i}` | {} |", i.exposes());
        assert!(threat.contains(&lift), "docs/threat-model.md lacks {lift}");
    }
}
