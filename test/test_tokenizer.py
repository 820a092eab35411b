#!/usr/bin/env python3
"""Tests of data/gpt2_tokenizer.py (GPT-2 byte-level BPE), and of the C++ encoder of
build/sample --prompt (src/gpt2_encoder.cpp) against it, through $BUILD/test/test_gpt2_encoder.

Checks that need the vocabulary find it in $GPT2_MIRROR, else ../shared/data (relative to
the repo root), else the cache data/gpt2/, else try the download; when none works they
report SKIPPED. The byte mapping, UTF-8 policy, cut points and checksum checks need nothing.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "data"))
sys.path.insert(0, os.path.join(ROOT, "test"))

from testlib import check, finish, skip  # noqa: E402
from fetch import DataError  # noqa: E402
import gpt2_tokenizer as gt  # noqa: E402
from vocab import load_tokenizer  # noqa: E402


def random_text(rng, n):
    """Text mixing the cases that stress pre-tokenization and byte-level BPE."""
    alphabet = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
                + list(" .,;:!?'\"-()[]{}<>@#$%^&*_+=/\\|~`") + [" "] * 12 + ["\n"] * 4
                + ["\t", "\r", "\u00a0", "\u3000", "\u2028", "\x00", "\x7f", "\u00ad"]
                + list("éèàüöñçßøÅÆ") + ["e\u0301"] + list("日本語中文한국어") + list("αβγдж")
                + list("עבריתالعربيةहिन्दी") + ["👍", "🤖", "👨\u200d👩\u200d👧", "🇫🇷", "\U0001F600"]
                + ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "  ", "\n\n", " \n "]
                + ["<|endoftext|>", "½", "²", "٣", "Ⅻ"])
    return "".join(rng.choice(alphabet) for _ in range(n))


def naive_bpe_ids(tok, text):
    """An independent, slow BPE: merge the leftmost occurrence of the lowest-ranked pair, one
    merge at a time. For GPT-2 this gives the same result as merging every occurrence of
    that pair at once, because a pair built from a fresh merge always ranks later."""
    ids = []
    for piece in gt.regex.findall(gt.PATTERN, text):
        parts = [tok.byte_encoder[b] for b in piece.encode("utf-8")]
        while True:
            ranked = [(tok.ranks[p], i) for i, p in enumerate(zip(parts, parts[1:])) if p in tok.ranks]
            if not ranked:
                break
            _, i = min(ranked)
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        ids += [tok.encoder[p] for p in parts]
    return ids


# ---- checks that need no vocabulary -------------------------------------------------------
table = gt.bytes_to_unicode()
check("byte_map_is_bijective", len(set(table.values())) == 256 and sorted(table) == list(range(256)))
check("byte_map_printable", all(c.isprintable() and not c.isspace() for c in table.values()))
check("byte_map_known", table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("a")] == "a"
      and table[0] == "Ā" and table[0xFF] == "ÿ", f"{table[32]!r} {table[10]!r} {table[0]!r}")

try:
    gt.decode_utf8(b"ok \xff\xfe bad", "strict", "x.txt")
    check("utf8_strict_raises", False, "no error")
except ValueError as e:
    check("utf8_strict_raises", "x.txt: invalid UTF-8 at byte 3" in str(e), str(e))
check("utf8_replace", gt.decode_utf8(b"ok \xff!", "replace") == "ok \ufffd!")

rng = random.Random(1234)
ok, why = True, ""
for k in range(40):
    text = random_text(rng, rng.randint(0, 3000))
    pieces = gt.split_text(text, target_chars=rng.randint(1, 200))
    if "".join(pieces) != text:
        ok, why = False, "pieces do not join to the text"
        break
    whole = gt.regex.findall(gt.PATTERN, text)
    parts = [p for piece in pieces for p in gt.regex.findall(gt.PATTERN, piece)]
    if whole != parts:
        ok, why = False, f"pre-tokens differ for pieces {pieces[:3]!r}"
        break
check("split_text_keeps_pretokens", ok, why)

with tempfile.TemporaryDirectory() as tmp:
    os.makedirs(os.path.join(tmp, "gpt2"))
    for n in gt.VOCAB_FILES:
        with open(os.path.join(tmp, "gpt2", n), "w") as f:
            f.write("{}\n")
    try:
        gt.vocab_paths(mirror=tmp, cache_dir=os.path.join(tmp, "nocache"), allow_download=False)
        check("vocab_checksum_mismatch", False, "accepted a corrupt vocabulary")
    except DataError as e:
        check("vocab_checksum_mismatch", "checksum mismatch" in str(e), str(e))
    try:
        gt.vocab_paths(mirror=os.path.join(tmp, "none"), cache_dir=os.path.join(tmp, "nocache"), allow_download=False)
        check("vocab_missing", False, "no error")
    except DataError as e:
        check("vocab_missing", "vocabulary not found" in str(e), str(e))
    cache = os.path.join(tmp, "cache")
    try:
        gt.install_vocab(mirror=tmp, cache_dir=cache)
        check("install_vocab_rejects_corrupt_mirror", False, "installed a corrupt vocabulary")
    except DataError as e:
        check("install_vocab_rejects_corrupt_mirror", "checksum mismatch" in str(e) and not os.path.exists(cache), str(e))

# The cache is where the C++ binaries look by default (build/train --encoder_json,
# build/sample --encoder_json: Config's and SampleOptions' defaults in config.h), both relative to
# the repository root.
config_h = open(os.path.join(ROOT, "src", "config.h"), encoding="utf-8").read()
check("vocab_cache_is_where_binaries_look",
      os.path.abspath(gt.VOCAB_CACHE) == os.path.join(ROOT, "data", "gpt2")
      and config_h.count('encoder_json = "data/gpt2/encoder.json"') == 2, gt.VOCAB_CACHE)

# decode takes ids in every form build/sample takes: spaces, commas, one quoted word
forms = [["464", "3290"], ["464,3290"], ["464 3290"], ["464,", "3290"], [" 464 , 3290 "]]
got = [gt.parse_ids(f) for f in forms]
check("parse_ids_forms", all(g == [464, 3290] for g in got), f"{got}")
for name, bad in (("parse_ids_rejects_word", ["464", "abc"]), ("parse_ids_rejects_empty", [","]),
                  ("parse_ids_rejects_negative", ["-1"])):
    try:
        gt.parse_ids(bad)
        check(name, False, "accepted")
    except ValueError as e:
        check(name, "token id" in str(e), str(e))
script = os.path.join(ROOT, "data", "gpt2_tokenizer.py")
r = subprocess.run([sys.executable, script, "decode", "12,x"], capture_output=True, text=True)
check("cli_decode_bad_ids", r.returncode == 1 and "error: not a token id: 'x'" in r.stderr, r.stderr)

# ---- the C++ encoder (src/gpt2_encoder.cpp, build/sample --prompt) ----------------------
CPP_ENCODER = os.path.join(ROOT, os.environ.get("BUILD", "build"), "test", "test_gpt2_encoder")


def cpp_encoder(args, texts=()):
    """Runs CPP_ENCODER with args, each text a JSON line on its standard input; returns (its
    output lines, "") or (None, why it cannot run, or "" when it failed)."""
    if not os.access(CPP_ENCODER, os.X_OK):
        return None, f"{CPP_ENCODER} is not built (make)"
    p = subprocess.run([CPP_ENCODER] + args, input="".join(json.dumps(t) + "\n" for t in texts),
                       capture_output=True, text=True)
    if p.returncode == 0:
        return p.stdout.split("\n")[:-1], ""  # not splitlines(): U+2028 and others end its lines
    if "no Unicode library" in p.stderr:
        return None, "this build has no Unicode library (ICU)"
    return None, ""


# Every code point in a context where each of the pattern's classes (\p{L}, \p{N}, \s, the rest)
# gives other pre-tokens: the C++ pre-tokenizer on ICU's classes must split each as the regex
# module does. Where only one of the two has a character (another Unicode version: Debian 12's
# python3-regex and ICU 72 are both 15.0 and agree everywhere) they may differ. For time, the code
# points above the BMP that neither has a character for are left out (a third of the rest): both
# take them as the rest, as the BMP's, which are kept, check.
context = "a{0}1 {0}".format
unassigned_out, why = cpp_encoder(["--unassigned"])
if unassigned_out is None and why:
    skip("cpp_pretokenize_every_code_point", why)
elif unassigned_out is None:
    check("cpp_pretokenize_every_code_point", False, f"{CPP_ENCODER} --unassigned failed")
else:
    icu_unassigned = set()
    for line in unassigned_out:
        first, last = map(int, line.split())
        icu_unassigned.update(range(first, last + 1))
    regex_unassigned = gt.regex.compile(r"\p{Cn}")
    one_unassigned = [c for c in range(0x110000) if (c in icu_unassigned) != bool(regex_unassigned.match(chr(c)))]
    code_points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF
                   and (c <= 0xFFFF or c not in icu_unassigned or not regex_unassigned.match(chr(c)))]
    # 512 code points a text (one a text is 10 times slower); a text that differs is split up
    chunks = ["".join(context(chr(c)) for c in code_points[i:i + 512]) for i in range(0, len(code_points), 512)]
    out = cpp_encoder(["--pieces"], chunks)[0] or []
    suspects = [c for k, (text, pieces) in enumerate(zip(chunks, out))
                if gt.regex.findall(gt.PATTERN, text) != json.loads(pieces) for c in code_points[512 * k:512 * (k + 1)]]
    one = cpp_encoder(["--pieces"], [context(chr(c)) for c in suspects])[0] or []
    differ = {c for c, pieces in zip(suspects, one) if gt.regex.findall(gt.PATTERN, context(chr(c))) != json.loads(pieces)}
    real = sorted(differ - set(one_unassigned))
    if differ:
        print(f"note: {len(differ) - len(real)} code points that only one of ICU and the regex module has "
              "(another Unicode version) split differently")
    check("cpp_pretokenize_every_code_point", len(out) == len(chunks) and len(one) == len(suspects) and not real,
          f"{CPP_ENCODER} --pieces failed" if len(out) != len(chunks) or len(one) != len(suspects) else
          f"{len(real)} code points split otherwise than by the regex module, e.g. "
          + ", ".join(f"U+{c:04X} in {context(chr(c))!r}" for c in real[:3]))

# ---- checks that need the vocabulary ------------------------------------------------------
tok, mirror, why = load_tokenizer()

VOCAB_TESTS = ["vocab_sizes", "known_ids", "derived_ids", "special_tokens", "roundtrip_random",
               "pieces_encode_like_whole", "matches_naive_bpe", "lone_surrogate_error", "encode_bytes_policy",
               "decode_partial_utf8", "decode_bad_id", "cli_encode_decode", "cli_decode_forms", "cli_encode_stdin",
               "install_vocab_from_mirror", "tiktoken_agrees", "cpp_encoder_agrees"]
if tok is None:
    for name in VOCAB_TESTS:
        skip(name, f"GPT-2 vocabulary unavailable (no mirror, no cache, download failed: {why})")
    finish()

check("vocab_sizes", tok.n_vocab == 50257 and len(tok.ranks) == 50000 and tok.decoder[50256] == "<|endoftext|>",
      f"{tok.n_vocab} tokens, {len(tok.ranks)} merges")

# Well-known GPT-2 ids, published in many places (OpenAI's GPT-2 examples, tiktoken's own
# test-suite for the "gpt2" encoding, llm.c's tokenizer dumps):
KNOWN = [
    ("Hello world", [15496, 995]),
    ("hello world", [31373, 995]),
    (" the", [262]),
    ("the", [1169]),
    ("\n", [198]),
    ("\n\n", [628]),
    (" ", [220]),
    ("!", [0]),        # printable ASCII '!'..'~' are ids 0..93 in byte order
    ("a", [64]),
    # the literal string is ordinary text unless special tokens are allowed
    ("<|endoftext|>", [27, 91, 437, 1659, 5239, 91, 29]),
    # runs of zeros: tiktoken's test_simple_repeated for gpt2
    ("0", [15]), ("00", [405]), ("000", [830]), ("0000", [2388]), ("00000", [20483]),
    ("000000", [10535]), ("0000000", [24598]), ("00000000", [8269]), ("000000000", [10535, 830]),
    ("0000000000", [8269, 405]), ("00000000000", [8269, 830]), ("000000000000", [8269, 2388]),
    ("0000000000000", [8269, 20483]), ("00000000000000", [8269, 10535]),
    ("000000000000000", [8269, 24598]), ("0000000000000000", [25645]),
    ("00000000000000000", [8269, 10535, 830]),
]
bad = [(t, tok.encode(t), ids) for t, ids in KNOWN if tok.encode(t) != ids]
check("known_ids", not bad, f"{bad[:3]}")

# Ids derived by hand from encoder.json and vocab.bpe (merge ranks in brackets; BPE merges
# the lowest-ranked adjacent pair first, then looks the symbols up in encoder.json):
DERIVED = [
    # Pre-tokens 'I' "'m" ' here' ',' ' don' "'t" ' worry': the contraction alternatives come
    # first in the pattern; each pre-token is itself a vocabulary entry (I=40, 'm=1101,
    # Ġhere=994, ,=11, Ġdon=836, 't=470, Ġworry=5490).
    ("I'm here, don't worry", [40, 1101, 994, 11, 836, 470, 5490]),
    ("they'll've", [9930, 1183, 1053]),          # 'they' "'ll" "'ve"
    ("it's", [270, 338]),
    # Contractions are lower-case only in GPT-2's pattern: "'M" splits into "'" (6) and 'M' (44).
    ("I'M", [40, 6, 44]),
    # Digits: '2024' is one pre-token; merges (2,0)[982] then (2,4)[1475]; no (20,24) merge.
    ("2024", [1238, 1731]),
    # ' 3' '.' '14159': (1,5)[1058] (1,4)[1159] (15,9)[19451] -> 14 159.
    (" 3.14159", [513, 13, 1415, 19707]),
    # Whitespace runs: \s+(?!\S) leaves the last space to join the next word, and GPT-2 has
    # no (Ġ,Ġ) merge, so every extra space is its own 220.
    ("a  b", [64, 220, 275]),
    ("a   b", [64, 220, 220, 275]),
    ("hello  \n world", [31373, 220, 220, 198, 995]),
    # '\n\n\n' is one pre-token; (Ċ,Ċ)[372] merges the first pair only; no (ĊĊ,Ċ) merge.
    ("\n\n\n", [628, 198]),
    ("x\t\ty", [87, 197, 197, 88]),               # tab is byte 9 -> 'ĉ' = 197
    # Accents: é = C3 A9 -> 'Ã©'. (a,f)[1622] < (Ã,©)[2378] < (c,a)[6632]: c|af|Ã©.
    ("café", [66, 1878, 2634]),
    # CJK: 日 = E6 97 A5, 本 = E6 9C AC, 語 = E8 AA 9E, each split into a 2-byte and a 1-byte token.
    ("日本語", [33768, 98, 17312, 105, 45739, 252]),
    # Emoji 👍 = F0 9F 91 8D -> 'ðŁĳį': (ð,Ł)[8326] then (ðŁ,ĳ)[41584]; 'į' = 235 stays.
    ("👍", [41840, 235]),
]
bad = [(t, tok.encode(t), ids) for t, ids in DERIVED if tok.encode(t) != ids]
check("derived_ids", not bad, f"{bad[:3]}")

check("special_tokens",
      tok.encode("<|endoftext|>", allowed_special=True) == [50256]
      # tiktoken's README/test example: the space before the special token is its own 220
      and tok.encode("hello <|endoftext|>", allowed_special=True) == [31373, 220, 50256]
      and tok.encode("a<|endoftext|><|endoftext|>b", allowed_special=True) == [64, 50256, 50256, 65]
      and tok.decode([50256]) == "<|endoftext|>")

rng = random.Random(99)
texts = [random_text(rng, rng.randint(0, 400)) for _ in range(300)]
bad = [t for t in texts if tok.decode(tok.encode(t)) != t]
check("roundtrip_random", not bad, f"{len(bad)} texts differ, e.g. {bad[:1]!r}")

ok, why = True, ""
for t in texts[:100]:
    whole = tok.encode(t)
    parts = [i for p in gt.split_text(t, target_chars=rng.randint(1, 50)) for i in tok.encode(p)]
    if whole != parts:
        ok, why = False, repr(t[:60])
        break
check("pieces_encode_like_whole", ok, why)

bad = [t for t in texts[:150] if naive_bpe_ids(tok, t) != tok.encode(t)]
check("matches_naive_bpe", not bad, f"{len(bad)} differ, e.g. {bad[:1]!r}")

try:
    tok.encode("abc \udcff def")
    check("lone_surrogate_error", False, "no error")
except ValueError as e:
    check("lone_surrogate_error", "surrogate" in str(e), str(e))

try:
    tok.encode_bytes(b"caf\xe9")          # Latin-1 é is not UTF-8
    check("encode_bytes_policy", False, "strict accepted invalid UTF-8")
except ValueError as e:
    check("encode_bytes_policy", "invalid UTF-8 at byte 3" in str(e)
          and tok.encode_bytes(b"caf\xe9", errors="replace") == tok.encode("caf\ufffd"), str(e))

emoji = tok.encode("👍")                    # [41840, 235]: the first token is 3 of the 4 bytes
check("decode_partial_utf8", tok.decode(emoji[:1]) == "\ufffd" and tok.decode_bytes(emoji[:1]) == b"\xf0\x9f\x91",
      repr(tok.decode(emoji[:1])))

try:
    tok.decode([15496, 50257])
    check("decode_bad_id", False, "no error")
except ValueError as e:
    check("decode_bad_id", "outside the vocabulary" in str(e), str(e))

mirror_args = ["--mirror", mirror] if mirror else []
r1 = subprocess.run([sys.executable, script] + mirror_args + ["encode", "Hello world"], capture_output=True, text=True)
r2 = subprocess.run([sys.executable, script] + mirror_args + ["decode", "15496", "995"], capture_output=True, text=True)
check("cli_encode_decode", r1.stdout.strip() == "15496 995" and r2.stdout == "Hello world\n", f"{r1.stdout!r} {r2.stdout!r} {r1.stderr}")
outs = [subprocess.run([sys.executable, script] + mirror_args + ["decode"] + f, capture_output=True, text=True).stdout
        for f in (["15496,995"], ["15496 995"], ["15496,", "995"])]
check("cli_decode_forms", outs == ["Hello world\n"] * 3, f"{outs}")
r = subprocess.run([sys.executable, script] + mirror_args + ["encode"], input="Hello world",
                   capture_output=True, text=True)
check("cli_encode_stdin", r.returncode == 0 and r.stdout.strip() == "15496 995", r.stdout + r.stderr)

if not mirror:
    skip("install_vocab_from_mirror", "the vocabulary came from the cache, not a mirror")
else:
    with tempfile.TemporaryDirectory() as tmp:
        cache = os.path.join(tmp, "data", "gpt2")
        paths = gt.install_vocab(mirror, cache)
        check("install_vocab_from_mirror", sorted(os.listdir(cache)) == sorted(gt.VOCAB_FILES) and all(
            os.path.dirname(p) == cache and gt.sha256_file(p) == gt.VOCAB_FILES[os.path.basename(p)] for p in paths),
            f"{paths} (mirror {mirror})")

# The C++ encoder on the same corpora: the known and derived ids, the random texts, and more of
# what stresses pre-tokenization (non-ASCII, digits, contractions, whitespace runs, emoji).
MORE = ["The history of", " leading and trailing  ", "tabs\t\tand\r\nCRLF\r\n", "   \n\n  x  \n",
        "Ünïcödé ÀÉÎÕÜ straße İstanbul ǅ", "Здравствуй, мир!", "こんにちは世界。日本語の文章", "안녕하세요",
        "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "x²+y³=z⁴ ½ ¼ Ⅻ ٣٤٥ １２３", "1,234,567.89 0x1F 1e-9",
        "I'm you're we've he'd she'll it's THEY'RE 'tis", "'''s ''t", "👍🏽 👨\u200d👩\u200d👧 🇫🇷🇩🇪 😀😀 🤖!",
        "\u00a0\u2028\u2029\u3000\u1680\u200b\u202f\x1c\x1d\x85 a", "e\u0301 n\u0303 \u0915\u094d", "<|endoftext|> x"]
corpus = [t for t, _ in KNOWN + DERIVED] + MORE + texts + [random_text(random.Random(5), 20000)]
out, why = cpp_encoder(["--encode", os.path.join(mirror, "gpt2", "encoder.json") if mirror
                        else os.path.join(gt.VOCAB_CACHE, "encoder.json")], corpus)
if out is None and why:
    skip("cpp_encoder_agrees", why)
else:
    bad = [t for t, ids in zip(corpus, out or []) if json.loads(ids) != tok.encode(t)]
    check("cpp_encoder_agrees", out is not None and len(out) == len(corpus) and not bad,
          f"{CPP_ENCODER} failed" if out is None else f"{len(bad)} of {len(corpus)} texts differ, e.g. {bad[:1]!r}")

fast = gt.tiktoken_encoding(tok)
if fast is None:
    skip("tiktoken_agrees", "tiktoken is not importable")
else:
    bad = [t for t in texts if fast.encode_ordinary(t) != tok.encode(t)]
    check("tiktoken_agrees", not bad, f"{len(bad)} texts differ")

finish()
