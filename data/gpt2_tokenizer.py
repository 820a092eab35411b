#!/usr/bin/env python3
"""GPT-2's byte-level BPE tokenizer, written from the published algorithm.

Vocabulary: OpenAI's encoder.json (token string -> id, 50257 entries) and vocab.bpe
(50000 merges, the line number is the merge's rank). Encoding a text:
  1. pre-tokenize with GPT-2's pattern (below; the `regex` module gives \\p{L} and \\p{N});
  2. map each piece's UTF-8 bytes to printable characters (bytes_to_unicode), so every
     byte has a one-character symbol and no symbol is whitespace or a control character;
  3. BPE: repeatedly merge the adjacent pair with the lowest rank, every non-overlapping
     occurrence left to right, until no adjacent pair is in the merge table;
  4. look the resulting symbols up in encoder.json.
Results are cached per piece (the word cache), which is what makes plain Python fast
enough: natural text repeats a few hundred thousand distinct pieces over and over.

Special tokens: `<|endoftext|>` is id 50256. `encode(text)` treats every character as
ordinary text (so the string "<|endoftext|>" inside a document is encoded as 7 ordinary
tokens, as OpenAI's reference encoder does); `encode(text, allowed_special=True)` maps the
literal string to 50256. The dataset scripts insert 50256 by id, never by string.

Invalid UTF-8 policy: `encode` takes a Python str. A str that cannot be UTF-8 (lone
surrogates, e.g. from bytes decoded with 'surrogateescape') raises ValueError.
`encode_bytes(data, errors="strict")` decodes bytes as UTF-8 first: errors="strict" (the
default) raises ValueError naming the byte offset, errors="replace" substitutes U+FFFD for
each invalid sequence (Python's rule). `decode(ids)` joins the tokens' bytes and decodes
them with errors="replace" (as the reference does), because a token sequence may stop in
the middle of a multi-byte character; `decode_bytes(ids)` returns the raw bytes.

Vocabulary files: `--mirror DIR` (DIR/gpt2/encoder.json, DIR/gpt2/vocab.bpe) when present,
else the cache data/gpt2/, else a download from OpenAI's public bucket into that cache.
Every source is checked against the SHA-256 sums below. `install_vocab` copies verified
files from a mirror into the cache, which is where build/train and build/sample look.

Command line (a small helper):
  gpt2_tokenizer.py [--mirror DIR] encode [TEXT]    prints the ids (TEXT absent: standard input)
  gpt2_tokenizer.py [--mirror DIR] decode IDS ...   prints the text; ids as build/sample takes
                                                    them: "464 3290", 464,3290 or 464 3290
"""
import json
import os
import sys

from fetch import DATA_ROOT, ArgParser, DataError, check_sha256, download, require, sha256_file

regex = require("regex")

EOT = 50256
EOT_STRING = "<|endoftext|>"
VOCAB_SIZE = 50257

# GPT-2's pre-tokenization pattern, verbatim from OpenAI's release.
PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

VOCAB_URL = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/"
VOCAB_FILES = {
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
}
VOCAB_CACHE = os.path.join(DATA_ROOT, "gpt2")

# The word cache is cleared when it grows past this many pieces, so a very long run
# (all of PG-19) cannot grow it without bound; the hit rate barely changes.
CACHE_LIMIT = 2_000_000


