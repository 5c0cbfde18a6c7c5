"""Crash-consistency torture (run by scripts/torture; not a test).

Usage: torture.py FLEETGATE FIXTURE STORE [--iterations N] [--gateways M] [--seed S] [--pg-restarts R]

STORE is a SQLite path or a postgres:// URL. Against it, over and over:

* CLI processes that register workers, renew their leases at the epoch they last knew, and
  claim new generations (each claim fences the epoch before it), several at once, each one
  killed with SIGKILL at a random moment (or let finish, its answer kept);
* gateways (`fleetgate serve` in front of the conformance fixture) fed a burst of allowed,
  audited mutating calls and killed with SIGKILL at a random moment.

Then the invariants, read back through the CLI (so both engines are checked the same way):

1. a renewal is never accepted at a fenced epoch: once a claim that moved a worker past epoch
   E was acknowledged, no renewal at E started afterwards was accepted;
2. every worker row's epoch is at least the highest epoch any acknowledged claim reported,
   and no identity appears twice;
3. every mutating call a gateway answered as allowed (so forwarded) has its audit entry: the
   allowed entries of the tool are at least the acknowledged calls (an entry may exist for a
   call killed before its answer reached the client, never the other way round);
4. audit ids strictly increase; on SQLite they have no gaps (a killed transaction rolls back
   its id with it); PostgreSQL sequences may skip, and the gaps are counted, not failed;
5. SQLite only: `PRAGMA integrity_check` is `ok` and the schema version is intact.

With --pg-restarts R (PostgreSQL; scripts/torture sets FLEETGATE_TORTURE_PG_FIFOS), the server
is also restarted R times at random moments under this load, each time either `pg_ctl restart
-m fast` or SIGKILL of the postmaster and a start, asked of scripts/torture's helper outside
this PID namespace. A survivor gateway (a second roster member) runs through the whole run,
never killed, its mutating calls acknowledged like the others'. Two more invariants:

6. every registration acknowledged is in the store;
7. the survivor rode every fault out as transient: it is still running, it answers a mutating
   call as allowed (audited and forwarded) once the server is back, and its worker's lease was
   renewed after the last fault.

Prints one summary line per invariant and `torture: N iterations, K killed, V violations`;
exits 1 on any violation.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

ROSTER = """
[fleet]
name = "torture"
tool_prefix = "fleet_"

[tools]
mutating = ["test_simple_text"]

