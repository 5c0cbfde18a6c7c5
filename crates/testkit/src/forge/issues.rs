//! Issues and their comments and labels. Issues and pull requests share one number
//! sequence, as in Gitea; an issue tool given a pull request's number works on the pull
//! request's conversation.

use super::Forge;
use super::args::{self, Args};
use super::catalog::{ISSUE_READ_METHODS, ISSUE_WRITE_METHODS};
use super::ledger::{Comment, Issue, State, now};
use serde_json::{Value, json};

fn labels(ids: &[i64]) -> Vec<Value> {
    ids.iter().map(|id| json!({ "id": id, "name": format!("label-{id}") })).collect()
}

fn slim_comment(c: &Comment) -> Value {
    json!({ "id": c.id, "body": c.body, "user": c.user, "created_at": c.created_at, "updated_at": c.updated_at })
}

fn slim(f: &Forge, i: &Issue) -> Value {
    let mut m = json!({
        "number": i.number,
        "title": i.title,
        "body": i.body,
        "state": i.state,
        "html_url": format!("{}/issues/{}", f.html_base(), i.number),
        "user": i.user,
        "labels": i.labels.iter().map(|l| format!("label-{l}")).collect::<Vec<_>>(),
        "comments": i.comments.len(),
        "created_at": i.created_at,
        "updated_at": i.updated_at,
        "closed_at": i.closed_at,
    });
    if !i.assignees.is_empty() {
        m["assignees"] = json!(i.assignees);
    }
    if let Some(ms) = i.milestone {
        m["milestone"] = json!({ "id": ms, "title": format!("milestone-{ms}") });
    }
    if let Some(branch) = &i.branch {
        m["ref"] = json!(branch);
    }
    m
}

/// An issue or a pull request, as the issue tools see it.
enum Thread<'a> {
    Issue(&'a mut Issue),
    Pull(&'a mut super::ledger::Pull),
}

fn thread(state: &mut State, number: i64) -> Option<Thread<'_>> {
    if let Some(i) = state.issues.iter_mut().find(|i| i.number == number) {
        return Some(Thread::Issue(i));
    }
    state.pulls.iter_mut().find(|p| p.number == number).map(Thread::Pull)
}

impl Thread<'_> {
    fn comments(&mut self) -> &mut Vec<Comment> {
        match self {
            Self::Issue(i) => &mut i.comments,
            Self::Pull(p) => &mut p.comments,
        }
    }
    fn labels(&mut self) -> &mut Vec<i64> {
        match self {
            Self::Issue(i) => &mut i.labels,
            Self::Pull(p) => &mut p.labels,
        }
    }
    fn view(&self, f: &Forge) -> Value {
        match self {
            Self::Issue(i) => slim(f, i),
            Self::Pull(p) => {
                let mut m = slim(
                    f,
                    &Issue {
                        number: p.number,
                        title: p.title.clone(),
                        body: p.body.clone(),
                        state: p.state.clone(),
                        user: p.user.clone(),
                        labels: p.labels.clone(),
                        assignees: p.assignees.clone(),
                        comments: p.comments.clone(),
                        created_at: p.created_at.clone(),
                        updated_at: p.updated_at.clone(),
                        closed_at: p.closed_at.clone(),
                        ..Issue::default()
                    },
                );
                m["html_url"] = json!(format!("{}/pulls/{}", f.html_base(), p.number));
                m["is_pull"] = json!(true);
                m
            }
        }
    }
}

pub fn list(f: &Forge, args: &Args) -> Result<Value, String> {
    f.check_repo(args)?;
    let wanted = args::opt_string(args, "state").unwrap_or_else(|| "all".to_owned());
    let kind = args::opt_string(args, "type");
    let page = args::page(args, 30);
    f.ledger.with(|state| {
        let mut listed: Vec<(i64, Value)> = Vec::new();
        if kind.as_deref() != Some("pulls") {
            listed.extend(state.issues.iter().filter(|i| wanted == "all" || i.state == wanted).map(|i| {
                let mut v = slim(f, i);
                if let Some(m) = v.as_object_mut() {
                    m.remove("body");
                    m.remove("closed_at");
                }
                (i.number, v)
            }));
        }
        if kind.as_deref() != Some("issues") {
            for p in state.pulls.iter_mut().filter(|p| wanted == "all" || p.state == wanted) {
                let mut v = Thread::Pull(p).view(f);
                if let Some(m) = v.as_object_mut() {
                    m.remove("body");
                    m.remove("closed_at");
                    m.remove("is_pull");
                }
                listed.push((v["number"].as_i64().unwrap_or(0), v));
            }
        }
        listed.sort_by_key(|(n, _)| -n);
        Ok(json!(args::paged(listed.into_iter().map(|(_, v)| v).collect(), page)))
    })
}

