"""The distribution build beside the release build (run by scripts/bench-dist; not a test).

Usage: bench_dist.py LABEL=FLEETGATE [LABEL=FLEETGATE …] [--smoke]

For each binary: its size on disk, and its start-up, alternated run by run so the machine's
load falls on both alike — `fleetgate --version` (the process alone) and `fleetgate serve` to
its `initialize` answer on a fresh embedded store with a one-member roster and no downstream
(config read, store opened and migrated, runtime row written, the MCP handshake) — median and
p90 of the runs.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

import bench_gateway

ROSTER = """
[fleet]
name = "dist"

[[members]]
namespace = "dist-author"
profile = "dist-author"
role = "author"
"""


def version(binary: str) -> float:
    t = time.perf_counter()
    subprocess.run([binary, "--version"], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def serve(binary: str) -> float:
    state = tempfile.mkdtemp(prefix="fleetgate-bench-dist-")
    config = os.path.join(state, "fleet.toml")
    with open(config, "w") as f:
        f.write(ROSTER)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": state, "GITEA_CLIENT_MANAGED": "1",
           "GITEA_MCP_COHORT_ID": "dist"}
    peer = bench_gateway.Peer([binary, "--store", os.path.join(state, "registry.sqlite3"), "--config", config,
                               "serve", "--profile", "dist-author"], env)
    elapsed = peer.initialize()
    peer.close()
    return elapsed


def main() -> None:
    smoke = "--smoke" in sys.argv[1:]
    binaries = [a.split("=", 1) for a in sys.argv[1:] if "=" in a]
    runs = 3 if smoke else 40
    times: dict[str, dict[str, list[float]]] = {label: {"version": [], "serve": []} for label, _ in binaries}
    for _ in range(runs):
        for label, binary in binaries:
            times[label]["version"].append(version(binary))
            times[label]["serve"].append(serve(binary))
    print(f"== size and start-up, {runs} alternated runs each (median / p90 ms)")
    for label, binary in binaries:
        size = os.path.getsize(binary)
        cells = []
        for what in ("version", "serve"):
            v = sorted(times[label][what])
            cells.append(f"{what} {statistics.median(v) * 1e3:7.2f} / {v[int(0.9 * (len(v) - 1))] * 1e3:7.2f}")
        print(f"{label:<10} {size / 1e6:7.1f} MB  " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    main()
