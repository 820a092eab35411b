#!/usr/bin/env python3
"""Print a token shard's header, token count, min/max id and its first tokens decoded.

    inspect_shard.py FILE [--count N] [--mirror DIR]

The decoded text needs the GPT-2 vocabulary (--mirror DIR, else data/gpt2/, else a
download); without it the ids are printed alone, with a note.
"""
import sys

from fetch import ArgParser, DataError, require
from gpt2_tokenizer import EOT, GPT2Tokenizer
from shards import HEADER_INTS, read_header, read_shard

np = require("numpy")


def main(argv=None):
    ap = ArgParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--count", type=int, default=64, help="how many leading tokens to show (default 64)")
    ap.add_argument("--mirror", metavar="DIR", help="folder with gpt2/encoder.json and gpt2/vocab.bpe")
    args = ap.parse_args(argv)
    try:
        magic, version, n = read_header(args.file)
        tokens = read_shard(args.file)
        header = np.fromfile(args.file, dtype="<i4", count=HEADER_INTS)
        print(f"file      {args.file}")
        print(f"header    magic {magic}, version {version}, tokens {n:,}, "
              f"other header ints {'all zero' if not header[3:].any() else 'NOT all zero'}")
        if n == 0:
            print("tokens    (none)")
            return 0
        print(f"ids       min {int(tokens.min())}, max {int(tokens.max())}, "
              f"<|endoftext|> count {int(np.count_nonzero(tokens == EOT)):,}")
        head = [int(t) for t in tokens[: args.count]]
        print(f"first {len(head)} ids: {' '.join(map(str, head))}")
        try:
            tok = GPT2Tokenizer.load(args.mirror)
        except DataError as e:
            print(f"(no decoded text: {e})")
            return 0
        if max(head) >= tok.n_vocab:
            print("(no decoded text: ids outside the GPT-2 vocabulary)")
            return 0
        print("decoded:")
        print(repr(tok.decode(head)))
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