pub fn read(f: &Forge, args: &Args) -> Result<Value, String> {
    let method = args::string(args, "method")?;
    if !ISSUE_READ_METHODS.contains(&method.as_str()) {
        return Err(format!("unknown method: {method}"));
    }
    let (owner, repo) = f.check_repo(args)?;
    let number = args::index(args, "issue_number")?;
    f.ledger.with(|state| {
        let missing = |what: &str| format!("get {owner}/{repo}/{what} err: The target couldn't be found.");
        let mut t = thread(state, number).ok_or_else(|| missing(&format!("issue/{number}")))?;
        Ok(match method.as_str() {
            "get" => t.view(f),
            "get_comments" => json!(t.comments().iter().map(slim_comment).collect::<Vec<_>>()),
            _ => json!(labels(t.labels())),
        })
    })
}

pub fn write(f: &Forge, args: &Args) -> Result<Value, String> {
    let method = args::string(args, "method")?;
    if !ISSUE_WRITE_METHODS.contains(&method.as_str()) {
        return Err(format!("unknown method: {method}"));
    }
    let (owner, repo) = f.check_repo(args)?;
    f.ledger.with(|state| match method.as_str() {
        "create" => {
            let title = args::string(args, "title")?;
            let body = args::string(args, "body")?;
            let at = now();
            let issue = Issue {
                number: state.take_index(),
                title,
                body,
                state: "open".to_owned(),
                user: f.user.clone(),
                labels: args::ids(args, "labels").unwrap_or_default(),
                assignees: args::strings(args, "assignees"),
                milestone: args::opt_int(args, "milestone"),
                branch: args::opt_string(args, "ref"),
                created_at: at.clone(),
                updated_at: at,
                ..Issue::default()
            };
            let answer = slim(f, &issue);
            state.issues.push(issue);
            Ok(answer)
        }
        "edit_comment" => {
            let id = args::index(args, "commentID")?;
            let body = args::string(args, "body")?;
            let c = state
                .issues
                .iter_mut()
                .flat_map(|i| i.comments.iter_mut())
                .chain(state.pulls.iter_mut().flat_map(|p| p.comments.iter_mut()))
                .find(|c| c.id == id)
                .ok_or_else(|| {
                    format!("edit {owner}/{repo}/issues/comments/{id} err: The target couldn't be found.")
                })?;
            c.body = body;
            c.updated_at = now();
            Ok(slim_comment(c))
        }
        _ => {
            let number = args::index(args, "issue_number")?;
            let next_id = state.next_id;
            let missing = || format!("{method} {owner}/{repo}/issue/{number} err: The target couldn't be found.");
            let mut t = thread(state, number).ok_or_else(missing)?;
            let answer = issue_method(f, &mut t, &method, args, next_id)?;
            if method == "add_comment" {
                state.next_id += 1;
            }
            Ok(answer)
        }
    })
}

fn issue_method(f: &Forge, t: &mut Thread<'_>, method: &str, args: &Args, next_id: i64) -> Result<Value, String> {
    match method {
        "update" => {
            let at = now();
            match t {
                Thread::Issue(i) => {
                    if let Some(title) = args::opt_string(args, "title") {
                        i.title = title;
                    }
                    if let Some(body) = args::opt_string(args, "body") {
                        i.body = body;
                    }
                    if let Some(branch) = args::opt_string(args, "ref") {
                        i.branch = Some(branch);
                    }
                    let assignees = args::strings(args, "assignees");
                    if !assignees.is_empty() {
                        i.assignees = assignees;
                    }
                    if let Some(ms) = args::opt_int(args, "milestone") {
                        i.milestone = Some(ms);
                    }
                    if let Some(state) = args::opt_string(args, "state").filter(|s| s == "open" || s == "closed") {
                        i.closed_at = (state == "closed").then(|| at.clone());
                        i.state = state;
                    }
                    i.updated_at = at;
                }
                Thread::Pull(p) => {
                    if let Some(title) = args::opt_string(args, "title") {
                        p.title = title;
                    }
                    if let Some(body) = args::opt_string(args, "body") {
                        p.body = body;
                    }
                    if let Some(state) = args::opt_string(args, "state").filter(|s| s == "open" || s == "closed")
                        && !p.merged
                    {
                        p.closed_at = (state == "closed").then(|| at.clone());
                        p.state = state;
                    }
                    p.updated_at = at;
                }
            }
            Ok(t.view(f))
        }
        "add_comment" => {
            let body = args::string(args, "body")?;
            let at = now();
            let c = Comment { id: next_id, body, user: f.user.clone(), created_at: at.clone(), updated_at: at };
            let answer = slim_comment(&c);
            t.comments().push(c);
            Ok(answer)
        }
        "add_labels" | "replace_labels" => {
            let ids = args::ids(args, "labels").ok_or_else(|| "labels (array of IDs) is required".to_owned())?;
            let current = t.labels();
            if method == "replace_labels" {
                current.clear();
            }
            for id in ids {
                if !current.contains(&id) {
                    current.push(id);
                }
            }
            Ok(json!(labels(current)))
        }
        "remove_label" => {
            let id = args::index(args, "label_id")?;
            t.labels().retain(|l| *l != id);
            Ok(json!("Label removed successfully"))
        }
        _ => {
            t.labels().clear();
            Ok(json!("Labels cleared successfully"))
        }
    }
}
