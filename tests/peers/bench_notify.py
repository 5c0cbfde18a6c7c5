"""What a dead notification target costs a forwarded call (run by scripts/bench-notify; not a test).

Usage: bench_notify.py FLEETGATE FAST_DOWNSTREAM [--smoke]

Five fleets side by side, each `fleetgate serve` (the release binary, embedded SQLite, one
`author`) in front of its own conformance fixture, differing only in `[[approvals.notify]]`:

  none         no target
  receiving    a webhook answering 200 at once (the healthy case)
  hanging      a webhook that accepts the connection and never answers
  refusing     a webhook on a closed port (connection refused)
  erroring     a webhook answering 503 at once (retried, then dropped)

Every round, on each fleet in turn: one call a rule holds for an operator (`decision = "ask"`,
`wait_seconds = 0`; new arguments each time, so each makes a new request and a `requested`
event the fleet's notifier sends while the next calls run), its request denied with
`fleetgate approvals deny` (untimed; an `answered` event, and a worker may have only 8
requests waiting), then one timed read call and one timed audited mutating call. Alternated call by call, so a change in the machine's load falls on
every fleet alike. Printed per fleet: median and p99 of the read and mutating calls and of the
held call's refusal, their ratio to `none`, and what became of the notifications
(`fleetgate_notify_deliveries_total` from each gateway's `--metrics-listen`).

The claim it measures (issue 45): a target that hangs, refuses or errors changes no decision
and no latency of a forwarded call beyond the noise; the ratios should sit at 1.
"""

from __future__ import annotations

import http.server
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from bench_serve import Peer, quantile

ROSTER = """
[fleet]
name = "bench-{name}"
tool_prefix = "fleet_"

[tools]
read_only = ["test_simple_text"]
mutating = ["test_audio_content", "test_image_content"]

[approvals]
wait_seconds = 0
ttl_seconds = 3600

[[rules]]
tool = "test_image_content"
roles = ["author"]
decision = "ask"

[[members]]
namespace = "bench-{name}"
profile = "bench-{name}"
role = "author"
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Quick(http.server.BaseHTTPRequestHandler):
    """A receiver answering `status` at once, counting what it got."""

    status = 200
    count = 0

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        length = int(self.headers.get("content-length", "0"))
        self.rfile.read(length)
        type(self).count += 1
        self.send_response(self.status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *_args) -> None:
        pass


def receiver(status: int) -> tuple[str, type]:
    handler = type(f"Quick{status}", (Quick,), {"status": status, "count": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/hook", handler


def hanging() -> tuple[str, list]:
    """Accepts and never answers; the connections are kept open."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list = []

    def accept() -> None:
        while True:
            held.append(listener.accept())

    threading.Thread(target=accept, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}/hook", held