[[members]]
namespace = "torture-author"
profile = "torture-author"
role = "author"
"""


SURVIVOR = """
[[members]]
namespace = "torture-survivor"
profile = "torture-survivor"
role = "author"
"""


def cli(base: list[str], *args: str) -> tuple[int, dict]:
    out = subprocess.run(base + list(args), capture_output=True, timeout=60)
    try:
        value = json.loads(out.stdout or b"{}")
    except json.JSONDecodeError:
        value = {"unparsed": out.stdout.decode(errors="replace"), "stderr": out.stderr.decode(errors="replace")}
    return out.returncode, value


class Torture:
    def __init__(self, fleetgate: str, fixture: str, store: str, seed: int, survivor: bool = False) -> None:
        self.rng = random.Random(seed)
        self.state = tempfile.mkdtemp(prefix="fleetgate-torture-")
        self.config = os.path.join(self.state, "fleet.toml")
        with open(self.config, "w") as f:
            f.write(ROSTER + (SURVIVOR if survivor else ""))
        self.repo = os.path.join(self.state, "checkout")
        subprocess.run(["git", "init", "-q", self.repo], check=True)
        subprocess.run(["git", "-C", self.repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                        "--allow-empty", "-m", "start"], check=True)
        self.store = store
        self.fixture = fixture
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.state,
                    "GITEA_CLIENT_MANAGED": "1", "GITEA_MCP_COHORT_ID": "torture"}
        self.base = [fleetgate, "--store", store, "--config", self.config]
        self.workers: dict[str, int] = {}  # identity -> the epoch last acknowledged
        # (start, end, identity, epoch presented, accepted) of every renewal that finished
        self.renewals: list[tuple[float, float, str, int, bool]] = []
        # (acknowledged at, identity, new epoch) of every claim that finished
        self.claims: list[tuple[float, str, int]] = []
        self.killed = 0
        self.acknowledged_calls = 0
        self.generation = 0
        self.registered: list[str] = []  # every identity whose registration was acknowledged
        self.survivor: Survivor | None = None

    # -- the CLI half -------------------------------------------------------------------------

    def register(self) -> None:
        self.generation += 1
        code, value = cli(self.base, "worker", "register", "--client", "torture", "--session",
                          f"s{self.generation}", "--generation", f"g{self.generation}", "--role", "author",
                          "--profile", "torture-author", "--ttl", "600", "--json")
        if code == 0 and "worker_identity" in value:
            self.workers[value["worker_identity"]] = value["fencing_epoch"]
            self.registered.append(value["worker_identity"])

    def spawn(self) -> tuple[subprocess.Popen, str, str, int, float]:
        identity = self.rng.choice(sorted(self.workers))
        epoch = self.workers[identity]
        if self.rng.random() < 0.25:
            self.generation += 1
            argv = ["worker", "claim-generation", "--identity", identity, "--generation", f"g{self.generation}"]
            kind = "claim"
        else:
            # Sometimes present an epoch already fenced on purpose.
            presented = epoch - 1 if epoch > 1 and self.rng.random() < 0.2 else epoch
            argv = ["worker", "heartbeat", "--identity", identity, "--epoch", str(presented)]
            kind, epoch = "renew", presented
        proc = subprocess.Popen(self.base + argv + ["--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        return proc, kind, identity, epoch, time.monotonic()

    def cli_round(self, in_flight: int) -> None:
        running = [self.spawn() for _ in range(in_flight)]
        for proc, kind, identity, epoch, started in running:
            if self.rng.random() < 0.5:
                time.sleep(self.rng.uniform(0, self.rng.choice((0.004, 0.02))))
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                    self.killed += 1
                    continue
            out, _ = proc.communicate(timeout=60)
            ended = time.monotonic()
            try:
                value = json.loads(out or b"{}")
            except json.JSONDecodeError:
                continue
            if kind == "claim" and proc.returncode == 0 and "fencing_epoch" in value:
                self.claims.append((ended, identity, value["fencing_epoch"]))
                self.workers[identity] = max(self.workers[identity], value["fencing_epoch"])
            elif kind == "renew" and "renewed" in value:
                self.renewals.append((started, ended, identity, epoch, bool(value["renewed"])))

    def resync(self) -> None:
        """Learn each worker's epoch from its row: a killed claim may have moved it unseen."""
        code, listed = cli(self.base, "worker", "list", "--json")
        for w in listed.get("workers", []) if code == 0 else []:
            if w["worker_identity"] in self.workers:
                self.workers[w["worker_identity"]] = w["fencing_epoch"]

    # -- the gateway half ---------------------------------------------------------------------

    def serve(self, profile: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        argv = self.base + ["serve", "--profile", profile, "--repo-root", self.repo, "--", self.fixture]
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env=env or self.env, bufsize=0)

    def gateway_round(self, calls: int) -> None:
        proc = self.serve("torture-author")
        send = lambda m: proc.stdin.write((json.dumps(m) + "\n").encode())  # noqa: E731
        try:
            send(INITIALIZE)
            while json.loads(proc.stdout.readline()).get("id") != 1:
                pass
            send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            if self.survivor:
                # The fleet is complete while this gateway runs: the survivor's call may pass.
                self.survivor.call()
            for i in range(calls):
                send({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
                      "params": {"name": "test_simple_text", "arguments": {}}})
            deadline = time.monotonic() + self.rng.uniform(0.0, 0.4)
            os.set_blocking(proc.stdout.fileno(), False)
            buffered = b""
            while time.monotonic() < deadline:
                chunk = proc.stdout.read()
                if chunk:
                    buffered += chunk
                else:
                    time.sleep(0.002)
        except (BrokenPipeError, ValueError, json.JSONDecodeError, TypeError):
            buffered = b""
        proc.kill()
        proc.wait()
        self.killed += 1
        # Only complete lines were acknowledged to the client.
        for line in buffered.split(b"\n")[:-1]:
            try:
                answer = json.loads(line)
            except json.JSONDecodeError:
                continue
            result = answer.get("result") or {}
            if (isinstance(answer.get("id"), int) and answer["id"] >= 100 and "result" in answer
                    and result.get("isError") is not True):
                self.acknowledged_calls += 1

    # -- the survivor's end ---------------------------------------------------------------------

    def survivor_rode_it_out(self, faults: PgFaults) -> tuple[bool, str]:
        """After the last fault: alive, a mutating call allowed, its lease renewed since."""
        s = self.survivor
        if s.proc.poll() is not None:
            return False, f"the survivor exited with {s.proc.returncode}"
        # The fleet complete again (an author gateway, not killed), the survivor's gate opens.
        author = self.serve("torture-author")
        try:
            author.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
            allowed, answer = False, None
            deadline = time.monotonic() + 60
            while not allowed and time.monotonic() < deadline:
                answer = s.wait(s.call(), 10)
                allowed = is_allowed(answer)
                if not allowed:
                    time.sleep(0.5)
            if not allowed:
                return False, f"no mutating call allowed after the last fault: {answer}"
            back = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(faults.last_back))
            renewed = None
            while time.monotonic() < deadline:
                _, listed = cli(self.base, "worker", "list", "--json")
                mine = [w for w in listed.get("workers", []) if w.get("profile") == "torture-survivor"]
                renewed = max((w["last_heartbeat_at"] for w in mine), default=None)
                if renewed and renewed > back:
                    break
                time.sleep(0.5)
            else:
                return False, f"the survivor's lease was last renewed at {renewed}, the server was back at {back}"
            return s.proc.poll() is None, f"alive, a call allowed, lease renewed at {renewed} (back at {back})"
        finally:
            author.kill()
            author.wait()

    # -- the invariants -----------------------------------------------------------------------

    def check(self, faults: PgFaults | None = None) -> int:
        violations = 0

        def report(ok: bool, what: str) -> None:
            nonlocal violations
            violations += 0 if ok else 1
            print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)

        fenced_late = [
            r for r in self.renewals if r[4]
            and any(c[1] == r[2] and c[2] > r[3] and c[0] < r[0] for c in self.claims)
        ]
        report(not fenced_late, f"1. no renewal accepted at a fenced epoch ({len(self.renewals)} renewals answered, "
                                f"{sum(1 for r in self.renewals if not r[4])} refused, {len(self.claims)} claims acknowledged)"
                                + (f": {fenced_late[:3]}" if fenced_late else ""))

        code, listed = cli(self.base, "worker", "list", "--json")
        rows = listed.get("workers", [])
        ids = [w["worker_identity"] for w in rows]
        behind = [(w["worker_identity"], w["fencing_epoch"], self.workers.get(w["worker_identity"]))
                  for w in rows if w["fencing_epoch"] < self.workers.get(w["worker_identity"], 0)]
        report(code == 0 and len(ids) == len(set(ids)) and not behind,
               f"2. {len(rows)} worker rows, identities unique, no epoch behind an acknowledged claim"
               + (f": {behind[:3]}" if behind else ""))

        if self.survivor:
            # The survivor's own answers, collected all along, are acknowledged calls too.
            self.acknowledged_calls += self.survivor.allowed()
        code, audit = cli(self.base, "audit", "--json", "--limit", "1000000")
        entries = audit.get("entries", [])
        allowed = sum(1 for e in entries if e["tool"] == "test_simple_text" and e["allowed"])
        report(code == 0 and allowed >= self.acknowledged_calls,
               f"3. {self.acknowledged_calls} acknowledged audited calls, {allowed} allowed entries")

        seq = [e["id"] for e in entries]
        increasing = all(b > a for a, b in zip(seq, seq[1:]))
        gaps = sum(b - a - 1 for a, b in zip(seq, seq[1:]))
        sqlite = not self.store.startswith(("postgres://", "postgresql://"))
        report(increasing and (gaps == 0 or not sqlite),
               f"4. {len(seq)} audit ids increasing, {gaps} gaps" + ("" if sqlite else " (PostgreSQL: counted)"))

        if sqlite:
            db = sqlite3.connect(f"file:{self.store}?mode=ro", uri=True)
            integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
            version = db.execute("SELECT MAX(version) FROM fleetgate_schema").fetchone()[0]
            db.close()
            report(integrity == "ok" and version is not None and version >= 6,
                   f"5. integrity_check {integrity!r}, schema version {version}")

        if faults:
            present = {w["worker_identity"] for w in rows}
            lost = [i for i in self.registered if i not in present]
            report(code == 0 and not lost, f"6. {len(self.registered)} acknowledged registrations, all present"
                   + (f": lost {lost[:3]}" if lost else ""))
            ok, detail = self.survivor_rode_it_out(faults)
            report(ok and faults.failed == 0,
                   f"7. {faults.restarts} restarts, {faults.kills} postmaster kills ({faults.failed} failed); "
                   f"the survivor gateway: {detail}")
        return violations


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "torture", "version": "1"}}}


