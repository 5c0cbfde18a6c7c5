"""The real `fleetgate serve`'s cost per forwarded call (run by scripts/bench-gateway; not a test).

Usage: bench_serve.py FLEETGATE FAST_DOWNSTREAM NODE EVERYTHING_JS [--smoke]

Each scenario runs a direct downstream and `fleetgate serve` in front of its own copy of the
same downstream, both alive, and alternates calls one by one between them, so a change in the
machine's load falls on both alike. The gateway is the release binary with the embedded
SQLite store, a one-member roster (the `author`), a healthy fleet: every call goes through
the real gate and the real audit log, as users run it.

Per scenario: median and p99 latency direct and through the gateway, and what the gateway
adds (the difference of the medians, of the p99s); the gateway process's CPU seconds per
10,000 calls (utime+stime of every thread over the timed calls, /proc/PID/task/*/stat; its
downstream child not included) and its context switches per call (voluntary + involuntary,
every thread, /proc/PID/task/*/status).

Scenarios: a read-only call (`test_simple_text` of the conformance fixture, a fast Rust
stdio server), an allowed mutating call of the same server (`test_audio_content`, declared
mutating: the gate reads the fleet and waits for its audit entry to be committed), and a
read-only call of @modelcontextprotocol/server-everything (`echo`).

Raw JSON-RPC lines over pipes, so the client's own cost is the same on both sides and small.

BENCH_SERVE_BASELINE=DIR (a directory holding another build's `fleetgate`, e.g. the commit
before a change) compares the two builds under the same load: the fast fixture's read and
mutating scenarios run in rounds, this build then the baseline, four times over (each round a
fresh store and fresh processes, one build at a time, so neither sees the other as a foreign
fleet), and the median of the rounds is printed for each build.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import bench_gateway

ROSTER = """
[fleet]
name = "bench"
tool_prefix = "fleet_"

[tools]
read_only = ["test_simple_text", "echo"]
mutating = ["test_audio_content"]

[[members]]
namespace = "bench-author"
profile = "bench-author"
role = "author"
"""


class Peer(bench_gateway.Peer):
    """A peer, initialized."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        super().__init__(argv, env)
        self.initialize()


def counters(pid: int) -> tuple[float, int]:
    """CPU seconds and context switches of every thread of `pid`."""
    ticks = os.sysconf("SC_CLK_TCK")
    cpu, switches = 0.0, 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cpu += (int(fields[11]) + int(fields[12])) / ticks
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        switches += int(line.split()[1])
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return cpu, switches


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def scenario(label: str, direct: Peer, gateway: Peer, tool: str, arguments: dict, calls: int) -> dict:
    params = {"name": tool, "arguments": arguments}
    for peer in (direct, gateway):
        peer.request("tools/list", {})
        for _ in range(50):
            answer = peer.request("tools/call", params)
            assert answer.get("result", {}).get("isError") is not True, answer
    times: tuple[list[float], list[float]] = ([], [])
    cpu0, sw0 = counters(gateway.proc.pid)
    for _ in range(calls):
        for side, peer in enumerate((direct, gateway)):
            t = time.perf_counter()
            answer = peer.request("tools/call", params)
            times[side].append(time.perf_counter() - t)
            assert answer.get("result", {}).get("isError") is not True, answer
    cpu1, sw1 = counters(gateway.proc.pid)
    d, g = times
    row = {
        "scenario": label,
        "calls": calls,
        "direct_median_ms": statistics.median(d) * 1e3,
        "direct_p99_ms": quantile(d, 0.99) * 1e3,
        "gateway_median_ms": statistics.median(g) * 1e3,
        "gateway_p99_ms": quantile(g, 0.99) * 1e3,
        "cpu_s_per_10k": (cpu1 - cpu0) / calls * 10_000,
        "switches_per_call": (sw1 - sw0) / calls,
    }
    row["added_median_ms"] = row["gateway_median_ms"] - row["direct_median_ms"]
    row["added_p99_ms"] = row["gateway_p99_ms"] - row["direct_p99_ms"]
    print(
        f"{label:<34} direct {row['direct_median_ms']:6.3f}/{row['direct_p99_ms']:6.3f} ms  "
        f"gateway {row['gateway_median_ms']:6.3f}/{row['gateway_p99_ms']:6.3f} ms  "
        f"added median {row['added_median_ms']:+6.3f} ms p99 {row['added_p99_ms']:+6.3f} ms  "
        f"CPU {row['cpu_s_per_10k']:5.2f} s/10k  {row['switches_per_call']:5.2f} cs/call",
        flush=True,
    )
    return row


