#!/usr/bin/env python3
"""Turn WikiText-2, Penn Treebank or PG-19 into GPT-2 token shards (MODEL.md format).

    prepare_data.py wikitext2|ptb|pg19 [--mirror DIR] [--out data/NAME] [options]

Steps, in this order, so that bad input fails fast and before the vocabulary is needed:
  1. download (without --mirror): fetch the upstream archive or files into data/raw/NAME/
     and unpack them into the same layout as a mirror folder. With --mirror DIR the files
     are read from DIR instead; everything after this step is the same code.
  2. check: every file of every split exists, matches its SHA-256 where one is known, and
     decodes as UTF-8 (policy below); every split has at least one non-empty document.
  3. tokenize with GPT-2's BPE on all cores and write NAME_{train,val,test}_NNNNNN.bin
     (at most --shard-size tokens each) into --out, replacing that split's old shards.

Every document is preceded by <|endoftext|> (50256), as GPT-2's training data and llm.c's
loaders do: the first token of every split is 50256 and the token before each later
document is 50256. Text is kept verbatim apart from the normalisation below.

Joining, per dataset:
  wikitext2  wikitext-2/wiki.{train,valid,test}.tokens (the tokenized v1 release, <unk>
             and " @-@ " kept as they are). A document is one article: it starts at a
             top-level heading line " = Title = " (exactly one '=' each side; " = = Sub = = "
             lines stay inside the article; the heading must have a blank line on both sides,
             which tells titles from formula/legend lines such as " = Goals ; A = ") and
             runs, lines joined exactly as in the file
             (each ends with "\\n", blank lines are " \\n"), up to the next top-level heading.
             Whitespace-only lines before the first heading are dropped.
  ptb        ptb/ptb.{train,valid,test}.txt (Mikolov's version, one sentence a line, each
             line starting with a space). The whole file is one document: its sentences stay
             consecutive as in the file (the corpus carries no article boundaries), so
             each split is <|endoftext|> followed by the file's text.
  pg19       pg19/{train,validation,test}/ID.txt; one book is one document, books in
             increasing numeric id order. --max-books N keeps the first N training books,
             --max-eval-books N the first N of validation and of test, --max-train-tokens N
             cuts the train split at exactly N tokens (the last book is truncated).
Split names: valid/validation -> val.

Text policy: files are decoded as UTF-8. --utf8-errors strict (default) stops with an
error naming the file and byte offset at the first invalid sequence; --utf8-errors replace
substitutes U+FFFD for each invalid sequence instead. A leading byte-order mark is dropped
and CRLF line ends become LF (neither occurs in the three corpora as distributed).

Checksums: the WikiText-2 and PTB text files and the GPT-2 vocabulary are pinned to the
SHA-256 of the upstream files; a mirror's SHA256SUMS (if it has one) is also checked for
every file read. PG-19 books have no pinned sums. --no-verify skips all of this (for a
locally modified copy).
"""
import argparse
import collections
import csv
import json
import multiprocessing as mp
import os
import re
import sys
import tarfile
import time
import zipfile

from fetch import DATA_ROOT, ArgParser, DataError, check_sha256, download, read_sha256sums, read_url, require, sha256_bytes
from gpt2_tokenizer import EOT, VOCAB_CACHE, GPT2Tokenizer, decode_utf8, install_vocab, split_text, tiktoken_encoding
from shards import DEFAULT_SHARD_TOKENS, SPLITS, ShardWriter

np = require("numpy")

RAW_ROOT = os.path.join(DATA_ROOT, "raw")


class Dataset:
    """One corpus: where it comes from and how its files become documents."""
    name = ""
    pinned = {}          # path relative to the mirror root -> sha256 of the upstream file

    def fetch(self, args):
        """Download step: returns a folder laid out like the mirror."""
        raise NotImplementedError

    def split_files(self, root, args):
        """{split: [path relative to root, ...]}"""
        raise NotImplementedError

    def documents(self, text):
        """The documents of one file's text."""
        return [text]


class ArchiveDataset(Dataset):
    """A corpus shipped as one archive (downloaded from the first of urls that works) holding one
    file per split: files = {split: path relative to the mirror root}."""
    urls = []
    files = {}
    archive = ""         # the archive's file name in the raw folder

    def fetch(self, args):
        root = os.path.join(RAW_ROOT, self.name)
        if all(os.path.isfile(os.path.join(root, f)) for f in self.files.values()):
            return root
        archive = os.path.join(root, self.archive)
        download_first(self.urls, archive)
        self.extract(archive, root)
        return root

    def extract(self, archive, root):
        """Writes each of files from the archive under root (DataError if it is not the expected one)."""
        raise NotImplementedError

    def split_files(self, root, args):
        return {s: [f] for s, f in self.files.items()}


