//! The look-alike's automation on real git: what the forge does later (closing keywords in
//! commits landing and in a PR's texts at its merge) and elsewhere (a merge deleting its
//! head in a fork, and the fork's PRs that follows).

use super::{Fixture, Flags, fixture};
use clap::Parser;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A forge on a fresh bare repository with one commit on `main`, and a fork of it
/// (`alice/forge`); `user` is who the fixture acts as.
fn forge(dir: &Path, user: &str) -> Fixture {
    let work = dir.join("work");
    if !dir.join("forge.git").exists() {
        std::fs::create_dir_all(&work).unwrap();
        git(&work, &["init", "-q", "-b", "main"]);
        std::fs::write(work.join("README"), "hello\n").unwrap();
        git(&work, &["add", "README"]);
        git(&work, &["commit", "-q", "-m", "Initial"]);
        git(dir, &["init", "-q", "--bare", "-b", "main", "forge.git"]);
        git(&work, &["push", "-q", &dir.join("forge.git").display().to_string(), "HEAD:refs/heads/main"]);
        git(dir, &["clone", "-q", "--bare", "forge.git", "fork.git"]);
    }
    let fork = format!("alice/forge={}", dir.join("fork.git").display());
    let repo = dir.join("forge.git").display().to_string();
    let flags = Flags::try_parse_from(["fixture", "--repo", &repo, "--user", user, "--fork", &fork]).unwrap();
    fixture(flags).unwrap()
}

fn call(f: &Fixture, tool: &str, args: Value) -> Value {
    let mut args = args.as_object().cloned().unwrap();
    args.entry("owner").or_insert(json!("fleet"));
    args.entry("repo").or_insert(json!("forge"));
    match f.call_and_act(tool, args) {
        Some(Ok(v)) => v,
        other => panic!("{tool}: {other:?}"),
    }
}

fn issue(f: &Fixture, title: &str) -> i64 {
    call(f, "issue_write", json!({ "method": "create", "title": title, "body": "b" }))["number"].as_i64().unwrap()
}

fn state(f: &Fixture, n: i64) -> String {
    let v = call(f, "issue_read", json!({ "method": "get", "issue_number": n }));
    v["state"].as_str().unwrap().to_owned()
}

fn write(f: &Fixture, branch: &str, path: &str, message: &str) {
    call(
        f,
        "create_or_update_file",
        json!({ "path": path, "content": "x\n", "message": message, "branch_name": branch }),
    );
}

fn branch(f: &Fixture, name: &str) {
    call(f, "create_branch", json!({ "branch": name }));
}

fn open(f: &Fixture, head: &str, body: &str) -> i64 {
    let create = json!({ "method": "create", "title": head, "body": body, "head": head, "base": "main" });
    call(f, "pull_request_write", create)["number"].as_i64().unwrap()
}

fn merge(f: &Fixture, pr: i64, extra: Value) -> Value {
    let mut args = json!({ "method": "merge", "pull_number": pr });
    for (k, v) in extra.as_object().unwrap() {
        args[k] = v.clone();
    }
    call(f, "pull_request_write", args)
}

#[test]
fn a_closing_keyword_acts_when_its_commit_lands_on_the_default_branch_or_the_issue_s_ref() {
    let dir = tempfile::tempdir().unwrap();
    let f = forge(dir.path(), "author");
    let (one, two, three) = (issue(&f, "one"), issue(&f, "two"), issue(&f, "three"));
    branch(&f, "feature");
    write(&f, "feature", "a.txt", &format!("Fixes #{one}"));
    assert_eq!(state(&f, one), "open", "a feature branch closes nothing");
    // The issue's `ref` names the branch whose commits close it, with `!`.
    call(&f, "issue_write", json!({ "method": "update", "issue_number": two, "ref": "feature" }));
    write(&f, "feature", "b.txt", &format!("resolves: !{two}"));
    assert_eq!(state(&f, two), "closed");
    // Landing on main (by the merge) closes what the branch's commits say; the merge's own
    // message too.
    let pr = open(&f, "feature", "b");
    merge(&f, pr, json!({ "message": format!("Closes #{three}") }));
    assert_eq!((state(&f, one), state(&f, three)), ("closed".to_owned(), "closed".to_owned()));
    // A reopening keyword reopens.
    write(&f, "main", "c.txt", &format!("Reopens #{one}"));
    assert_eq!(state(&f, one), "open");
}