class Fleet:
    def __init__(self, fleetgate: str, fast: str, name: str, url: str | None) -> None:
        self.name = name
        state = tempfile.mkdtemp(prefix=f"fleetgate-bench-notify-{name}-")
        config = os.path.join(state, "fleet.toml")
        with open(config, "w") as f:
            f.write(ROSTER.format(name=name))
            if url:
                f.write(f'\n[[approvals.notify]]\nkind = "webhook"\nurl = "{url}"\nname = "{name}"\n')
        repo = os.path.join(state, "checkout")
        subprocess.run(["git", "init", "-q", repo], check=True)
        subprocess.run(["git", "-C", repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q",
                        "--allow-empty", "-m", "start"], check=True)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", state),
            "GITEA_CLIENT_MANAGED": "1",
            "GITEA_MCP_COHORT_ID": f"bench-{name}",
        }
        self.metrics = free_port()
        self.cli = [fleetgate, "--store", os.path.join(state, "registry.sqlite3"), "--config", config]
        self.env = env
        serve = self.cli + ["serve", "--profile", f"bench-{name}", "--repo-root", repo,
                 "--metrics-listen", f"127.0.0.1:{self.metrics}", "--", fast]
        self.peer = Peer(serve, env)
        self.peer.request("tools/list", {})
        self.times: dict[str, list[float]] = {"read": [], "mutating": [], "held": []}
        self.asked = 0

    def timed(self, kind: str, tool: str, arguments: dict, refused: bool) -> str:
        t = time.perf_counter()
        answer = self.peer.request("tools/call", {"name": tool, "arguments": arguments})
        self.times[kind].append(time.perf_counter() - t)
        result = answer.get("result", {})
        text = (result.get("content") or [{}])[0].get("text", "")
        if refused:
            assert result.get("isError") and text.startswith("approval_pending"), (self.name, answer)
        else:
            assert result.get("isError") is not True, (self.name, answer)
        return text

    def round(self, warm: bool) -> None:
        self.asked += 1
        held = self.timed("held", "test_image_content", {"n": self.asked}, refused=True)
        request = re.search(r"apr-[0-9a-f]{16}", held).group(0)
        subprocess.run(self.cli + ["approvals", "deny", request], env=self.env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.timed("read", "test_simple_text", {}, refused=False)
        self.timed("mutating", "test_audio_content", {}, refused=False)
        if warm:
            for kind in self.times.values():
                kind.pop()

    def deliveries(self) -> dict[str, float]:
        out: dict[str, float] = {}
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics}/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("fleetgate_notify_deliveries_total{"):
                    labels, value = line.rsplit(" ", 1)
                    outcome = labels.split('outcome="', 1)[1].split('"', 1)[0]
                    out[outcome] = out.get(outcome, 0) + float(value)
        return out


def main() -> None:
    fleetgate, fast = sys.argv[1:3]
    smoke = "--smoke" in sys.argv[3:]
    rounds = 20 if smoke else 1000
    ok_url, ok = receiver(200)
    err_url, err = receiver(503)
    hang_url, held = hanging()
    targets = [
        ("none", None),
        ("receiving", ok_url),
        ("hanging", hang_url),
        ("refusing", f"http://127.0.0.1:{free_port()}/hook"),
        ("erroring", err_url),
    ]
    fleets = [Fleet(fleetgate, fast, name, url) for name, url in targets]
    # Steady state: the gate's process scan rereads a process younger than 2 s at every call.
    time.sleep(2.5)
    for _ in range(20):
        for f in fleets:
            f.round(warm=True)
    print(f"== a held call, then a read and an audited mutating call, alternated over {len(fleets)} fleets, "
          f"{rounds} rounds (median/p99 ms; ratio of medians to `none`)")
    for _ in range(rounds):
        for f in fleets:
            f.round(warm=False)
    # Let the healthy notifier catch up (bounded) before reading what became of the events.
    deadline = time.monotonic() + 30
    while ok.count < 2 * fleets[1].asked and time.monotonic() < deadline:
        time.sleep(0.05)
    base = {k: statistics.median(v) for k, v in fleets[0].times.items()}
    for f in fleets:
        cells = []
        for kind in ("read", "mutating", "held"):
            v = f.times[kind]
            median = statistics.median(v)
            cells.append(f"{kind} {median * 1e3:6.3f}/{quantile(v, 0.99) * 1e3:6.3f} (x{median / base[kind]:4.2f})")
        sent = f.deliveries() if f.name != "none" else {}
        print(f"{f.name:<10} " + "  ".join(cells) + f"  notifications: {sent or '-'}", flush=True)
    print(f"receivers: 200 answered {ok.count}, 503 answered {err.count}, hanging held {len(held)} connections")
    for f in fleets:
        f.peer.close()
    # The healthy target heard every request; the dead ones were tried.
    events = 2 * fleets[1].asked
    assert ok.count >= events, f"the receiving target heard {ok.count} of {events} events"
    assert err.count > 0 and len(held) > 0, "the dead targets were never tried"


if __name__ == "__main__":
    main()