class WikiText2(ArchiveDataset):
    name = "wikitext2"
    urls = ["https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-2-v1.zip",
            "https://wikitext.smerity.com/wikitext-2-v1.zip"]
    files = {"train": "wikitext-2/wiki.train.tokens", "val": "wikitext-2/wiki.valid.tokens",
             "test": "wikitext-2/wiki.test.tokens"}
    pinned = {
        "wikitext-2/wiki.train.tokens": "9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f",
        "wikitext-2/wiki.valid.tokens": "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8",
        "wikitext-2/wiki.test.tokens": "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0",
    }
    heading = re.compile(r"^ = [^=].* = $")   # " = Title = " but not " = = Section = = "

    archive = "wikitext-2-v1.zip"

    def extract(self, archive, root):
        try:
            with zipfile.ZipFile(archive) as z:
                for rel in self.files.values():
                    extract_member(z.read(rel), os.path.join(root, rel))
        except (zipfile.BadZipFile, KeyError) as e:
            raise DataError(f"{archive}: not the expected WikiText-2 archive ({e}); delete it and retry") from None

    def is_title(self, lines, i):
        """A top-level heading has a blank line on each side; this tells article titles from
        the few formula and table-legend lines of the same shape (e.g. " = Goals ; A = ")."""
        blank = lambda j: j < 0 or j >= len(lines) or not lines[j].strip()
        return bool(self.heading.match(lines[i].rstrip("\n"))) and blank(i - 1) and blank(i + 1)

    def documents(self, text):
        lines = text.splitlines(keepends=True)
        docs, cur = [], []
        for i, line in enumerate(lines):
            if self.is_title(lines, i):
                if cur:
                    docs.append("".join(cur))
                cur = [line]
            elif cur or line.strip():
                cur.append(line)
        if cur:
            docs.append("".join(cur))
        return docs


class PTB(ArchiveDataset):
    name = "ptb"
    urls = ["http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz"]
    files = {"train": "ptb/ptb.train.txt", "val": "ptb/ptb.valid.txt", "test": "ptb/ptb.test.txt"}
    pinned = {
        "ptb/ptb.train.txt": "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf",
        "ptb/ptb.valid.txt": "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2",
        "ptb/ptb.test.txt": "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0",
    }

    archive = "simple-examples.tgz"

    def extract(self, archive, root):
        try:
            with tarfile.open(archive, "r:gz") as t:
                members = {m.name.lstrip("./"): m for m in t.getmembers()}
                for rel in self.files.values():
                    member = members["simple-examples/data/" + os.path.basename(rel)]
                    extract_member(t.extractfile(member).read(), os.path.join(root, rel))
        except (tarfile.TarError, KeyError, OSError) as e:
            raise DataError(f"{archive}: not the expected PTB archive ({e}); delete it and retry") from None


class PG19(Dataset):
    name = "pg19"
    bucket = "https://storage.googleapis.com/deepmind-gutenberg/"
    listing = "https://storage.googleapis.com/storage/v1/b/deepmind-gutenberg/o"
    folders = {"train": "train", "val": "validation", "test": "test"}

    def limit(self, split, args):
        return args.max_books if split == "train" else args.max_eval_books

    def fetch(self, args):
        """metadata.csv lists every book id; the bucket listing of validation/ and test/
        (150 books) says which ids are held out, every other id is a training book."""
        root = os.path.join(RAW_ROOT, self.name)
        meta = download(self.bucket + "metadata.csv", os.path.join(root, "pg19", "metadata.csv"))
        with open(meta, encoding="utf-8", newline="") as f:
            ids = [row[0] for row in csv.reader(f) if row and row[0].isdigit()]
        held_out = {}
        for split in ("val", "test"):
            held_out[split] = sorted(self.list_bucket(self.folders[split] + "/"), key=int)
        taken = set(held_out["val"]) | set(held_out["test"])
        wanted = {"train": sorted((i for i in ids if i not in taken), key=int), **held_out}
        if args.max_books is None and args.max_train_tokens is None:
            print(f"note: downloading all {len(wanted['train'])} PG-19 training books (about 11 GB); "
                  "--max-books or --max-train-tokens takes a subset", file=sys.stderr)
        for split, books in wanted.items():
            n = self.limit(split, args)
            books = books[:n] if n else books
            # With only a token budget, fetch books until their text is about twice what
            # that budget needs (GPT-2 averages roughly 4 characters per token on prose).
            char_budget = 8 * args.max_train_tokens if split == "train" and args.max_train_tokens and not n else None
            chars = 0
            for book in books:
                path = download(f"{self.bucket}{self.folders[split]}/{book}.txt",
                                os.path.join(root, "pg19", self.folders[split], book + ".txt"), quiet=True)
                chars += os.path.getsize(path)
                if char_budget is not None and chars >= char_budget:
                    break
        return root

    def list_bucket(self, prefix):
        names, token = [], None
        while True:
            url = f"{self.listing}?prefix={prefix}&fields=items(name),nextPageToken&maxResults=1000"
            if token:
                url += "&pageToken=" + token
            try:
                page = json.loads(read_url(url))
            except json.JSONDecodeError:
                raise DataError(f"unexpected answer from {url}") from None
            names += [os.path.basename(it["name"])[:-4] for it in page.get("items", [])
                      if it["name"].endswith(".txt")]
            token = page.get("nextPageToken")
            if not token:
                return names

    def split_files(self, root, args):
        out = {}
        for split, folder in self.folders.items():
            d = os.path.join(root, "pg19", folder)
            if not os.path.isdir(d):
                raise DataError(f"missing folder {d} (expected the PG-19 layout pg19/{{train,validation,test}}/ID.txt)")
            names = [n for n in os.listdir(d) if n.endswith(".txt")]
            # Numeric ids sort numerically; any other name after them, alphabetically.
            names.sort(key=lambda n: (0, int(n[:-4]), n) if n[:-4].isdigit() else (1, 0, n))
            n = self.limit(split, args)
            out[split] = [f"pg19/{folder}/{x}" for x in (names[:n] if n else names)]
        return out


