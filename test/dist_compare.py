"""Compares two training runs of test_dist.sh: the train losses of their logs, and optionally
the tensors of two safetensors files (a checkpoint's weights or AdamW moments).
  dist_compare.py losses RUN_A RUN_B TOL        max relative loss difference <= TOL (0 = bitwise)
  dist_compare.py tensors FILE_A FILE_B TOL STEP every tensor: |a-b| <= TOL * |a| (norms), except the
        key bias (the middle third of attn.qkv.bias, L x 3C): its gradient is zero in exact arithmetic
        (softmax ignores a constant added to every score), so its values are rounding noise that
        AdamW scales up to the step size: there max |a-b| <= STEP (lr x steps)
Prints one line with the largest difference; exits 1 when a check fails."""
import json
import struct
import sys


def losses(run):
    out = []
    with open(run + "/log.jsonl") as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") in ("train", "val"):
                out.append((r["type"], r["step"], r.get("seq_len", 0), r["loss"]))
    return out


def read_safetensors(path):
    import numpy as np  # only here: comparing losses needs no numpy
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], dtype=np.float32).reshape(v["shape"])
            for k, v in header.items() if k != "__metadata__"}


def main():
    mode, a, b, tol = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    if mode == "losses":
        la, lb = losses(a), losses(b)
        if [x[:3] for x in la] != [x[:3] for x in lb] or not la:
            print(f"different records: {len(la)} vs {len(lb)}")
            return 1
        worst = max(abs(x[3] - y[3]) / abs(x[3]) for x, y in zip(la, lb))
        print(f"{len(la)} losses, max relative difference {worst:.3g}")
        return 0 if worst <= tol else 1
    import numpy as np
    step = float(sys.argv[5])
    ta, tb = read_safetensors(a), read_safetensors(b)
    if sorted(ta) != sorted(tb) or not ta:
        print("different tensors")
        return 1
    worst, where, bad = 0.0, "", []
    for k in ta:
        x, y = ta[k].astype(np.float64), tb[k].astype(np.float64)
        if k.endswith("attn.qkv.bias"):
            c = x.shape[1] // 3
            kx, ky = x[:, c:2 * c].copy(), y[:, c:2 * c].copy()
            if np.abs(kx - ky).max() > step:
                bad.append(f"{k} key part {np.abs(kx - ky).max():.3g} > {step}")
            x[:, c:2 * c] = y[:, c:2 * c] = 0
        n = np.linalg.norm(x)
        rel = np.linalg.norm(x - y) / n if n > 0 else np.linalg.norm(y)
        if rel > worst:
            worst, where = rel, k
        if rel > tol:
            bad.append(f"{k} {rel:.3g}")
    print(f"{len(ta)} tensors, max relative difference {worst:.3g} ({where})" + (": " + ", ".join(bad) if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
