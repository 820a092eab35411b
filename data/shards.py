"""Token shards (MODEL.md "Data", llm.c-compatible): read, write and validate.

A shard is a 1024-byte header of 256 little-endian int32 -- [0] = 20240520 (magic),
[1] = 1 (version), [2] = N (token count), the rest 0 -- followed by N little-endian
uint16 tokens; the file size is exactly 1024 + 2N. A dataset folder holds
NAME_{train,val,test}_NNNNNN.bin, numbered from 000000 per split.

The name rule is SHARD_RE: the split is the last "_SPLIT_" before the six-digit index,
so my_val_set_train_000000.bin is a train shard of the dataset my_val_set. The C++
loader (src/dataloader.cpp, kShardName) uses the same pattern; test_datasets.py checks
that the two agree on a table of tricky names.

Every script reads and writes shards through this module. Problems raise ShardError
(a DataError), printed by the scripts as `error: ...`.
"""
import glob
import os
import re

from fetch import DataError, require

np = require("numpy")

MAGIC = 20240520
VERSION = 1
HEADER_INTS = 256
HEADER_BYTES = 4 * HEADER_INTS
SPLITS = ("train", "val", "test")
DEFAULT_SHARD_TOKENS = 100_000_000
SHARD_RE = re.compile(r"^(?P<name>.+)_(?P<split>train|val|test)_(?P<index>[0-9]{6})\.bin$")
SHARD_GLOB_RE = re.compile(r"^(?P<name>.+)_(?P<split>train|val|test)_[0-9*?\[\]!-]+\.bin$")


class ShardError(DataError):
    pass


def shard_name(name, split, index):
    return f"{name}_{split}_{index:06d}.bin"


def parse_shard_name(path):
    """(dataset name, split, index) of a shard path by SHARD_RE, or None for other names."""
    m = SHARD_RE.match(os.path.basename(path))
    return (m.group("name"), m.group("split"), int(m.group("index"))) if m else None


def dataset_of_pattern(pattern):
    """The dataset name in a shard path or glob (data/ptb/ptb_train_*.bin -> 'ptb'): SHARD_RE
    with wildcards allowed in the index; None when the name does not follow it."""
    m = SHARD_GLOB_RE.match(os.path.basename(pattern))
    return m.group("name") if m else None


def write_shard(path, tokens):
    """Write tokens (any int sequence / array, each 0..65535) as one shard. The file is
    written under a temporary name and renamed, so a crash never leaves a partial shard.
    Returns the number of tokens written. (Callable from tests and other tools.)"""
    arr = np.asarray(tokens)
    if arr.ndim != 1:
        raise ShardError(f"{path}: tokens must be a 1-D sequence")
    if arr.size and (arr.dtype.kind not in "iu" or int(arr.min()) < 0 or int(arr.max()) > 0xFFFF):
        raise ShardError(f"{path}: tokens must be integers in 0..65535")
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[0], header[1], header[2] = MAGIC, VERSION, arr.size
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header.tobytes())
        f.write(arr.astype("<u2", copy=False).tobytes())
    os.replace(tmp, path)
    return int(arr.size)


def read_header(path):
    """Return (magic, version, n) after checking the header and the file size."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            raw = f.read(HEADER_BYTES)
    except OSError as e:
        raise ShardError(f"{path}: cannot read: {e.strerror or e}") from None
    if len(raw) < HEADER_BYTES:
        raise ShardError(f"{path}: file is {size} bytes, shorter than the {HEADER_BYTES}-byte header")
    header = np.frombuffer(raw, dtype="<i4")
    magic, version, n = int(header[0]), int(header[1]), int(header[2])
    if magic != MAGIC:
        raise ShardError(f"{path}: bad magic {magic} (expected {MAGIC}); not a token shard")
    if version != VERSION:
        raise ShardError(f"{path}: unsupported version {version} (expected {VERSION})")
    if n < 0:
        raise ShardError(f"{path}: negative token count {n}")
    if size != HEADER_BYTES + 2 * n:
        raise ShardError(f"{path}: size {size} bytes does not match header token count {n} "
                         f"(expected {HEADER_BYTES + 2 * n})")
    return magic, version, n


def read_shard(path):
    """Return the tokens of a shard as a uint16 numpy array (header checked)."""
    _, _, n = read_header(path)
    return np.fromfile(path, dtype="<u2", count=n, offset=HEADER_BYTES)


def check_shard(path, vocab_size):
    """Validate a shard the way the trainer does; returns (n, min id, max id)."""
    tokens = read_shard(path)
    if tokens.size == 0:
        raise ShardError(f"{path}: shard has no tokens")
    lo, hi = int(tokens.min()), int(tokens.max())
    if hi >= vocab_size:
        pos = int(np.argmax(tokens >= vocab_size))
        raise ShardError(f"{path}: token {int(tokens[pos])} at position {pos} is >= vocab size {vocab_size}")
    return tokens.size, lo, hi


def find_shards(dir_or_glob):
    """Map split -> sorted shard paths for a dataset folder (every *.bin in it) or a glob.
    Files whose names do not follow NAME_SPLIT_NNNNNN.bin go under the key None."""
    if os.path.isdir(dir_or_glob):
        paths = glob.glob(os.path.join(dir_or_glob, "*.bin"))
    else:
        paths = glob.glob(dir_or_glob)
    groups = {}
    for p in sorted(paths):
        parsed = parse_shard_name(p)
        groups.setdefault(parsed[1] if parsed else None, []).append(p)
    return groups


def remove_shards(out_dir, name, split):
    """Delete a split's old shards so a rerun with fewer shards leaves no stale ones."""
    for p in glob.glob(os.path.join(glob.escape(out_dir), f"{glob.escape(name)}_{split}_*.bin")):
        parsed = parse_shard_name(p)
        if parsed and parsed[:2] == (name, split):  # my_val_set_train_000000.bin is not my's val
            os.remove(p)


class ShardWriter:
    """Streams one split's tokens into NAME_SPLIT_000000.bin, _000001.bin, ... holding at
    most shard_tokens tokens each. Optionally stops at max_tokens (add() then returns False)."""

    def __init__(self, out_dir, name, split, shard_tokens=DEFAULT_SHARD_TOKENS, max_tokens=None):
        if shard_tokens <= 0:
            raise ShardError("shard size must be a positive number of tokens")
        self.out_dir, self.name, self.split = out_dir, name, split
        self.shard_tokens, self.max_tokens = shard_tokens, max_tokens
        self.parts, self.fill = [], 0        # pending arrays for the current shard
        self.total, self.paths = 0, []
        os.makedirs(out_dir, exist_ok=True)
        remove_shards(out_dir, name, split)

    def full(self):
        return self.max_tokens is not None and self.total >= self.max_tokens

    def add(self, tokens):
        """Append tokens; returns False once max_tokens is reached (the rest is dropped)."""
        arr = np.asarray(tokens, dtype=np.uint16)
        if self.max_tokens is not None:
            arr = arr[: max(0, self.max_tokens - self.total)]
        while arr.size:
            take = min(arr.size, self.shard_tokens - self.fill)
            self.parts.append(arr[:take])
            self.fill += take
            self.total += take
            arr = arr[take:]
            if self.fill == self.shard_tokens:
                self._flush()
        return not self.full()

    def _flush(self):
        if self.fill == 0:
            return
        path = os.path.join(self.out_dir, shard_name(self.name, self.split, len(self.paths)))
        write_shard(path, np.concatenate(self.parts))
        self.paths.append(path)
        self.parts, self.fill = [], 0

    def close(self):
        self._flush()
        return self.paths