DATASETS = {d.name: d for d in (WikiText2(), PTB(), PG19())}


def download_first(urls, dest):
    errors = []
    for url in urls:
        try:
            return download(url, dest)
        except DataError as e:
            errors.append(str(e))
    raise DataError("; ".join(errors))


def extract_member(data, dest):
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with open(dest + ".part", "wb") as f:
        f.write(data)
    os.replace(dest + ".part", dest)


def read_text(root, rel, sums, args):
    """One file of the corpus as normalised text, after the checksum and UTF-8 checks."""
    path = os.path.join(root, rel)
    if not os.path.isfile(path):
        raise DataError(f"missing file {path}" + (" (--mirror DIR must be laid out as the upstream archive)"
                                                  if args.mirror else ""))
    with open(path, "rb") as f:
        data = f.read()
    if not args.no_verify:
        digest = sha256_bytes(data)
        hint = "use --no-verify for a modified copy"
        check_sha256(path, digest, DATASETS[args.dataset].pinned.get(rel), hint)
        check_sha256(path, digest, sums.get(rel), "listed in the mirror's SHA256SUMS")
    try:
        text = decode_utf8(data, args.utf8_errors, path)
    except ValueError as e:
        raise DataError(f"{e}; --utf8-errors replace substitutes U+FFFD") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n")


def iter_documents(ds, root, files, sums, args):
    for rel in files:
        for doc in ds.documents(read_text(root, rel, sums, args)):
            if doc:
                yield doc


# ---- tokenization on several processes ---------------------------------------------------
# Work items are (starts a document?, piece of text). Workers are forked after the
# tokenizer is built, so each inherits it and keeps its own word cache for the whole run.
_ENCODE = None


def _encode_piece(piece):
    return np.asarray(_ENCODE(piece), dtype=np.uint16)


def work_items(docs):
    for doc in docs:
        for k, piece in enumerate(split_text(doc)):
            yield k == 0, piece


def tokenize_split(items, writer, pool, stats):
    """Feed items to the pool keeping a bounded window in flight (so a huge corpus is never
    held in memory at once), and write results in order. Stops when the writer is full."""
    def emit(start, n_chars, tokens):
        stats["documents"] += start
        stats["characters"] += n_chars
        if start and not writer.add([EOT]):
            return False
        return writer.add(tokens)

    if pool is None:
        for start, piece in items:
            if not emit(start, len(piece), _encode_piece(piece)):
                return
        return
    window = collections.deque()
    for start, piece in items:
        window.append((start, len(piece), pool.apply_async(_encode_piece, (piece,))))
        if len(window) >= 16:
            s, n, r = window.popleft()
            if not emit(s, n, r.get()):
                return
    while window:
        s, n, r = window.popleft()
        if not emit(s, n, r.get()):
            return


def positive_int(s):
    try:
        v = int(s.replace("_", ""))
    except ValueError:
        v = 0
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}")
    return v


