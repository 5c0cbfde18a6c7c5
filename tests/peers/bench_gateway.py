"""Side-by-side figures for the gateway (run by scripts/bench-gateway; not a test).

Usage: bench_gateway.py FIXTURE MCP_SERVER_GIT MINIMAL_SERVER_PY

1. spawn → `initialize` result: the gateway without a downstream, vs `mcp-server-git`
   and a minimal Python SDK server (`minimal_server.py`);
2. peak RSS (VmHWM) of an idle gateway without a downstream, after initialize + tools/list.

The cost per forwarded call of the real `fleetgate serve` is bench_serve.py's.

Raw JSON-RPC lines over pipes, so the client's own cost is the same on both sides and small.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}


class Peer:
    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0, env=env
        )
        self.next_id = 100

    def send(self, message: dict) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())

    def answer(self, want_id: int) -> dict:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("peer closed its stdout")
            message = json.loads(line)
            if message.get("id") == want_id:
                return message

    def initialize(self) -> float:
        self.send(INIT)
        self.answer(1)
        elapsed = time.perf_counter() - self.started
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return elapsed

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.answer(self.next_id)

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def startup(argv: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        peer = Peer(argv)
        times.append(peer.initialize())
        peer.close()
    return times


def vm_hwm_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM")


def ms(values: list[float]) -> str:
    return f"mean {statistics.mean(values) * 1e3:8.3f} ms  median {statistics.median(values) * 1e3:8.3f} ms"


def main() -> None:
    fixture, git_server, minimal = sys.argv[1:4]
    python = sys.executable
    state = tempfile.mkdtemp(prefix="fleetgate-bench-")
    open(os.path.join(state, "allow-mutations"), "w").close()
    gateway = [fixture, "--state", state]
    print("== spawn -> initialize result")
    gw = startup(gateway, 50)
    git = startup([git_server], 10)
    mini = startup([python, minimal], 10)
    print(f"gateway (no downstream)  {ms(gw)}")
    print(f"mcp-server-git (Python)  {ms(git)}")
    print(f"minimal Python SDK       {ms(mini)}")
    print(f"ratio mcp-server-git / gateway: {statistics.mean(git) / statistics.mean(gw):7.1f}x")
    print(f"ratio minimal Python / gateway: {statistics.mean(mini) / statistics.mean(gw):7.1f}x")

    print("== idle gateway RSS")
    peer = Peer(gateway)
    peer.initialize()
    peer.request("tools/list", {})
    peer.request("tools/call", {"name": "fleet_get_runtime_context", "arguments": {}})
    time.sleep(1.0)
    hwm = vm_hwm_kib(peer.proc.pid)
    print(f"peak RSS (VmHWM), no downstream: {hwm / 1024:.1f} MiB")
    peer.close()
    peer = Peer(gateway + ["--", git_server])
    peer.initialize()
    peer.request("tools/list", {})
    time.sleep(1.0)
    hwm = vm_hwm_kib(peer.proc.pid)
    print(f"peak RSS (VmHWM), gateway process in front of mcp-server-git: {hwm / 1024:.1f} MiB")
    peer.close()


if __name__ == "__main__":
    main()
