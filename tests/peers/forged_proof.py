"""A look-alike gateway holding a forged proof (issue 54's hostile tests).

Run as `fleetgate serve --profile prgs-author` (arg0 `fleetgate`, this file copied to a file
named `serve` in the working directory), so the fleet inventory takes it for a gateway. It
publishes a "proof" the way a gateway does — an anonymous memory file named
`fleetgate-gateway-proof`, held open — and waits for its stdin to close. What it publishes,
from its environment:

  FORGE_COPY=PID       the proof gateway PID holds, read through /proc/PID/fd (a borrowed proof)
  FORGE_ROOT=PATH      else a proof about this very process (its pid, PID namespace, start,
                       host and boot: every tie true), bound to checkout PATH, on the store
  FORGE_STORE=JSON     described by the JSON (`{"engine", "location", "key"}`)
  FORGE_SETUID=UID     after publishing, run on as another user (the proof stays root's)

It prints `ready` on stdout once the proof is published (and the user changed).
"""

import json
import os
import sys

NAME = "fleetgate-gateway-proof"


def borrowed(pid):
    fds = f"/proc/{pid}/fd"
    for fd in os.listdir(fds):
        try:
            link = os.readlink(f"{fds}/{fd}")
        except OSError:
            continue
        if link.startswith(f"/memfd:{NAME}"):
            with open(f"{fds}/{fd}", "rb") as f:
                return f.read()
    raise SystemExit(f"pid {pid} holds no proof")


def first_line(*paths):
    for path in paths:
        try:
            with open(path) as f:
                text = f.read().strip()
            if text:
                return text
        except OSError:
            pass
    raise SystemExit(f"none of {paths} can be read")


def about_myself(root, store):
    with open("/proc/self/stat") as f:
        stat = f.read()
    start_ticks = int(stat[stat.rindex(")") + 1 :].split()[19])
    namespace = int(os.readlink("/proc/self/ns/pid").split("[")[1].rstrip("]"))
    proof = {
        "version": 1,
        "process": {"pid": os.getpid(), "pid_namespace": namespace, "start_ticks": start_ticks},
        "host": {
            "host_id": first_line("/etc/machine-id", "/var/lib/dbus/machine-id"),
            "boot_id": first_line("/proc/sys/kernel/random/boot_id"),
        },
        "store": store,
        "fleet": "forged",
        "runtime_id": f"gitea-author:{os.getpid()}:forged",
        "namespace": "gitea-author",
        "profile": "prgs-author",
        "role": "author",
        "repository_root": root,
        "binding": None,
        "transport": "stdio",
        "registered_at": "2026-01-01T00:00:00Z",
    }
    return json.dumps(proof).encode()


def main():
    if "FORGE_COPY" in os.environ:
        body = borrowed(int(os.environ["FORGE_COPY"]))
    else:
        body = about_myself(os.environ["FORGE_ROOT"], json.loads(os.environ["FORGE_STORE"]))
    fd = os.memfd_create(NAME, os.MFD_CLOEXEC)
    os.write(fd, body)
    if "FORGE_SETUID" in os.environ:
        os.setuid(int(os.environ["FORGE_SETUID"]))
    print("ready", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