def is_allowed(answer: dict | None) -> bool:
    """A tool call's answer that is a result, not an error: the call was allowed and forwarded."""
    return answer is not None and "result" in answer and answer["result"].get("isError") is not True


class Survivor:
    """A gateway that runs through the whole torture, never killed; its answers read on a thread."""

    def __init__(self, t: Torture) -> None:
        env = dict(t.env, GITEA_WORKER_HEARTBEAT_INTERVAL_SECONDS="0.5")
        self.proc = t.serve("torture-survivor", env)
        self.answers: dict[int, dict] = {}
        self.next_id = 1000
        self.cond = threading.Condition()
        threading.Thread(target=self.read, daemon=True).start()
        self.send(INITIALIZE)
        if self.wait(1, 60) is None:
            sys.exit("torture: the survivor gateway did not answer initialize")
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def read(self) -> None:
        for line in self.proc.stdout:
            try:
                answer = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(answer.get("id"), int):
                with self.cond:
                    self.answers[answer["id"]] = answer
                    self.cond.notify_all()

    def send(self, message: dict) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())

    def call(self) -> int:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                   "params": {"name": "test_simple_text", "arguments": {}}})
        return self.next_id

    def wait(self, call_id: int, seconds: float) -> dict | None:
        with self.cond:
            self.cond.wait_for(lambda: call_id in self.answers, timeout=seconds)
            return self.answers.get(call_id)

    def allowed(self) -> int:
        with self.cond:
            return sum(1 for i, a in self.answers.items() if i > 1000 and is_allowed(a))

    def stop(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class PgFaults:
    """Server restarts and postmaster kills, one at a time on a thread, asked of scripts/torture's
    helper outside this PID namespace (where the postmaster's pid means something)."""

    def __init__(self, fifos: str, seed: int) -> None:
        self.fault_path, self.done_path = fifos.split(":")
        self.rng = random.Random(seed)
        self.restarts = self.kills = self.failed = 0
        self.last_back = 0.0  # wall clock: when the server last answered its helper as back
        self.thread: threading.Thread | None = None

    def busy(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def fire(self) -> None:
        kind = self.rng.choice(("restart", "kill"))
        delay = self.rng.uniform(0, 0.3)

        def run() -> None:
            time.sleep(delay)
            with open(self.fault_path, "w") as f:
                f.write(kind + "\n")
            with open(self.done_path) as f:
                answer = f.read().strip()
            if answer != "ok":
                self.failed += 1
            elif kind == "restart":
                self.restarts += 1
            else:
                self.kills += 1
            self.last_back = time.time()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def wait(self) -> None:
        if self.thread:
            self.thread.join()

    def close(self) -> None:
        with open(self.fault_path, "w") as f:
            f.write("quit\n")


def main() -> None:
    fleetgate, fixture, store = sys.argv[1:4]
    opts = sys.argv[4:]
    get = lambda name, default: int(opts[opts.index(name) + 1]) if name in opts else default  # noqa: E731
    iterations, gateways, seed = get("--iterations", 200), get("--gateways", 20), get("--seed", 1)
    pg_restarts = get("--pg-restarts", 0)
    faults = None
    if pg_restarts:
        fifos = os.environ.get("FLEETGATE_TORTURE_PG_FIFOS")
        if not fifos or not store.startswith(("postgres://", "postgresql://")):
            sys.exit("torture: --pg-restarts needs a PostgreSQL store and scripts/torture's fault helper")
        faults = PgFaults(fifos, seed + 1)
    t = Torture(fleetgate, fixture, store, seed, survivor=faults is not None)
    for _ in range(4):
        t.register()
    if faults:
        t.survivor = Survivor(t)
        # Each fault fires at its iteration, or the first one after while another runs.
        due = sorted(faults.rng.sample(range(1, max(2, iterations)), min(pg_restarts, max(1, iterations - 1))))
        due += [iterations] * (pg_restarts - len(due))
    started = time.monotonic()
    gateway_every = max(1, iterations // max(1, gateways))
    pending, gateway_runs, i = 0, 0, 0
    # Past the last iteration only while faults are still to come: the load runs under each.
    while i < iterations or (faults and (pending or due or faults.busy())):
        if faults:
            while due and due[0] <= i:
                due.pop(0)
                pending += 1
            if pending and not faults.busy():
                faults.fire()
                pending -= 1
        if t.rng.random() < 0.05:
            t.register()
        if i % 10 == 9:
            t.resync()
        t.cli_round(in_flight=4)
        if gateways and i % gateway_every == 0:
            gateway_runs += 1
            t.gateway_round(calls=t.rng.randint(1, 30))
        i += 1
    if faults:
        faults.wait()
        faults.close()
    print(f"torture: {i} iterations ({i * 4} CLI processes, {gateway_runs} gateways) "
          f"in {time.monotonic() - started:.0f} s, {t.killed} killed"
          + (f", {faults.restarts} server restarts, {faults.kills} postmaster kills" if faults else ""), flush=True)
    violations = t.check(faults)
    if t.survivor:
        t.survivor.stop()
    print(f"torture: {i} iterations, {t.killed} killed, {violations} violations")
    sys.exit(1 if violations else 0)


if __name__ == "__main__":
    main()