def bytes_to_unicode():
    """Byte value -> one printable character. Bytes that are already visible, non-space
    Latin-1 characters ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68
    (controls, space, DEL, NBSP, soft hyphen...) take chr(256), chr(257)... in byte order.
    So ' ' (0x20) becomes 'Ġ' (chr(288)) and '\\n' (0x0A) becomes 'Ċ' (chr(266))."""
    keep = set(range(ord("!"), ord("~") + 1)) | set(range(ord("¡"), ord("¬") + 1)) \
        | set(range(ord("®"), ord("ÿ") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def vocab_paths(mirror=None, cache_dir=VOCAB_CACHE, allow_download=True):
    """Locate encoder.json and vocab.bpe (mirror, then cache, then download) and verify
    their SHA-256. Returns (encoder_path, bpe_path); raises DataError."""
    sources = []
    if mirror:
        sources.append((os.path.join(mirror, "gpt2"), "mirror"))
    sources.append((cache_dir, "cache"))
    for folder, what in sources:
        paths = [os.path.join(folder, n) for n in VOCAB_FILES]
        if all(os.path.isfile(p) for p in paths):
            for p, (name, want) in zip(paths, VOCAB_FILES.items()):
                check_sha256(p, sha256_file(p), want,
                             "delete it to download again" if what == "cache" else "")
            return tuple(paths)
    if not allow_download:
        raise DataError("GPT-2 vocabulary not found: give --mirror DIR with DIR/gpt2/encoder.json "
                        f"and DIR/gpt2/vocab.bpe, or put them in {cache_dir}")
    for name, want in VOCAB_FILES.items():
        download(VOCAB_URL + name, os.path.join(cache_dir, name), sha256=want)
    return tuple(os.path.join(cache_dir, n) for n in VOCAB_FILES)


def install_vocab(mirror=None, cache_dir=VOCAB_CACHE):
    """Make sure cache_dir holds the verified vocabulary (copied from the mirror, or
    downloaded), so the C++ binaries find it at their default data/gpt2/encoder.json.
    Each file is written under a temporary name and renamed. Returns the cache paths."""
    src = vocab_paths(mirror, cache_dir)
    dst = tuple(os.path.join(cache_dir, n) for n in VOCAB_FILES)
    os.makedirs(cache_dir, exist_ok=True)
    for a, b in zip(src, dst):
        if os.path.abspath(a) != os.path.abspath(b):
            with open(a, "rb") as f:
                data = f.read()
            with open(b + ".tmp", "wb") as f:
                f.write(data)
            os.replace(b + ".tmp", b)
    return dst


def parse_ids(args):
    """Token ids from command-line words in the forms build/sample accepts: separated by
    spaces and/or commas, possibly all in one quoted word ("464, 3290"). Raises ValueError."""
    words = [w for a in args for w in a.replace(",", " ").split()]
    if not words:
        raise ValueError("no token ids given")
    for w in words:
        if not w.isdigit() or not w.isascii():
            raise ValueError(f"not a token id: {w!r} (expected ids like 464 3290 or 464,3290)")
    return [int(w) for w in words]


class GPT2Tokenizer:
    def __init__(self, encoder_path, bpe_path):
        with open(encoder_path, encoding="utf-8") as f:
            self.encoder = json.load(f)                  # token string -> id
        self.decoder = {i: s for s, i in self.encoder.items()}
        with open(bpe_path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        # First line is a version comment; the rest are "left right", one merge a line.
        merges = [tuple(l.split(" ")) for l in lines[1:] if l]
        self.ranks = {pair: r for r, pair in enumerate(merges)}
        self.byte_encoder = bytes_to_unicode()
        self.byte_decoder = {c: b for b, c in self.byte_encoder.items()}
        # Per-token raw bytes, for decoding without going through strings.
        self.token_bytes = [b""] * len(self.decoder)
        for i, s in self.decoder.items():
            self.token_bytes[i] = bytes(self.byte_decoder[c] for c in s)
        self.pattern = regex.compile(PATTERN)
        self.special = {EOT_STRING: EOT}
        self.special_pattern = regex.compile("(" + "|".join(regex.escape(s) for s in self.special) + ")")
        self.cache = {}
        self.n_vocab = len(self.encoder)

    @classmethod
    def load(cls, mirror=None, cache_dir=VOCAB_CACHE, allow_download=True):
        return cls(*vocab_paths(mirror, cache_dir, allow_download))

    def _bpe(self, symbols):
        """symbols: str of byte-characters; returns the list of merged token strings."""
        parts = list(symbols)
        ranks = self.ranks
        while len(parts) > 1:
            best, best_rank = None, None
            for pair in zip(parts, parts[1:]):
                r = ranks.get(pair)
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = pair, r
            if best is None:
                break
            a, b = best
            merged, i, n = [], 0, len(parts)
            while i < n:
                if i + 1 < n and parts[i] == a and parts[i + 1] == b:
                    merged.append(a + b)
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        return parts

    def _encode_piece(self, piece):
        try:
            raw = piece.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"text is not valid Unicode (lone surrogate {piece[e.start]!r}); "
                             "it has no UTF-8 encoding") from None
        symbols = "".join(self.byte_encoder[b] for b in raw)
        return [self.encoder[s] for s in self._bpe(symbols)]

    def encode_ordinary(self, text):
        """Ids for text with no special-token handling (what the datasets use)."""
        out = []
        cache = self.cache
        for piece in self.pattern.findall(text):
            ids = cache.get(piece)
            if ids is None:
                ids = self._encode_piece(piece)
                if len(cache) >= CACHE_LIMIT:
                    cache.clear()
                cache[piece] = ids
            out.extend(ids)
        return out

    def encode(self, text, allowed_special=False):
        """allowed_special=True maps the literal '<|endoftext|>' to 50256; otherwise it is
        ordinary text."""
        if not allowed_special:
            return self.encode_ordinary(text)
        out = []
        for i, seg in enumerate(self.special_pattern.split(text)):
            if i % 2:          # odd entries of split() are the captured special strings
                out.append(self.special[seg])
            elif seg:
                out.extend(self.encode_ordinary(seg))
        return out

    def encode_bytes(self, data, errors="strict"):
        return self.encode_ordinary(decode_utf8(data, errors))

    def decode_bytes(self, ids):
        tb = self.token_bytes
        try:
            return b"".join(tb[i] for i in ids)
        except (IndexError, TypeError):
            bad = next(i for i in ids if not (isinstance(i, int) and 0 <= i < len(tb)))
            raise ValueError(f"token id {bad!r} is outside the vocabulary (0..{len(tb) - 1})") from None

    def decode(self, ids):
        return self.decode_bytes([int(i) for i in ids]).decode("utf-8", errors="replace")


def decode_utf8(data, errors="strict", label="input"):
    """UTF-8 bytes -> str under the project's policy: 'strict' raises ValueError with the
    byte offset, 'replace' substitutes U+FFFD for every invalid sequence."""
    if errors not in ("strict", "replace"):
        raise ValueError(f"unknown UTF-8 error policy {errors!r} (strict or replace)")
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as e:
        raise ValueError(f"{label}: invalid UTF-8 at byte {e.start} "
                         f"({data[e.start:e.start + 4]!r})") from None


# A text may be cut at a "\n" that follows a non-whitespace character without changing
# its tokens: no pre-token can hold both a non-space character and the whitespace after it
# (the pattern only allows one leading space), so a pre-token always ends there, and the
# matching after it starts afresh at the "\n" exactly as it would in the whole text.
# This lets the dataset scripts tokenize long books in pieces on several cores.
_SAFE_CUT = regex.compile(r"(?<=\S)\n")


def split_text(text, target_chars=1 << 19):
    """Cut text into pieces of about target_chars at token-neutral points, so that
    concat(encode(p) for p in pieces) == encode(text)."""
    pieces, start = [], 0
    while len(text) - start > target_chars:
        m = _SAFE_CUT.search(text, start + target_chars)
        if m is None:
            break
        pieces.append(text[start:m.start()])
        start = m.start()
    pieces.append(text[start:])
    return pieces


def tiktoken_encoding(tok):
    """The same tokenizer as a tiktoken Encoding built from our verified vocabulary files
    (so no network is needed), or None when tiktoken is not importable. Ranks equal ids in
    GPT-2 (bytes first, then each merge's result in merge order), which is what tiktoken's
    rank-ordered merging needs."""
    try:
        import tiktoken
    except ImportError:
        return None
    ranks = {tok.token_bytes[i]: i for i in range(tok.n_vocab) if i != EOT}
    return tiktoken.Encoding(name="gpt2-local", pat_str=PATTERN, mergeable_ranks=ranks,
                             special_tokens={EOT_STRING: EOT})


def main(argv=None):
    ap = ArgParser(description="GPT-2 BPE encode/decode")
    ap.add_argument("--mirror", help="folder with gpt2/encoder.json and gpt2/vocab.bpe")
    ap.add_argument("--special", action="store_true", help="map literal <|endoftext|> to 50256")
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("encode", help="text -> ids")
    e.add_argument("text", nargs="?", help="the text (absent: read standard input as UTF-8)")
    d = sub.add_parser("decode", help="ids -> text")
    d.add_argument("ids", nargs="+", help='ids as build/sample takes them: 464 3290, 464,3290 or "464 3290"')
    args = ap.parse_args(argv)
    try:
        ids = parse_ids(args.ids) if args.cmd == "decode" else None  # bad ids fail before loading
        tok = GPT2Tokenizer.load(args.mirror)
        if args.cmd == "encode":
            text = args.text if args.text is not None else \
                decode_utf8(sys.stdin.buffer.read(), label="standard input")
            print(" ".join(map(str, tok.encode(text, allowed_special=args.special))))
        else:
            sys.stdout.write(tok.decode(ids) + "\n")
    except (DataError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
