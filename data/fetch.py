"""Downloads and checksums shared by the dataset scripts.

Every failure raises DataError with a message meant to be printed as
`error: <message>`; the command-line scripts do that and exit 1.
"""
import argparse
import hashlib
import importlib
import os
import sys
import urllib.request

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_ROOT = os.path.join(REPO_ROOT, "data")


class DataError(Exception):
    """Bad or missing input data: the scripts print it as `error: ...` and exit 1."""


def require(name):
    """The module `name` ("scipy.stats": of a package); if this python3 lacks it (the one on PATH
    may reach no package registry), exit with one line naming its Debian package instead of a
    traceback."""
    try:
        return importlib.import_module(name)
    except ImportError:
        top = name.split(".")[0]
        sys.exit(f"error: {sys.executable} has no module {top!r} (Debian: apt-get install python3-{top}); "
                 "scripts/pick_python.sh names a python3 that has what the scripts need")


class ArgParser(argparse.ArgumentParser):
    """argparse with the project's error policy: one `error: ...` line on stderr, exit status 1."""

    def error(self, message):  # one line: the usage is --help's
        print(f"error: {message}", file=sys.stderr)
        sys.exit(1)


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_sha256(label, actual, expected, hint=""):
    """Raise DataError when a checksum differs (expected None = nothing known)."""
    if expected is not None and actual != expected:
        raise DataError(f"checksum mismatch for {label}: sha256 {actual}, expected {expected}"
                        + (f" ({hint})" if hint else ""))


def read_sha256sums(path):
    """Parse a `sha256sum` listing into {relative path: hex}; {} when the file is absent.
    Paths are normalised without a leading './' so they can be looked up as 'pg19/train/1.txt'."""
    sums = {}
    if not os.path.isfile(path):
        return sums
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split(maxsplit=1)
            if len(parts) != 2:
                continue
            name = parts[1].lstrip("*")
            if name.startswith("./"):
                name = name[2:]
            sums[name] = parts[0].lower()
    return sums


# What a failed download error ends with: every script that downloads reads a local copy instead.
OFFLINE_HINT = "; without network, --mirror DIR reads a local copy laid out as upstream (data/README.md)"


def download(url, dest, sha256=None, quiet=False):
    """Download url to dest (via dest.part, renamed when complete and verified).
    An existing dest is reused when it matches sha256 (or when no checksum is known)."""
    if os.path.isfile(dest):
        if sha256 is None or sha256_file(dest) == sha256:
            return dest
        os.remove(dest)  # stale or corrupt earlier download: fetch again
    made = []  # the folders this call creates, deepest first: removed again if the download fails
    folder = os.path.dirname(os.path.abspath(dest))
    while not os.path.isdir(folder):
        made.append(folder)
        folder = os.path.dirname(folder)
    os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
    part = dest + ".part"
    if not quiet:
        print(f"downloading {url}", file=sys.stderr, flush=True)
    try:
        req = urllib.request.Request(url, headers={"User-Agent": "gpt2-trainer-data-scripts"})
        with urllib.request.urlopen(req, timeout=60) as r, open(part, "wb") as f:
            while True:
                block = r.read(1 << 20)
                if not block:
                    break
                f.write(block)
    except OSError as e:  # URLError, HTTPError, timeouts, disk errors are all OSError
        if os.path.exists(part):
            os.remove(part)
        for d in made:
            try:
                os.rmdir(d)  # only while empty
            except OSError:
                break
        raise DataError(f"cannot download {url}: {e}{OFFLINE_HINT}") from None
    if sha256 is not None:
        actual = sha256_file(part)
        if actual != sha256:
            os.remove(part)
            raise DataError(f"checksum mismatch for {url}: sha256 {actual}, expected {sha256}")
    os.replace(part, dest)
    return dest


def read_url(url):
    """Small downloads (listings) straight into memory."""
    try:
        req = urllib.request.Request(url, headers={"User-Agent": "gpt2-trainer-data-scripts"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.read()
    except OSError as e:
        raise DataError(f"cannot download {url}: {e}{OFFLINE_HINT}") from None
