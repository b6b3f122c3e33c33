"""A valgrind that can count an io_uring worker: the system's when it is new enough, else Debian
13's, fetched once into target/valgrind/ and verified through the archive's signed release file.

Valgrind before 3.20 does not treat `io_uring_enter` as a call that may block: a worker waiting in
it keeps every other thread of the daemon from running, and the daemon takes over ten minutes to
start. Debian 12 ships 3.19. Debian 13's 3.24 runs here unchanged (its tools are static; the
launcher needs only the C library), so the budget check fetches it rather than asking for a
distribution upgrade.
"""

import hashlib
import lzma
import os
import re
import shutil
import subprocess
import urllib.request

MIRROR = "http://deb.debian.org/debian"
SUITE = "trixie"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
MINIMUM = (3, 20)


def _version(valgrind):
    try:
        out = subprocess.run([valgrind, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    m = re.search(r"valgrind-(\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _get(url):
    with urllib.request.urlopen(url, timeout=120) as r:
        return r.read()


def _fetch(root):
    """Downloads Debian 13's valgrind package, checks it against the signed release, unpacks it
    into `root`."""
    if not os.path.exists(KEYRING) or not shutil.which("gpgv"):
        raise RuntimeError(f"cannot verify Debian's archive: {KEYRING} or gpgv is missing")
    tmp = root + ".download"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    release = os.path.join(tmp, "InRelease")
    with open(release, "wb") as f:
        f.write(_get(f"{MIRROR}/dists/{SUITE}/InRelease"))
    subprocess.run(["gpgv", "--keyring", KEYRING, release], check=True, capture_output=True)
    text = open(release, encoding="utf-8").read()
    m = re.search(r"^ ([0-9a-f]{64})\s+\d+ main/binary-amd64/Packages\.xz$", text, re.M)
    if not m:
        raise RuntimeError("the release file lists no main/binary-amd64/Packages.xz")
    packages_xz = _get(f"{MIRROR}/dists/{SUITE}/main/binary-amd64/Packages.xz")
    if hashlib.sha256(packages_xz).hexdigest() != m.group(1):
        raise RuntimeError("Packages.xz does not match the signed release file")
    stanza = re.search(r"^Package: valgrind\n(?:.+\n)*", lzma.decompress(packages_xz).decode("utf-8"), re.M)
    if not stanza:
        raise RuntimeError(f"Debian {SUITE} has no valgrind package")
    filename = re.search(r"^Filename: (.+)$", stanza.group(0), re.M).group(1)
    sha256 = re.search(r"^SHA256: ([0-9a-f]{64})$", stanza.group(0), re.M).group(1)
    deb = _get(f"{MIRROR}/{filename}")
    if hashlib.sha256(deb).hexdigest() != sha256:
        raise RuntimeError(f"{filename} does not match the signed package list")
    deb_path = os.path.join(tmp, "valgrind.deb")
    with open(deb_path, "wb") as f:
        f.write(deb)
    subprocess.run(["dpkg-deb", "-x", deb_path, os.path.join(tmp, "root")], check=True)
    shutil.rmtree(root, ignore_errors=True)
    os.rename(os.path.join(tmp, "root"), root)
    shutil.rmtree(tmp, ignore_errors=True)


def command(target_dir):
    """The command that starts a valgrind that can count io_uring."""
    system = shutil.which("valgrind")
    if system and (_version(system) or (0, 0)) >= MINIMUM:
        return [system]
    root = os.path.join(os.path.abspath(target_dir), "valgrind")
    launcher = os.path.join(root, "valgrind")
    if not os.path.exists(launcher):
        print(f"valgrind {'.'.join(map(str, MINIMUM))} or newer is needed for io_uring; "
              f"fetching Debian {SUITE}'s into {root}", flush=True)
        _fetch(root)
        # Debian's own launcher is a script for the system's paths; this one points at the copy.
        with open(launcher + ".tmp", "w") as f:
            f.write(f"#!/bin/sh\nVALGRIND_LIB='{root}/usr/libexec/valgrind' exec '{root}/usr/bin/valgrind.bin' \"$@\"\n")
        os.chmod(launcher + ".tmp", 0o755)
        os.rename(launcher + ".tmp", launcher)
    return [launcher]
