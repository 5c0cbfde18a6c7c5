// fleetgate dashboard: renders the fleet view pushed on /events (server-sent events)
// into the page shell. No framework and no request to another origin; every text
// from the store goes in through textContent, never as markup, and arrives with its
// invisible and direction-changing characters already escaped (`FleetView::page_json`).
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  // Server time at the last event, and when it arrived here: ages tick locally
  // between pushes (the server pushes only when the fleet changes).
  let clock = null;
  let rendered = false;
  let lastView = null;
  // The CSRF token answering needs (null: the page is read-only: nobody signed in and
  // no operator token), and who is signed in (null: nobody, or no sign-in configured).
  let csrf = null;
  let session = { user: null, sign_in: false };
  fetch("/api/session", { credentials: "same-origin" })
    .then((r) => (r.ok ? r.json() : { csrf: null }))
    .then((s) => {
      csrf = s.csrf;
      session = { user: s.user || null, sign_in: Boolean(s.sign_in) };
      renderWho();
      if (lastView) renderApprovals(lastView);
    })
    .catch(() => {});

  function renderWho() {
    const who = $("who");
    who.hidden = !session.sign_in;
    if (!session.sign_in) return;
    const u = session.user;
    who.replaceChildren(
      ...(u
        ? ["Signed in as ", el("strong", { id: "who-name", text: u.name || u.id }), ` (${u.id}) · `,
          el("a", { href: "/auth/logout", id: "sign-out", text: "sign out" })]
        : [el("a", { href: "/auth/login", id: "sign-in", text: "Sign in" }), " to answer approval requests"]),
    );
  }

  // What the last answer from this page to each request came to (the rows are rebuilt on
  // every push, which must not wipe a refusal before it is read).
  const notes = new Map();

  function showNote(row) {
    const note = row.querySelector(".answer-note");
    const said = notes.get(row.dataset.approval);
    if (!note || !said) return;
    note.className = said.error ? "answer-note error" : "answer-note";
    note.textContent = said.text;
  }

  function answerApproval(id, verb, button) {
    const row = button.closest("tr");
    for (const b of row.querySelectorAll("button")) b.disabled = true;
    const settle = (text, error) => {
      notes.set(id, { text, error });
      const current = document.querySelector(`tr[data-approval="${CSS.escape(id)}"]`);
      if (current) {
        for (const b of current.querySelectorAll("button")) b.disabled = false;
        showNote(current);
      }
    };
    fetch(`/api/approvals/${encodeURIComponent(id)}/${verb}`, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-Fleetgate-Csrf": csrf },
    })
      .then((r) => (r.ok ? r.json() : r.text().then((t) => Promise.reject(new Error(t.trim())))))
      .then((answered) => settle(answered.state === "pending" ? "recorded; still pending" : answered.state, false))
      .catch((e) => settle(String(e.message || e), true));
  }

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined) continue;
      if (key === "text") node.textContent = value;
      else if (key === "data") for (const [k, v] of Object.entries(value)) node.dataset[k] = v;
      else node.setAttribute(key, value);
    }
    for (const child of children) if (child !== null && child !== undefined) node.append(child);
    return node;
  }

  const serverNow = () => (clock ? clock.server + (performance.now() - clock.local) : Date.now());

  function age(seconds) {
    if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "—";
    const s = Math.max(0, Math.round(seconds));
    if (s < 120) return `${s} s`;
    if (s < 7200) return `${Math.floor(s / 60)} min`;
    return `${Math.floor(s / 3600)} h`;
  }

  const since = (ts) => (ts ? (serverNow() - Date.parse(ts)) / 1000 : null);
  const shortRev = (rev) => (rev ? rev.slice(0, 12) : "unknown");
  const cell = (label, content, cls) => el("td", { "data-label": label, class: cls }, content);
  const empty = (span, text) => el("tr", { class: "empty" }, el("td", { colspan: String(span), class: "muted", text }));
  const ticking = (ts) => el("span", { class: "age", data: { since: ts || "" }, text: age(since(ts)) });

  // The row tables of one shape, in page order: each gets its section from the
  // `row-section` template, with ids `${key}-title`, `${key}-note`, `${key}-error` and the
  // table's own id.
  const ROW_SECTIONS = [
    ["workers", "workers", "Workers", ["Worker", "Client", "Profile", "PID", "Epoch", "Lease age / TTL", "State"]],
    ["pr-leases", "leases", "PR leases", ["PR", "Purpose", "Holder", "Head", "Expires in"]],
    ["pr-states", "prs", "Pull requests", ["PR", "State", "Next", "Head", "Review"]],
    ["review-locks", "locks", "Review-decision locks", ["PR", "Session", "Decision", "Head"]],
  ];
  for (const [key, table, title, columns] of ROW_SECTIONS) {
    const section = $("row-section").content.firstElementChild.cloneNode(true);
    // The ids the sections have always had: the key, but for workers, whose key is its table's.
    if (key !== table) section.id = key;
    section.setAttribute("aria-labelledby", `${key}-title`);
    section.querySelector("h2").id = `${key}-title`;
    section.querySelector(".title").textContent = title;
    section.querySelector(".note").id = `${key}-note`;
    section.querySelector(".error").id = `${key}-error`;
    section.querySelector("table").id = table;
    section.querySelector("thead tr").append(...columns.map((c) => el("th", { text: c })));
    $("row-sections").append(section);
  }

  // A row table's body (its empty line when there are no rows), its heading's note and its
  // error line (hidden when there is no error).
  function fill(key, table, rows, none, note, error) {
    $(table).tBodies[0].replaceChildren(...(rows.length ? rows : [empty($(table).tHead.rows[0].cells.length, none)]));
    $(`${key}-note`).textContent = note;
    $(`${key}-error`).hidden = !error;
    $(`${key}-error`).textContent = error || "";
  }

  function renderGate(view) {
    const gate = view.gate;
    const box = $("gate");
    box.dataset.open = String(gate.open);
    $("gate-title").textContent = gate.open
      ? "Mutation gate open"
      : `Mutation gate CLOSED — ${gate.blocker_kind}`;
    const action = $("gate-action");
    action.hidden = gate.open;
    action.replaceChildren(...(gate.open ? [] : [el("strong", { text: "Operator action: " }), gate.operator_action || "—"]));
    $("gate-reasons").replaceChildren(...gate.blocked_reasons.map((r) => el("li", { text: r })));
    $("summary").textContent = view.summary;
  }

  function healthBadge(m) {
    const text = m.health === "stale" && m.liveness ? `stale · ${m.liveness.replace("_", " ")}` : m.health;
    return el("span", { class: `badge ${m.health}`, text: m.duplicate ? `${text} · duplicate` : text });
  }

  function renderRoster(view) {
    const rows = view.members.map((m) =>
      el(
        "tr",
        { data: { profile: m.profile, health: m.health, pid: m.pid === null ? "" : String(m.pid) } },
        cell("Member", el("span", {}, el("strong", { text: m.profile }), el("br"), el("span", { class: "muted", text: m.namespace }))),
        cell("Role", m.expected ? m.role : `${m.role} (not in roster)`),
        cell("Health", healthBadge(m)),
        cell("PID", m.pid === null ? "—" : String(m.pid), "num"),
        cell("Cohort", m.pid === null ? "—" : m.cohort_id || "unknown"),
        cell("Revision", m.pid === null ? "—" : el("code", { text: shortRev(m.startup_head), title: m.startup_head || "" })),
        cell("Row refreshed", m.last_heartbeat_at ? ticking(m.last_heartbeat_at) : "—"),
      ),
    );
    $("roster").tBodies[0].replaceChildren(...(rows.length ? rows : [empty(7, "the roster is empty")]));
    const unregistered = view.unregistered_processes;
    $("unregistered").hidden = unregistered.length === 0;
    $("unregistered-list").replaceChildren(
      ...unregistered.map((p) => el("li", {}, el("strong", { text: `pid ${p.pid}` }), " ", el("code", { text: p.command }))),
    );
    const others = view.other_gateways;
    $("other-gateways").hidden = others.length === 0;
    $("other-gateways-list").replaceChildren(
      ...others.map((g) =>
        el(
          "li",
          {},
          el("strong", { text: `pid ${g.pid}` }),
          g.state === "pending"
            ? ` just started (${g.age_seconds} s ago), not proven another fleet's until ${g.until} (${g.why}); store `
            : g.state === "unproven"
              ? ` not proven another fleet's, so the gate is closed: ${g.why}; store `
              : ` fleet ${g.fleet}'s ${g.profile}, checkout ${g.repository_root}` +
                (g.repository ? `, bound to ${g.repository}` : "") + `; ${g.engine} store `,
          el("code", { text: g.store }),
        ),
      ),
    );
    const f = view.facts;
    const cohorts =
      f.running_member_count === 0 ? "no running cohort"
        : f.single_cohort === null ? "a cohort is unknown"
        : `cohorts: ${f.cohort_ids.join(", ")}`;
    const revisions = `revisions: ${f.startup_revisions.map(shortRev).join(", ") || "none"}`;
    const incomplete = f.inventory_complete ? "" : ` · incomplete: ${f.incomplete_reasons.join("; ")}`;
    $("facts").textContent = `${f.running_member_count} of ${f.configured_member_count} running · ${cohorts} · ${revisions}${incomplete}`;
    $("fleet-name").textContent = view.fleet.name;
  }

  // Each note's badge by what it is about: only a lift is marked hard.
  const NOTE_BADGES = {
    lifted: ["stale", "lifted"],
    principal: ["stale", "one principal, two roles"],
    people: ["stale", "people"],
    keywords: ["muted", "forge keywords"],
  };

  function renderPolicy(view) {
    $("policy-section").hidden = view.policy_notes.length === 0;
    $("policy").replaceChildren(
      ...view.policy_notes.map((note) => {
        const [tone, label] = NOTE_BADGES[note.kind] || ["muted", note.kind];
        return el("li", { class: note.kind === "lifted" ? "hard" : null, data: { kind: note.kind } },
          el("span", { class: `badge ${tone}`, text: label }), " ", note.text);
      }),
    );
  }

  function renderDiagnostics(view) {
    $("diagnostics-section").hidden = view.diagnostics.length === 0;
    $("diagnostics").replaceChildren(
      ...view.diagnostics.map((d) => el("li", { class: d.hard ? "hard" : "" }, el("span", { class: `badge ${d.hard ? "stale" : "muted"}`, text: d.hard ? "hard" : "note" }), " ", d.text)),
    );
  }

  function lease(w) {
    const bar = el("span", { class: "bar" }, el("span", { class: "fill" }));
    return el("span", { class: "lease", data: { since: w.last_heartbeat_at, ttl: String(w.heartbeat_ttl_seconds) } },
      ticking(w.last_heartbeat_at), ` / ${age(w.heartbeat_ttl_seconds)} `, bar);
  }

  function renderWorkers(view) {
    const rows = view.workers.map((w) => {
      const state = w.live ? "live" : w.heartbeat_fresh ? "pid gone" : "expired";
      return el(
        "tr",
        { data: { worker: w.worker_identity, live: String(w.live) } },
        cell("Worker", el("code", { text: w.worker_identity, title: `session ${w.session_id}` })),
        cell("Client", w.client_name),
        cell("Profile", w.profile),
        cell("PID", w.pid === null ? "—" : String(w.pid), "num"),
        cell("Epoch", String(w.fencing_epoch), "num"),
        cell("Lease age / TTL", lease(w)),
        cell("State", el("span", { class: `badge ${w.live ? "running" : "stale"}`, text: state })),
      );
    });
    fill("workers", "workers", rows, "no active workers", `${view.workers.length} active, ${view.stopped_workers} stopped`,
      view.workers_error && `worker rows unreadable: ${view.workers_error}`);
  }

  const until = (ts) => {
    const left = -since(ts);
    return left > 0 ? age(left) : "expired";
  };

  function renderLeases(view) {
    const rows = view.pr_leases.map((l) =>
      el(
        "tr",
        { data: { pr: l.pr, purpose: l.purpose } },
        cell("PR", el("strong", { text: l.pr })),
        cell("Purpose", el("span", { class: `badge ${l.purpose === "merge" ? "stale" : "running"}`, text: l.purpose })),
        cell("Holder", el("span", {}, el("code", { text: l.holder }), el("br"),
          el("span", { class: "muted", text: `${l.holder_client} · ${l.holder_profile}` }))),
        cell("Head", el("code", { text: shortRev(l.head), title: l.head })),
        cell("Expires in", el("span", { class: "until", data: { until: l.expires_at }, text: until(l.expires_at) })),
      ),
    );
    fill("pr-leases", "leases", rows, "no live PR leases", rows.length ? `${rows.length} live` : "",
      view.pr_leases_error && `PR leases unreadable: ${view.pr_leases_error}`);
  }

  function renderPrs(view) {
    const rows = view.prs.map((p) =>
      el(
        "tr",
        { data: { pr: p.pr, state: p.state } },
        cell("PR", el("strong", { text: p.pr })),
        cell("State", el("span", { class: `badge ${p.merge_ready ? "running" : "stale"}`, text: p.state })),
        cell("Next", el("span", {}, el("strong", { text: p.who_is_next }), el("br"),
          el("span", { class: "muted", text: p.next_action }))),
        cell("Head", el("code", { text: shortRev(p.head_sha), title: p.head_sha })),
        cell("Review", el("span", { text: p.review_status })),
      ),
    );
    fill("pr-states", "prs", rows, "no PR with a live lease or lock", rows.length ? `${rows.length}` : "",
      view.prs_error && `PR states unreadable: ${view.prs_error}`);
  }

  function renderLocks(view) {
    const rows = view.review_locks.map((l) =>
      el(
        "tr",
        { data: { lock: l.lock_id, pr: l.pr } },
        cell("PR", el("strong", { text: l.pr })),
        cell("Session", el("span", {}, el("code", { text: l.session }), el("br"),
          el("span", { class: "muted", text: l.holder }))),
        cell("Decision", el("span", { text: l.verdict })),
        cell("Head", el("code", { text: shortRev(l.head), title: l.head })),
      ),
    );
    fill("review-locks", "locks", rows, "no live review-decision locks", rows.length ? `${rows.length} live` : "",
      view.review_locks_error && `review-decision locks unreadable: ${view.review_locks_error}`);
  }

  function renderApprovals(view) {
    const rows = view.approvals.map((a) =>
      el(
        "tr",
        { data: { approval: a.id } },
        cell("Request", el("span", {}, el("code", { text: a.id }), el("br"),
          el("span", { class: "muted", text: a.requested_at }))),
        cell("Who", el("span", {}, el("strong", { text: a.profile }), el("br"),
          el("span", { class: "muted", text: a.worker || "-" }))),
        cell("Call", el("span", {},
          ...(a.does ? [el("strong", { class: "does", text: a.does }), el("br")] : []),
          el("code", { class: "tool", text: a.tool }), el("br"),
          el("code", { class: "arguments", text: a.arguments }))),
        cell("Why", el("span", { text: a.why })),
        cell("Approvers", el("span", {},
          el("span", { class: "needed", text: a.needed === 1 ? "1 more approval" : `${a.needed} more approvals` }),
          ` of ${a.required} · from ${a.approvers.length ? a.approvers.join(", ") : "any operator"}`,
          ...(a.principal ? [el("br"), el("span", { class: "muted", text: `not ${a.principal} (whose call it is)` })] : []),
          ...a.answers.map((x) => el("span", { class: "answer muted" }, el("br"), x)),
          el("br"), el("span", { class: "where muted", text: a.answered_where }))),
        cell("Answer", csrf ? el("span", {},
          el("button", { type: "button", class: "approve", data: { answer: "approve" } }),
          el("button", { type: "button", class: "deny", data: { answer: "deny" } }),
          el("span", { class: "answer-note" }))
          : el("span", { class: "muted", text: session.sign_in ? "sign in to answer" : "not answerable on this page" })),
      ),
    );
    for (const row of rows) {
      for (const button of row.querySelectorAll("button")) {
        button.textContent = button.dataset.answer;
        button.addEventListener("click", () => answerApproval(row.dataset.approval, button.dataset.answer, button));
      }
      showNote(row);
    }
    fill("approvals", "approvals", rows, "no call waits for an operator", rows.length ? `${rows.length} waiting` : "",
      view.approvals_error && `approval requests unreadable: ${view.approvals_error}`);
    // What each notification target still owes (a receiver down: it is retried while the
    // request is open).
    $("notify").replaceChildren(...view.notify.map((line, i) =>
      el("li", { class: (view.notify_owed[i] || ["", 0])[1] > 0 ? "error" : "muted", text: line })));
  }

  function renderShadow(view) {
    const rows = view.shadow.map((g) =>
      el(
        "tr",
        { data: { tool: g.tool, from: g.from, to: g.to } },
        cell("Tool", el("code", { text: g.tool })),
        cell("Running rules", el("span", { class: "badge muted", text: g.from })),
        cell("Candidate", el("span", { class: `badge ${g.to === "allow" ? "running" : "stale"}`, text: g.to })),
        cell("Candidate rule", el("span", { text: g.rule })),
        cell("Calls", String(g.count), "num"),
        cell("Last", el("time", { datetime: g.last, text: g.last })),
      ),
    );
    $("shadow-section").hidden = rows.length === 0;
    $("shadow").tBodies[0].replaceChildren(...rows);
    $("shadow-note").textContent = rows.length ? `among the newest ${view.audit_window} decisions` : "";
  }

  function renderRefusals(view) {
    const items = view.refusals.map((r) =>
      el(
        "li",
        { data: { blocker: r.blocker_kind || "" } },
        el("div", { class: "when" }, el("span", { class: "badge stale", text: r.blocker_kind || "refused" }), " ",
          el("strong", { text: r.tool }), ` by ${r.profile} · `, el("time", { datetime: r.at, text: r.at })),
        el("ul", { class: "reasons" }, ...r.reasons.map((x) => el("li", { text: x }))),
        el("p", { class: "action" }, el("strong", { text: "Operator action: " }), r.operator_action || "—"),
      ),
    );
    $("refusals").replaceChildren(...items);
    $("refusals-note").textContent = items.length ? "" : `none among the newest ${view.audit_window} decisions`;
    $("refusals-error").hidden = !view.refusals_error;
    $("refusals-error").textContent = view.refusals_error ? `audit log unreadable: ${view.refusals_error}` : "";
  }

  function render(view) {
    clock = { server: Date.parse(view.generated_at), local: performance.now() };
    lastView = view;
    renderGate(view);
    renderRoster(view);
    renderPolicy(view);
    renderDiagnostics(view);
    renderWorkers(view);
    renderLeases(view);
    renderPrs(view);
    renderLocks(view);
    renderApprovals(view);
    renderShadow(view);
    renderRefusals(view);
    $("store").textContent = view.fleet.store;
    $("generated").textContent = view.generated_at;
    document.body.dataset.version = String(view.version);
    if (!rendered) {
      rendered = true;
      performance.mark("fleet:first-render");
    }
  }

  function tick() {
    for (const node of document.querySelectorAll(".age[data-since]")) {
      if (node.dataset.since) node.textContent = age(since(node.dataset.since));
    }
    for (const node of document.querySelectorAll(".until[data-until]")) {
      node.textContent = until(node.dataset.until);
    }
    for (const node of document.querySelectorAll(".lease")) {
      const ratio = since(node.dataset.since) / Number(node.dataset.ttl);
      const fill = node.querySelector(".fill");
      fill.style.width = `${Math.min(100, Math.max(0, ratio * 100)).toFixed(1)}%`;
      fill.classList.toggle("late", ratio > 2 / 3);
    }
  }

  function setConnection(state, text) {
    const conn = $("conn");
    conn.dataset.state = state;
    conn.textContent = text;
  }

  function connect() {
    const source = new EventSource("/events");
    source.addEventListener("fleet", (event) => {
      render(JSON.parse(event.data));
      tick();
      setConnection("live", "live");
    });
    source.onerror = () => {
      const when = lastView ? ` — showing the fleet as of ${lastView.generated_at}` : "";
      if (source.readyState === EventSource.CLOSED) {
        // Refused (401/403) or not an event stream: the browser gives up; try again later.
        setConnection("down", `disconnected${when}`);
        source.close();
        setTimeout(connect, 5000);
      } else {
        setConnection("down", `reconnecting${when}`);
      }
    };
  }

  setInterval(tick, 1000);
  connect();
})();