#[test]
fn a_merge_closes_what_its_title_body_and_comments_reference_in_any_repository() {
    let dir = tempfile::tempdir().unwrap();
    let f = forge(dir.path(), "author");
    let (body, comment, review) = (issue(&f, "body"), issue(&f, "comment"), issue(&f, "review"));
    let other = call(&f, "issue_write", json!({ "owner": "alice", "method": "create", "title": "t", "body": "b" }));
    let other = other["number"].as_i64().unwrap();
    branch(&f, "work");
    write(&f, "work", "w.txt", "Work");
    let pr = open(&f, "work", &format!("**Fixes** #{body} and closes alice/forge#{other}"));
    call(
        &f,
        "issue_write",
        json!({ "method": "add_comment", "issue_number": pr, "body": format!("fixes !{comment}") }),
    );
    let review_args = json!({ "method": "create", "pull_number": pr, "state": "COMMENT", "body": "b",
                              "comments": [{ "path": "w.txt", "body": format!("Closes #{review}"), "new_line_num": 1 }] });
    call(&f, "pull_request_review_write", review_args);
    assert_eq!(state(&f, body), "open", "nothing closes before the merge");
    merge(&f, pr, json!({}));
    for n in [body, comment, review] {
        assert_eq!(state(&f, n), "closed", "#{n}");
    }
    let other = call(&f, "issue_read", json!({ "owner": "alice", "method": "get", "issue_number": other }));
    assert_eq!(other["state"], "closed", "in the fork");
}

#[test]
fn a_merge_deletes_a_fork_head_in_the_fork_and_moves_the_fork_s_prs() {
    let dir = tempfile::tempdir().unwrap();
    let f = forge(dir.path(), "author");
    let fork = |args: Value| {
        let mut args = args;
        args["owner"] = json!("alice");
        args
    };
    call(&f, "create_branch", fork(json!({ "branch": "release/2" })));
    call(
        &f,
        "create_or_update_file",
        fork(json!({ "path": "r.txt", "content": "r\n", "message": "R",
                                                   "branch_name": "release/2" })),
    );
    // A PR of the fork based on its release/2, and the parent's PR from it.
    call(&f, "create_branch", fork(json!({ "branch": "child", "old_branch": "release/2" })));
    call(
        &f,
        "create_or_update_file",
        fork(json!({ "path": "c.txt", "content": "c\n", "message": "C",
                                                   "branch_name": "child" })),
    );
    let child = call(
        &f,
        "pull_request_write",
        fork(json!({ "method": "create", "title": "c", "body": "b",
                                                            "head": "child", "base": "release/2" })),
    );
    let child = child["number"].as_i64().unwrap();
    let create = json!({ "method": "create", "title": "t", "body": "b", "head": "alice:release/2", "base": "main" });
    let pr = call(&f, "pull_request_write", create);
    assert_eq!(pr["head"]["repo"]["full_name"], "alice/forge");
    let pr = pr["number"].as_i64().unwrap();
    merge(&f, pr, json!({ "delete_branch": true }));
    assert!(git(&dir.path().join("fork.git"), &["branch", "--list", "release/2"]).is_empty(), "deleted in the fork");
    let read = call(&f, "pull_request_read", fork(json!({ "method": "get", "pull_number": child })));
    assert_eq!((read["state"].as_str(), read["base"]["ref"].as_str()), (Some("open"), Some("main")), "{read}");
}
