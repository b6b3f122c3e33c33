#!/usr/bin/env python3
"""Writes ramjet-io-uring.json: the default seccomp profile of Docker and containerd (moby's
seccomp/default.json, Apache-2.0) as it applies to a container with every capability dropped,
plus the three io_uring system calls that profile blocks.

    git clone https://github.com/moby/profiles && \\
      charts/ramjet/files/seccomp/generate.py profiles/seccomp/default.json

The output is a plain list of rules (no moby extensions: `includes`/`excludes` are resolved
here), which both the container runtimes (a Localhost profile) and the Security Profiles
Operator's SeccompProfile read. Generated from moby/profiles cd3bed8.
"""

import json
import os
import sys

IO_URING = ["io_uring_enter", "io_uring_register", "io_uring_setup"]
ARCHITECTURES = ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32", "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"]


def applies(rule):
    """Whether a rule of moby's profile holds for ramjet's container: it has no capability (the
    chart drops them all), so a rule that needs one is left out, and one that only a capability
    would lift holds."""
    return not rule.get("includes", {}).get("caps")


def main():
    source = json.load(open(sys.argv[1]))
    syscalls = []
    for rule in filter(applies, source["syscalls"]):
        out = {"names": sorted(rule["names"]), "action": rule["action"]}
        if rule.get("args"):
            out["args"] = rule["args"]
        if rule.get("errnoRet") is not None:
            out["errnoRet"] = rule["errnoRet"]
        syscalls.append(out)
    syscalls.append({"names": IO_URING, "action": "SCMP_ACT_ALLOW"})
    profile = {"defaultAction": source["defaultAction"], "architectures": ARCHITECTURES, "syscalls": syscalls}
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "ramjet-io-uring.json"), "w") as f:
        json.dump(profile, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
