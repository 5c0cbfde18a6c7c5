"""The distribution build beside the release build (run by scripts/bench-dist; not a test).

Usage: bench_dist.py LABEL=FLEETGATE [LABEL=FLEETGATE …] [--smoke] [--rss-only]

For each binary: its size on disk, and its start-up, alternated run by run so the machine's
load falls on both alike — `fleetgate --version` (the process alone) and `fleetgate serve` to
its `initialize` answer on a fresh embedded store with a one-member roster and no downstream
(config read, store opened and migrated, runtime row written, the MCP handshake) — median and
p90 of the runs — and the peak RSS (VmHWM) of an idle `fleetgate serve` on stdio: the same start,
then `tools/list`, `fleet_get_runtime_context` and 1 s idle, held to issue 55's bound of 15 MiB,
with what it is made of at that point (RssAnon: heap and stacks; RssFile: code and data mapped
from files, the binary's own and the C library's, clean and shared with every gateway on the host).

The file-backed part follows how the binary's pages sit in the page cache: this kernel (6.18) maps
a cached large folio whole on a fault, and the folios' sizes come from whoever read the file
first (readahead here is up to 2.5 MiB). So before each binary's RSS runs its pages are dropped
from the cache (`posix_fadvise(DONTNEED)`; nothing else on the host is touched) and read back by
the first run, as after a reboot; the runs after it find them cached.
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


def start(binary: str) -> bench_gateway.Peer:
    """`fleetgate serve` on stdio, a fresh store and a one-member roster, no downstream."""
    state = tempfile.mkdtemp(prefix="fleetgate-bench-dist-")
    config = os.path.join(state, "fleet.toml")
    with open(config, "w") as f:
        f.write(ROSTER)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": state, "GITEA_CLIENT_MANAGED": "1",
           "GITEA_MCP_COHORT_ID": "dist"}
    return bench_gateway.Peer([binary, "--store", os.path.join(state, "registry.sqlite3"), "--config", config,
                               "serve", "--profile", "dist-author"], env)


def serve(binary: str) -> float:
    peer = start(binary)
    elapsed = peer.initialize()
    peer.close()
    return elapsed


BOUND_MIB = 15.0


def status_kib(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmHWM", "RssAnon", "RssFile"):
                out[key] = int(rest.split()[0])
    return out


def evict(binary: str) -> None:
    fd = os.open(binary, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def idle_rss(binary: str) -> dict[str, int]:
    peer = start(binary)
    peer.initialize()
    peer.request("tools/list", {})
    peer.request("tools/call", {"name": "fleet_get_runtime_context", "arguments": {}})
    time.sleep(1.0)
    kib = status_kib(peer.proc.pid)
    peer.close()
    return kib


def rss_rows(binaries: list[list[str]], runs: int) -> None:
    print(f"== idle stdio serve, peak RSS (VmHWM) and its make-up at 1 s idle, MiB; bound {BOUND_MIB:.0f} MiB")
    print(f"{'':<10} {'first (cold)':>13} {'cached min-max':>15} {'RssAnon':>8} {'RssFile':>8}")
    for label, binary in binaries:
        evict(binary)
        rows = [idle_rss(binary) for _ in range(runs + 1)]
        first, rest = rows[0]["VmHWM"] / 1024, [r["VmHWM"] / 1024 for r in rows[1:]]
        anon = statistics.median(r["RssAnon"] for r in rows[1:]) / 1024
        file = statistics.median(r["RssFile"] for r in rows[1:]) / 1024
        verdict = "under" if max(first, *rest) < BOUND_MIB else "OVER"
        print(f"{label:<10} {first:13.1f} {min(rest):7.1f}-{max(rest):<7.1f} {anon:8.1f} {file:8.1f}  {verdict}", flush=True)


def main() -> None:
    smoke = "--smoke" in sys.argv[1:]
    binaries = [a.split("=", 1) for a in sys.argv[1:] if "=" in a]
    rss_rows(binaries, 2 if smoke else 5)
    if "--rss-only" in sys.argv[1:]:
        return
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