def parse_args(argv):
    ap = ArgParser(description="Tokenize WikiText-2, PTB or PG-19 into GPT-2 token shards.",
                                 epilog="See the module docstring (or data/README.md) for how documents are joined.")
    ap.add_argument("dataset", choices=sorted(DATASETS))
    ap.add_argument("--mirror", metavar="DIR", help="read the upstream files from DIR (laid out as upstream) "
                    "instead of downloading; DIR/gpt2/ also supplies the vocabulary")
    ap.add_argument("--out", metavar="DIR", help="output folder (default data/NAME)")
    ap.add_argument("--vocab-cache", metavar="DIR", default=VOCAB_CACHE,
                    help="where the verified GPT-2 vocabulary (encoder.json, vocab.bpe) is copied; "
                         "build/train and build/sample look in data/gpt2/ (the default)")
    ap.add_argument("--shard-size", type=positive_int, default=DEFAULT_SHARD_TOKENS, metavar="N",
                    help=f"tokens per shard at most (default {DEFAULT_SHARD_TOKENS})")
    ap.add_argument("--workers", type=positive_int, default=os.cpu_count() or 1, metavar="N",
                    help="tokenizer processes (default: all cores)")
    ap.add_argument("--utf8-errors", choices=("strict", "replace"), default="strict",
                    help="invalid UTF-8: stop with an error (strict) or substitute U+FFFD (replace)")
    ap.add_argument("--no-verify", action="store_true", help="skip the SHA-256 checks of the corpus files")
    ap.add_argument("--tokenizer", choices=("auto", "ours", "tiktoken"), default="auto",
                    help="auto: tiktoken when importable (same ids, faster), else ours")
    ap.add_argument("--max-books", type=positive_int, metavar="N", help="pg19: keep the first N training books")
    ap.add_argument("--max-eval-books", type=positive_int, metavar="N",
                    help="pg19: keep the first N validation and the first N test books")
    ap.add_argument("--max-train-tokens", type=positive_int, metavar="N",
                    help="pg19: cut the train split at exactly N tokens")
    args = ap.parse_args(argv)
    if args.dataset != "pg19":
        for opt in ("max_books", "max_eval_books", "max_train_tokens"):
            if getattr(args, opt) is not None:
                ap.error(f"--{opt.replace('_', '-')} applies to pg19 only")
    return args


def run(args):
    ds = DATASETS[args.dataset]
    out = args.out or os.path.join(DATA_ROOT, ds.name)

    # 1. download (or take the mirror)
    if args.mirror:
        if not os.path.isdir(args.mirror):
            raise DataError(f"mirror folder {args.mirror} does not exist")
        root = args.mirror
    else:
        root = ds.fetch(args)
    sums = {} if args.no_verify else read_sha256sums(os.path.join(root, "SHA256SUMS"))

    # 2. check every split before spending time on tokenization
    files = ds.split_files(root, args)
    for split in SPLITS:
        if not files[split]:
            raise DataError(f"split {split} is empty: no files for it under {root}")
        for rel in files[split]:   # all missing files are reported before any content check
            if not os.path.isfile(os.path.join(root, rel)):
                raise DataError(f"missing file {os.path.join(root, rel)}" + (
                    " (--mirror DIR must be laid out as the upstream archive)" if args.mirror else ""))
    for split in SPLITS:           # checksums, UTF-8, and at least one non-empty document
        n_docs = sum(sum(1 for d in ds.documents(read_text(root, rel, sums, args)) if d) for rel in files[split])
        if n_docs == 0:
            raise DataError(f"split {split} is empty: {', '.join(files[split][:3])} hold no text")

    # 3. tokenize
    # the vocabulary goes into the cache too, where build/train and build/sample look for it
    tok = GPT2Tokenizer(*install_vocab(args.mirror, args.vocab_cache))
    global _ENCODE
    fast = tiktoken_encoding(tok) if args.tokenizer in ("auto", "tiktoken") else None
    if args.tokenizer == "tiktoken" and fast is None:
        raise DataError("--tokenizer tiktoken: the tiktoken module is not importable")
    _ENCODE = fast.encode_ordinary if fast is not None else tok.encode_ordinary
    workers = 1 if fast is not None else args.workers   # tiktoken runs native code already
    print(f"{ds.name}: tokenizer {'tiktoken' if fast else 'ours'}, {workers} worker(s), "
          f"source {os.path.abspath(root)}, output {out}", flush=True)
    pool = mp.get_context("fork").Pool(workers) if workers > 1 else None
    try:
        for split in SPLITS:
            t0 = time.time()
            stats = collections.Counter()
            limit = args.max_train_tokens if split == "train" else None
            writer = ShardWriter(out, ds.name, split, args.shard_size, max_tokens=limit)
            tokenize_split(work_items(iter_documents(ds, root, files[split], sums, args)), writer, pool, stats)
            paths = writer.close()
            print(f"{ds.name} {split}: documents {stats['documents']:,}, characters {stats['characters']:,}, "
                  f"tokens {writer.total:,}, shards {len(paths)}, seconds {time.time() - t0:.1f}", flush=True)
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()


def main(argv=None):
    args = parse_args(argv)
    try:
        run(args)
    except (DataError, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
