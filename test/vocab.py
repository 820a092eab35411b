"""The GPT-2 vocabulary for the tests that need it: from $GPT2_MIRROR, else
../shared/data beside the repository, else the cache data/gpt2/, else a download."""
import os

import gpt2_tokenizer as gt
from fetch import DataError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_mirror():
    for d in (os.environ.get("GPT2_MIRROR"), os.path.join(ROOT, "..", "shared", "data")):
        if d and all(os.path.isfile(os.path.join(d, "gpt2", n)) for n in gt.VOCAB_FILES):
            return os.path.abspath(d)
    return None


def load_tokenizer():
    """(tokenizer, mirror, "") or (None, mirror, why it could not be had)."""
    mirror = find_mirror()
    try:
        return gt.GPT2Tokenizer.load(mirror), mirror, ""
    except DataError as e:
        return None, mirror, str(e)
