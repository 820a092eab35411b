"""Property tests (Hypothesis) of the Python readers of files from elsewhere, the twins of the C++
fuzz targets (test/fuzz/): scripts/compare_runs.py's log and config.json readers and data/shards.py's
shard checks. On any bytes each returns what the file holds or raises its own error (InputError,
ShardError), never another exception. SKIPPED without python3-hypothesis."""
import contextlib
import io
import json
import os
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
sys.path.insert(0, os.path.join(HERE, "..", "data"))
from testlib import check, finish, skip  # noqa: E402

tmp = tempfile.mkdtemp()
os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = os.path.join(tmp, "hypothesis")  # no .hypothesis/ in the tree
try:
    from hypothesis import HealthCheck, example, given, settings, strategies as st
except ImportError:
    skip("fuzz_readers", "no hypothesis (Debian's python3-hypothesis; scripts/install_deps.sh installs it)")
    sys.exit(0)
import compare_runs  # noqa: E402
import shards  # noqa: E402

EXAMPLES = 400 if os.environ.get("TEST_ALL") == "1" else 200
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def file_of(name, data):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def holds(name, prop):
    """Runs the Hypothesis property prop; one PASS or FAIL line with the falsifying example."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # read_log's notes on torn last lines
            prop()
    except Exception as e:  # noqa: BLE001 (the property's failure, whatever it raised)
        return check(name, False, f"{type(e).__name__}: {str(e)[:400]}")
    return check(name, True)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                           lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(), kids, max_size=4),
                           max_leaves=12)
lines = st.one_of(st.text(), json_values.map(json.dumps), st.integers(1, 5000).map(lambda n: "[" * n),
                  st.dictionaries(st.text(max_size=8), json_values, max_size=4).map(json.dumps))


@SETTINGS
@example(b"[" * 100000 + b"\n{}")  # found: json's RecursionError was no InputError
@given(st.binary(max_size=2000) | st.lists(lines, max_size=8).map(lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass")))
def read_log_any_bytes(data):
    path = file_of("log.jsonl", data)
    try:
        records = compare_runs.read_log(path)
    except compare_runs.InputError:
        return
    assert records and all(isinstance(r, dict) for r in records)


@SETTINGS
@given(st.lists(st.dictionaries(st.text(max_size=8), json_values, max_size=4), min_size=1, max_size=8))
def read_log_whole_records(recs):
    path = file_of("log.jsonl", "".join(json.dumps(r) + "\n" for r in recs).encode())
    assert compare_runs.read_log(path) == recs


@SETTINGS
@example(b"[" * 100000)
@given(st.binary(max_size=2000) | lines.map(lambda s: s.encode("utf-8", "surrogatepass")))
def read_config_any_bytes(data):
    try:
        config = compare_runs.read_config_json(file_of("config.json", data))
    except compare_runs.InputError:
        return
    assert isinstance(config, dict)


def header(magic, version, n):
    return struct.pack("<3i", magic, version, n) + bytes(1024 - 12)


shard_bytes = st.one_of(
    st.binary(max_size=3000),
    st.builds(lambda h, body: h + body,
              st.builds(header, st.sampled_from([shards.MAGIC, 0, -1]), st.sampled_from([1, 2]),
                        st.integers(-2**31, 2**31 - 1) | st.integers(0, 600)),
              st.binary(max_size=1200)))


@SETTINGS
@given(shard_bytes, st.integers(1, 65536))
def check_shard_any_bytes(data, vocab):
    path = file_of("x_train_000000.bin", data)
    try:
        n, lo, hi = shards.check_shard(path, vocab)
    except shards.ShardError:
        return
    magic, version, count = struct.unpack_from("<3i", data)
    tokens = struct.unpack_from(f"<{count}H", data, 1024)
    assert (magic, version, len(data)) == (shards.MAGIC, 1, 1024 + 2 * count)
    assert (n, lo, hi) == (count, min(tokens), max(tokens)) and hi < vocab


@SETTINGS
@given(st.lists(st.integers(0, 65535), min_size=1, max_size=500))
def shard_round_trip(tokens):
    path = os.path.join(tmp, "r_train_000000.bin")
    shards.write_shard(path, tokens)
    assert list(shards.read_shard(path)) == tokens
    assert shards.check_shard(path, 65536) == (len(tokens), min(tokens), max(tokens))


holds("fuzz_readers:read_log_any_bytes", read_log_any_bytes)
holds("fuzz_readers:read_log_whole_records", read_log_whole_records)
holds("fuzz_readers:read_config_any_bytes", read_config_any_bytes)
holds("fuzz_readers:check_shard_any_bytes", check_shard_any_bytes)
holds("fuzz_readers:shard_round_trip", shard_round_trip)
finish()
