#!/usr/bin/env python3
"""Tests of the shard tools and the dataset script (data/shards.py, check_dataset.py,
inspect_shard.py, prepare_data.py), on small fake mirrors built in a temporary folder.

Bad-input checks fail before the vocabulary is needed, so they run anywhere. Checks that
tokenize need the GPT-2 vocabulary ($GPT2_MIRROR, else ../shared/data, else the cache
data/gpt2/, else a download) and report SKIPPED without it.
"""
import argparse
import glob
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "data")
sys.path.insert(0, SCRIPTS)
sys.path.insert(0, os.path.join(ROOT, "test"))

from testlib import check, finish, run_without, skip  # noqa: E402
from fetch import DataError  # noqa: E402
import gpt2_tokenizer as gt  # noqa: E402
from vocab import load_tokenizer  # noqa: E402
import prepare_data as pd  # noqa: E402
import shards  # noqa: E402

EOT = 50256


def run(script, *args):
    if script == "prepare_data.py" and "--vocab-cache" not in args:  # leave the repository's data/gpt2/ alone
        args += ("--vocab-cache", os.path.join(tmp, "vocab_cache"))
    r = subprocess.run([sys.executable, os.path.join(SCRIPTS, script)] + [str(a) for a in args],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    return r.returncode, r.stdout, r.stderr


def expect_error(name, pattern, script, *args):
    """The script must exit 1 with an `error: ...` line containing pattern on stderr."""
    rc, out, err = run(script, *args)
    lines = [l for l in err.splitlines() if l.startswith("error: ")]
    check(name, rc == 1 and any(pattern in l for l in lines),
          f"rc={rc}, stderr={err.strip()[-300:]!r}")


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


tmp = tempfile.mkdtemp(prefix="test_datasets_")
try:
    # ---- shard writer / reader ---------------------------------------------------------------
    rng = np.random.default_rng(7)
    toks = rng.integers(0, 65536, size=1000).astype(np.int64)
    p = os.path.join(tmp, "x_train_000000.bin")
    shards.write_shard(p, toks)
    raw = open(p, "rb").read()
    header = np.frombuffer(raw[:1024], dtype="<i4")
    check("shard_layout", len(raw) == 1024 + 2000 and list(header[:3]) == [20240520, 1, 1000]
          and not header[3:].any() and raw[1024:1026] == int(toks[0]).to_bytes(2, "little"))
    check("shard_roundtrip", np.array_equal(shards.read_shard(p), toks) and shards.read_header(p) == (20240520, 1, 1000))
    shards.write_shard(p, [])
    check("shard_empty_roundtrip", shards.read_shard(p).size == 0 and os.path.getsize(p) == 1024)
    for name, bad in (("shard_rejects_big_id", [1, 65536]), ("shard_rejects_negative", [-1])):
        try:
            shards.write_shard(p, bad)
            check(name, False, "accepted")
        except DataError as e:
            check(name, "0..65535" in str(e), str(e))

    def corrupt(path, n=10, magic=20240520, version=1, count=None, extra=b""):
        h = np.zeros(256, dtype="<i4")
        h[:3] = [magic, version, n if count is None else count]
        write(path, h.tobytes() + np.arange(n, dtype="<u2").tobytes() + extra)

    for name, kw, msg in (("read_bad_magic", dict(magic=1234), "bad magic"),
                          ("read_bad_version", dict(version=2), "unsupported version"),
                          ("read_size_mismatch", dict(extra=b"\0"), "does not match"),
                          ("read_count_too_big", dict(count=11), "does not match")):
        q = os.path.join(tmp, "bad.bin")
        corrupt(q, **kw)
        try:
            shards.read_shard(q)
            check(name, False, "accepted")
        except DataError as e:
            check(name, msg in str(e), str(e))
    write(os.path.join(tmp, "short.bin"), b"\0" * 100)
    try:
        shards.read_shard(os.path.join(tmp, "short.bin"))
        check("read_short_file", False, "accepted")
    except DataError as e:
        check("read_short_file", "shorter than" in str(e), str(e))

    out = os.path.join(tmp, "w")
    os.makedirs(out)
    write(os.path.join(out, "d_train_000007.bin"), b"stale")       # must be removed by the writer
    w = shards.ShardWriter(out, "d", "train", shard_tokens=10)
    for chunk in (range(7), range(7, 18), range(18, 25)):
        w.add(list(chunk))
    paths = w.close()
    names = [os.path.basename(x) for x in sorted(glob.glob(os.path.join(out, "*.bin")))]
    check("writer_splits_shards", names == ["d_train_000000.bin", "d_train_000001.bin", "d_train_000002.bin"]
          and [shards.read_shard(x).size for x in paths] == [10, 10, 5]
          and np.array_equal(np.concatenate([shards.read_shard(x) for x in paths]), np.arange(25)), f"{names}")
    w = shards.ShardWriter(out, "d", "val", shard_tokens=100, max_tokens=12)
    more = [w.add(range(5)), w.add(range(5)), w.add(range(5))]
    w.close()
    check("writer_max_tokens", more == [True, True, False] and w.total == 12
          and shards.read_shard(os.path.join(out, "d_val_000000.bin")).size == 12, f"{more} {w.total}")

    # ---- the shard name rule: NAME_SPLIT_NNNNNN.bin, split = the last _SPLIT_ before the index ----
    NAMES = [("my_val_set_train_000000.bin", ("my_val_set", "train", 0)),
             ("x_val_train_000003.bin", ("x_val", "train", 3)),
             ("a_train_val_000001.bin", ("a_train", "val", 1)),
             ("ptb_test_000012.bin", ("ptb", "test", 12)),
             ("ptb_train_00000.bin", None), ("ptb_train_0000000.bin", None),   # 5 or 7 digits
             ("ptb_valid_000000.bin", None), ("_train_000000.bin", None), ("train_000000.bin", None),
             ("ptb_train_000000.bin.tmp", None), ("ptb_train_000000.binx", None),
             ("ptb_train_\u0661\u0662\u0663\u0664\u0665\u0666.bin", None)]   # non-ASCII digits
    got = [shards.parse_shard_name(os.path.join("some", "dir", n)) for n, _ in NAMES]
    check("shard_name_rule", got == [want for _, want in NAMES],
          f"{[(n, g) for (n, w), g in zip(NAMES, got) if g != w]}")
    # The C++ loader's pattern (src/dataloader.cpp, kShardName) must classify them the same way.
    import re
    cpp = open(os.path.join(ROOT, "src", "dataloader.cpp"), encoding="utf-8").read()
    m = re.search(r'kShardName\(R"\((.*)\)"\)', cpp)
    if not m:
        check("shard_name_rule_same_in_cpp", False, "kShardName not found in src/dataloader.cpp")
    else:
        rule = re.compile(m.group(1))
        cpp_got = [(lambda x: (x.group(1), x.group(2), int(x.group(3))) if x else None)(rule.match(n))
                   for n, _ in NAMES]
        check("shard_name_rule_same_in_cpp", cpp_got == got, f"C++ {m.group(1)!r} gives {cpp_got}")
    pats = {"data/ptb/ptb_train_*.bin": "ptb", "d/my_val_set_train_*.bin": "my_val_set",
            "d/x_val_00000[0-9].bin": "x", "d/*.bin": None, "d/ptb.bin": None}
    got = {p: shards.dataset_of_pattern(p) for p in pats}
    check("dataset_of_pattern", got == pats, f"{got}")
    tricky = os.path.join(tmp, "tricky")
    os.makedirs(tricky)
    for n in ("my_val_set_train_000000.bin", "my_val_set_val_000000.bin", "my_val_000000.bin", "notes.bin"):
        shards.write_shard(os.path.join(tricky, n), [EOT, 1, 2])
    groups = shards.find_shards(tricky)
    check("find_shards_tricky_names", {k: [os.path.basename(x) for x in v] for k, v in groups.items()} ==
          {"train": ["my_val_set_train_000000.bin"], "val": ["my_val_000000.bin", "my_val_set_val_000000.bin"],
           None: ["notes.bin"]}, f"{groups}")
    shards.ShardWriter(tricky, "my", "val").close()   # clears dataset my's val split only
    check("writer_keeps_other_datasets", sorted(os.listdir(tricky)) ==
          ["my_val_set_train_000000.bin", "my_val_set_val_000000.bin", "notes.bin"], f"{os.listdir(tricky)}")

    # ---- check_dataset.py / inspect_shard.py ---------------------------------------------------
    def make_dataset(path, splits=("train", "val", "test"), n=50):
        os.makedirs(path, exist_ok=True)
        for s in splits:
            shards.write_shard(os.path.join(path, f"ds_{s}_000000.bin"), [EOT] + list(range(n - 1)))

    good = os.path.join(tmp, "good")
    make_dataset(good)
    rc, o, e = run("check_dataset.py", good)
    check("check_dataset_ok", rc == 0 and "ok:" in o and "train: 1 shard(s), 50 tokens" in o, o + e)
    rc, o, e = run("check_dataset.py", os.path.join(good, "*_val_*.bin"))
    check("check_dataset_glob", rc == 0 and "val: 1 shard(s)" in o and "train" not in o, o + e)

    cases = [
        ("check_bad_magic", lambda d: corrupt(os.path.join(d, "ds_val_000000.bin"), magic=7), "bad magic"),
        ("check_bad_version", lambda d: corrupt(os.path.join(d, "ds_val_000000.bin"), version=3), "unsupported version"),
        ("check_bad_size", lambda d: corrupt(os.path.join(d, "ds_train_000000.bin"), extra=b"\0\0"), "does not match"),
        ("check_token_too_big", lambda d: shards.write_shard(os.path.join(d, "ds_test_000000.bin"), [1, 2, 50257]),
         "token 50257 at position 2 is >= vocab size 50257"),
        ("check_empty_shard", lambda d: shards.write_shard(os.path.join(d, "ds_train_000000.bin"), []), "no tokens"),
        ("check_missing_split", lambda d: os.remove(os.path.join(d, "ds_val_000000.bin")), "split val is empty"),
        ("check_numbering_gap", lambda d: os.rename(os.path.join(d, "ds_test_000000.bin"),
                                                    os.path.join(d, "ds_test_000001.bin")), "without gaps"),
        ("check_bad_name", lambda d: write(os.path.join(d, "notes.bin"), b"x"), "name does not follow"),
    ]
    for name, damage, msg in cases:
        d = os.path.join(tmp, name)
        make_dataset(d)
        damage(d)
        expect_error(name, msg, "check_dataset.py", d)
    expect_error("check_nothing_found", "no shards found", "check_dataset.py", os.path.join(tmp, "nothing", "*.bin"))
    rc, o, e = run("check_dataset.py", good, "--vocab-size", "40")
    check("check_vocab_size_option", rc == 1 and ">= vocab size 40" in e, e)

    rc, o, e = run("inspect_shard.py", os.path.join(good, "ds_train_000000.bin"), "--count", "5")
    check("inspect_shard_header", rc == 0 and "magic 20240520, version 1, tokens 50" in o
          and "min 0, max 50256" in o and "first 5 ids: 50256 0 1 2 3" in o, o + e)
    expect_error("inspect_shard_bad_file", "bad magic", "inspect_shard.py",
                 os.path.join(tmp, "check_bad_magic", "ds_val_000000.bin"))

    # ---- prepare_data.py: bad input fails early, with no vocabulary needed ---------------------
    def pg19_mirror(path, books=None):
        books = books or {"train/10.txt": "First book.\nIt has lines.\n", "train/9.txt": "Book nine\n",
                          "train/100.txt": "Último libro — naïve café 日本 👍\n\nThe end.\n",
                          "validation/5.txt": "A validation book.\n", "test/7.txt": "A test book.\n"}
        for rel, text in books.items():
            write(os.path.join(path, "pg19", rel), text)
        return path

    out = os.path.join(tmp, "out")
    expect_error("prepare_missing_mirror", "does not exist", "prepare_data.py", "ptb", "--mirror",
                 os.path.join(tmp, "no_such_dir"), "--out", out)
    wt = os.path.join(tmp, "wt")
    write(os.path.join(wt, "wikitext-2", "wiki.train.tokens"), " \n = A = \n \n text \n")
    write(os.path.join(wt, "wikitext-2", "wiki.test.tokens"), " \n = B = \n \n text \n")
    expect_error("prepare_missing_file", "missing file " + os.path.join(wt, "wikitext-2", "wiki.valid.tokens"),
                 "prepare_data.py", "wikitext2", "--mirror", wt, "--out", out)
    write(os.path.join(wt, "wikitext-2", "wiki.valid.tokens"), " \n = C = \n \n text \n")
    expect_error("prepare_pinned_checksum", "checksum mismatch for " + os.path.join(wt, "wikitext-2", "wiki.train.tokens"),
                 "prepare_data.py", "wikitext2", "--mirror", wt, "--out", out)

    m = pg19_mirror(os.path.join(tmp, "pg_sums"))
    nine = hashlib.sha256("Book nine\n".encode()).hexdigest()     # a correct line, then a wrong one
    write(os.path.join(m, "SHA256SUMS"), f"{nine}  ./pg19/train/9.txt\n{'0' * 64}  ./pg19/validation/5.txt\n")
    expect_error("prepare_mirror_sums_mismatch", "checksum mismatch for " + os.path.join(m, "pg19/validation/5.txt"),
                 "prepare_data.py", "pg19", "--mirror", m, "--out", out)
    m = pg19_mirror(os.path.join(tmp, "pg_utf8"))
    write(os.path.join(m, "pg19", "test", "8.txt"), b"Latin-1 caf\xe9\n")
    expect_error("prepare_invalid_utf8", "test/8.txt: invalid UTF-8 at byte 11", "prepare_data.py", "pg19",
                 "--mirror", m, "--out", out)
    m = pg19_mirror(os.path.join(tmp, "pg_empty"))
    os.remove(os.path.join(m, "pg19", "validation", "5.txt"))
    expect_error("prepare_empty_split", "split val is empty", "prepare_data.py", "pg19", "--mirror", m, "--out", out)
    write(os.path.join(m, "pg19", "validation", "6.txt"), b"")
    expect_error("prepare_empty_split_file", "split val is empty", "prepare_data.py", "pg19", "--mirror", m, "--out", out)
    m = pg19_mirror(os.path.join(tmp, "pg_nofolder"))
    shutil.rmtree(os.path.join(m, "pg19", "test"))
    expect_error("prepare_missing_folder", "missing folder", "prepare_data.py", "pg19", "--mirror", m, "--out", out)
    expect_error("prepare_bad_shard_size", "--shard-size", "prepare_data.py", "pg19", "--shard-size", "0")
    expect_error("prepare_option_for_pg19_only", "applies to pg19 only", "prepare_data.py", "ptb", "--max-books", "3")
    check("prepare_errors_wrote_nothing", not os.path.exists(out), "output folder was created")

    # ---- the download step, without network: archives already in data/raw are unpacked into the
    # mirror layout, and PG-19's listing/book fetches are served from memory.
    pd.RAW_ROOT = os.path.join(tmp, "raw")
    zpath = os.path.join(pd.RAW_ROOT, "wikitext2", "wikitext-2-v1.zip")
    os.makedirs(os.path.dirname(zpath))
    with zipfile.ZipFile(zpath, "w") as z:
        for n in ("train", "valid", "test"):
            z.writestr(f"wikitext-2/wiki.{n}.tokens", f" = {n} = \n")
    root = pd.WikiText2().fetch(None)
    check("download_wikitext2_unpacks", open(os.path.join(root, "wikitext-2", "wiki.valid.tokens")).read() == " = valid = \n")
    tpath = os.path.join(pd.RAW_ROOT, "ptb", "simple-examples.tgz")
    os.makedirs(os.path.dirname(tpath))
    with tarfile.open(tpath, "w:gz") as t:
        for n in ("train", "valid", "test"):
            data = f" {n} sentence \n".encode()
            info = tarfile.TarInfo(f"./simple-examples/data/ptb.{n}.txt")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    root = pd.PTB().fetch(None)
    check("download_ptb_unpacks", open(os.path.join(root, "ptb", "ptb.test.txt")).read() == " test sentence \n")

    served = {"metadata.csv": "3,Three,1900,u\n1,One,1900,u\n2,Two,1900,u\n10,Ten,1900,u\n4,Four,1900,u\n"}
    for i in (1, 2, 3, 4, 10):
        served[f"{'validation' if i == 4 else 'test' if i == 10 else 'train'}/{i}.txt"] = f"book {i}\n"

    def fake_download(url, dest, sha256=None, quiet=False):
        write(dest, served[url[len(pd.PG19.bucket):]])
        return dest

    def fake_listing(url):
        prefix = url.split("prefix=")[1].split("&")[0]
        return json.dumps({"items": [{"name": k} for k in served if k.startswith(prefix)]}).encode()

    pd.download, pd.read_url = fake_download, fake_listing
    args = argparse.Namespace(max_books=2, max_eval_books=None, max_train_tokens=None)
    root = pd.PG19().fetch(args)
    got = pd.PG19().split_files(root, args)
    check("download_pg19_layout", got == {"train": ["pg19/train/1.txt", "pg19/train/2.txt"],
                                          "val": ["pg19/validation/4.txt"], "test": ["pg19/test/10.txt"]}, f"{got}")

    # a download that fails says how to do without the network (an unreadable file:// URL: no
    # network needed to fail)
    import fetch
    try:
        fetch.download("file://" + os.path.join(tmp, "no_such_file.zip"), os.path.join(tmp, "dl", "x.zip"), quiet=True)
        check("download_error_names_mirror", False, "no error")
    except DataError as e:
        check("download_error_names_mirror", str(e).startswith("cannot download file://") and "--mirror DIR" in str(e)
              and not os.path.exists(os.path.join(tmp, "dl", "x.zip.part")), str(e))
    check("download_failed_leaves_no_folder", not os.path.exists(os.path.join(tmp, "dl")), str(os.listdir(tmp)))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "data", "prepare_data.py"), "wikitxt"],
                       capture_output=True, text=True)
    check("prepare_bad_dataset_one_line", r.returncode == 1 and r.stdout == "" and r.stderr.count("\n") == 1
          and r.stderr.startswith("error: argument dataset: invalid choice: 'wikitxt'"), r.stderr)

    # ---- prepare_data.py end to end (needs the vocabulary) --------------------------------------
    tok, mirror, why = load_tokenizer()
    E2E = ["prepare_pg19_shards", "prepare_pg19_check_dataset", "prepare_installs_vocab", "prepare_workers_identical", "prepare_max_train_tokens",
           "prepare_max_books", "prepare_utf8_replace_bom_crlf", "prepare_wikitext_articles", "prepare_ptb_joining",
           "inspect_shard_decodes", "prepare_real_wikitext2_counts"]
    if tok is None:
        for name in E2E:
            skip(name, f"GPT-2 vocabulary unavailable (no mirror, no cache, download failed: {why})")
        raise SystemExit(finish())

    def fake_mirror(name):
        """A mirror folder whose gpt2/ is a link to the vocabulary (nothing is copied)."""
        d = os.path.join(tmp, name)
        os.makedirs(d, exist_ok=True)
        os.symlink(os.path.dirname(gt.vocab_paths(mirror)[0]), os.path.join(d, "gpt2"))
        return d

    def split_tokens(folder, name, split):
        return np.concatenate([shards.read_shard(x) for x in
                               sorted(glob.glob(os.path.join(folder, f"{name}_{split}_*.bin")))]).tolist()

    m = pg19_mirror(fake_mirror("pg"))
    books = {s: [open(os.path.join(m, "pg19", f), encoding="utf-8").read() for f in fs] for s, fs in
             {"train": ["train/9.txt", "train/10.txt", "train/100.txt"], "val": ["validation/5.txt"],
              "test": ["test/7.txt"]}.items()}
    o1, o2 = os.path.join(tmp, "pg_o1"), os.path.join(tmp, "pg_o2")
    rc, o, e = run("prepare_data.py", "pg19", "--mirror", m, "--out", o1, "--shard-size", "8", "--workers", "2")
    expected = {s: [i for b in bs for i in [EOT] + tok.encode(b)] for s, bs in books.items()}
    got = {s: split_tokens(o1, "pg19", s) for s in shards.SPLITS} if rc == 0 else {}
    check("prepare_pg19_shards", rc == 0 and got == expected and "pg19 train: documents 3," in o
          and len(glob.glob(os.path.join(o1, "pg19_train_*.bin"))) == -(-len(expected["train"]) // 8), o + e)
    rc, o, e = run("check_dataset.py", o1)
    check("prepare_pg19_check_dataset", rc == 0, o + e)
    vc = os.path.join(tmp, "vocab_cache")   # the vocabulary lands where build/train and build/sample look
    check("prepare_installs_vocab", sorted(os.listdir(vc)) == sorted(gt.VOCAB_FILES) and all(
        gt.sha256_file(os.path.join(vc, n)) == h for n, h in gt.VOCAB_FILES.items()), f"{os.listdir(vc)}")
    run("prepare_data.py", "pg19", "--mirror", m, "--out", o2, "--shard-size", "8", "--workers", "1")
    same = all(open(a, "rb").read() == open(b, "rb").read() for a, b in
               zip(sorted(glob.glob(o1 + "/*.bin")), sorted(glob.glob(o2 + "/*.bin"))))
    check("prepare_workers_identical", same and len(glob.glob(o1 + "/*.bin")) == len(glob.glob(o2 + "/*.bin")))
    rc, o, e = run("prepare_data.py", "pg19", "--mirror", m, "--out", o2, "--max-train-tokens", "7")
    check("prepare_max_train_tokens", rc == 0 and split_tokens(o2, "pg19", "train") == expected["train"][:7]
          and not glob.glob(o2 + "/pg19_train_000001.bin"), o + e)   # old shards were replaced
    rc, o, e = run("prepare_data.py", "pg19", "--mirror", m, "--out", o2, "--max-books", "1")
    check("prepare_max_books", rc == 0 and split_tokens(o2, "pg19", "train") == [EOT] + tok.encode(books["train"][0]), o + e)

    m = pg19_mirror(fake_mirror("pg_rep"))
    write(os.path.join(m, "pg19", "test", "7.txt"), b"\xef\xbb\xbfBOM line\r\nbad \xff byte\r\n")
    rc, o, e = run("prepare_data.py", "pg19", "--mirror", m, "--out", o2, "--utf8-errors", "replace")
    check("prepare_utf8_replace_bom_crlf", rc == 0 and split_tokens(o2, "pg19", "test")
          == [EOT] + tok.encode("BOM line\nbad \ufffd byte\n"), o + e)

    # WikiText: titles are " = X = " lines with blank lines around them; a formula line of the
    # same shape inside an article (no blank line after it) and " = = Section = = " stay inside.
    m = fake_mirror("wt2")
    art1 = " = Alpha = \n \n Alpha is a <unk> . \n \n = = History = = \n \n It began in 1 @,@ 000 . \n"
    art2 = " = Beta = \n \n The formula \n = 1 / s and k = \n follows . \n \n"
    for split, fname in (("train", "wiki.train.tokens"), ("valid", "wiki.valid.tokens"), ("test", "wiki.test.tokens")):
        write(os.path.join(m, "wikitext-2", fname), " \n" + art1 + " \n" + art2)
    rc, o, e = run("prepare_data.py", "wikitext2", "--mirror", m, "--out", o2, "--no-verify")
    want = [EOT] + tok.encode(art1 + " \n") + [EOT] + tok.encode(art2)
    check("prepare_wikitext_articles", rc == 0 and all(split_tokens(o2, "wikitext2", s) == want for s in shards.SPLITS)
          and "documents 2," in o, o + e)

    m = fake_mirror("ptb")
    ptb_text = " the cat sat on the mat \n <unk> rose N % \n"
    for s in ("train", "valid", "test"):
        write(os.path.join(m, "ptb", f"ptb.{s}.txt"), ptb_text)
    rc, o, e = run("prepare_data.py", "ptb", "--mirror", m, "--out", o2, "--no-verify")
    check("prepare_ptb_joining", rc == 0 and split_tokens(o2, "ptb", "val") == [EOT] + tok.encode(ptb_text), o + e)

    rc, o, e = run("inspect_shard.py", os.path.join(o2, "ptb_val_000000.bin"), "--mirror", m)
    check("inspect_shard_decodes", rc == 0 and repr("<|endoftext|>" + ptb_text) in o, o + e)

    # A python3 without numpy (or, for the tokenizer, regex): every data script says which Debian
    # package is missing in one error line and exits 1; no traceback.
    for script, module in [("prepare_data.py", "numpy"), ("check_dataset.py", "numpy"), ("inspect_shard.py", "numpy"),
                           ("make_synthetic.py", "numpy"), ("gpt2_tokenizer.py", "regex")]:
        rc, e = run_without(module, os.path.join(SCRIPTS, script), ["--help"])
        check(f"no_{module}_clear_error_{script[:-3]}", rc == 1 and e.startswith("error: ") and e.count("\n") == 1
              and f"has no module '{module}' (Debian: apt-get install python3-{module})" in e, e[-300:])

    # The real WikiText-2 from the mirror: 600/60/60 articles and the token counts recorded in
    # data/README.md (a regression check of tokenizer + joining policy on the whole corpus).
    real = mirror and os.path.isdir(os.path.join(mirror, "wikitext-2"))
    if not real:
        skip("prepare_real_wikitext2_counts", "no local mirror with wikitext-2/")
    else:
        rc, o, e = run("prepare_data.py", "wikitext2", "--mirror", mirror, "--out", os.path.join(tmp, "real"))
        want = ["train: documents 600, characters 10,780,435, tokens 2,448,980,",
                "val: documents 60, characters 1,120,190, tokens 258,717,",
                "test: documents 60, characters 1,255,016, tokens 295,935,"]
        check("prepare_real_wikitext2_counts", rc == 0 and all(w in o for w in want), o + e)
finally:
    shutil.rmtree(tmp, ignore_errors=True)

finish()