def fleet(fleetgate: str) -> tuple[list[str], dict[str, str]]:
    """`fleetgate serve` of `fleetgate` on a fresh store and checkout (its argv up to `--`), and
    its environment."""
    state = tempfile.mkdtemp(prefix="fleetgate-bench-serve-")
    config = os.path.join(state, "fleet.toml")
    with open(config, "w") as f:
        f.write(ROSTER)
    repo = os.path.join(state, "checkout")
    subprocess.run(["git", "init", "-q", repo], check=True)
    subprocess.run(["git", "-C", repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q",
                    "--allow-empty", "-m", "start"], check=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", state),
        "GITEA_CLIENT_MANAGED": "1",
        "GITEA_MCP_COHORT_ID": "bench",
    }
    serve = [fleetgate, "--store", os.path.join(state, "registry.sqlite3"), "--config", config,
             "serve", "--profile", "bench-author", "--repo-root", repo, "--"]
    return serve, env


def against_baseline(fleetgate: str, baseline: str, fast: str, n: int) -> list[dict]:
    """Both builds' fast-fixture scenarios in alternating rounds; each build's round medians."""
    rounds: dict[str, list[list[dict]]] = {"this build": [], "baseline": []}
    print(f"== this build vs the baseline ({baseline}), 4 alternating rounds of {n} calls each")
    for _ in range(4):
        for label, binary in (("this build", fleetgate), ("baseline", os.path.join(baseline, "fleetgate"))):
            serve, env = fleet(binary)
            direct, gateway = Peer([fast]), Peer(serve + [fast], env)
            # Steady state: the gate's process scan reads a process again at every call while
            # it is younger than 2 s (a launcher may be about to exec), as at a fleet's start.
            time.sleep(2.5)
            rounds[label].append([
                scenario(f"{label}: read", direct, gateway, "test_simple_text", {}, n),
                scenario(f"{label}: mutating", direct, gateway, "test_audio_content", {}, n),
            ])
            direct.close()
            gateway.close()
    rows = []
    keys = ("added_median_ms", "added_p99_ms", "cpu_s_per_10k", "switches_per_call")
    for label, runs in rounds.items():
        for i, name in enumerate(("read", "mutating")):
            row = {"scenario": f"{label}: {name}, median of 4 rounds"}
            row.update({k: statistics.median(r[i][k] for r in runs) for k in keys})
            print(f"{row['scenario']:<44} added median {row['added_median_ms']:+6.3f} ms "
                  f"p99 {row['added_p99_ms']:+6.3f} ms  CPU {row['cpu_s_per_10k']:5.2f} s/10k  "
                  f"{row['switches_per_call']:5.2f} cs/call")
            rows.append(row)
    return rows


def main() -> None:
    fleetgate, fast, node, everything = sys.argv[1:5]
    smoke = "--smoke" in sys.argv[5:]
    n = 200 if smoke else 5000
    baseline = os.environ.get("BENCH_SERVE_BASELINE")
    if baseline:
        rows = against_baseline(fleetgate, baseline, fast, n // 4)
        out = os.environ.get("BENCH_SERVE_JSON")
        if out:
            with open(out, "w") as f:
                json.dump(rows, f, indent=2)
        return
    serve, env = fleet(fleetgate)
    rows = []
    print(f"== alternated calls, direct vs through `fleetgate serve` (median/p99), {n} calls each")
    direct, gateway = Peer([fast]), Peer(serve + [fast], env)
    rows.append(scenario("read (Rust fixture test_simple_text)", direct, gateway, "test_simple_text", {}, n))
    rows.append(scenario("mutating (Rust fixture, audited)", direct, gateway, "test_audio_content", {}, n // 2))
    direct.close()
    gateway.close()
    direct, gateway = Peer([node, everything, "stdio"]), Peer(serve + [node, everything, "stdio"], env)
    rows.append(scenario("read (server-everything echo)", direct, gateway, "echo", {"message": "hi"}, n // 2))
    direct.close()
    gateway.close()
    out = os.environ.get("BENCH_SERVE_JSON")
    if out:
        with open(out, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
