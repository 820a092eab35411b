# build/sample --attention (the attention maps' file) and scripts/plot_attention.py on short runs
# of the synthetic task: the file's shape, ids and scheme, probabilities that are causal rows summing
# to 1 and equal to numpy's own layer 0 (rope and alibi: the rotation and the bias), its bad
# inputs, and the figure of two runs; scripts/plot_decay.py on the same runs.
source test/testlib.sh
TRAIN=${TRAIN:-build/train}
SAMPLE=${SAMPLE:-build/sample}
PYTHON=${PYTHON:-$(scripts/pick_python.sh)}
needs_built attention "$TRAIN"
needs_built attention "$SAMPLE"
scratch
"$PYTHON" data/make_synthetic.py --out "$tmp/syn" --train-tokens 8192 --val-tokens 2048 --window 16 >/dev/null
# make run's model, trained and evaluated at 16 tokens only, on the task above
"$PYTHON" - "$tmp" <<'PY'
import json, sys
c = json.load(open("configs/synthetic.json"))
c = {k: v for k, v in c.items() if k not in ("eval_seq_lens", "eval_long_every")}
c.update(max_seq_len=16, seq_len=16, steps=30, eval_every=30, eval_batches=1, checkpoint_every=30,
         train_data=sys.argv[1] + "/syn/synthetic_train_*.bin", val_data=sys.argv[1] + "/syn/synthetic_val_*.bin")
json.dump(c, open(sys.argv[1] + "/config.json", "w"))
PY
for pos in rope alibi; do  # trained at the default attention mode, flash: sample runs cublas
  OMP_NUM_THREADS=1 "$TRAIN" --config "$tmp/config.json" --pos $pos --run_dir "$tmp/$pos" >"$tmp/$pos.txt" 2>&1 &
done
wait
ids="18 5 9 2 16 2 7 3 17 7 1 4"

# every row of every head: causal probabilities; layer 0 (the only one) as numpy computes it from the
# checkpoint's weights: LayerNorm, the qkv product, RoPE's rotation of adjacent pairs or ALiBi's bias
check() {  # check POS FILE
  "$PYTHON" - "$1" "$2" "$ids" "$(cat "$tmp/$1/latest")" "$tmp/$1" <<'PY'
import json, struct, sys
import numpy as np
pos, path, ids, ckpt, run = sys.argv[1], sys.argv[2], [int(t) for t in sys.argv[3].split()], sys.argv[4], sys.argv[5]
d = json.load(open(path))
att = np.array(d["attention"])
raw = open(f"{run}/{ckpt}/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
def w(name):
    e = head[name]
    return np.frombuffer(raw[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]], "<f4").reshape(e["shape"]).astype(np.float64)
cfg = json.loads(head["__metadata__"]["config"])
C, H, T = cfg["n_embd"], cfg["n_head"], len(ids)
D = C // H
x = w("wte")[ids]
x = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * w("ln1.weight")[0] + w("ln1.bias")[0]
qkv = x @ w("attn.qkv.weight")[0].T + w("attn.qkv.bias")[0]  # (T, 3C)
q, k = (qkv[:, i * C:(i + 1) * C].reshape(T, H, D).transpose(1, 0, 2) for i in (0, 1))  # (H, T, D)
t = np.arange(T)
if pos == "rope":
    ang = t[:, None] * cfg.get("rope_base", 10000.0) ** (-2.0 * np.arange(D // 2) / D)  # (T, D/2)
    def rot(v):
        out = v.copy()
        out[..., 0::2] = v[..., 0::2] * np.cos(ang) - v[..., 1::2] * np.sin(ang)
        out[..., 1::2] = v[..., 0::2] * np.sin(ang) + v[..., 1::2] * np.cos(ang)
        return out
    q, k = rot(q), rot(k)
s = q @ k.transpose(0, 2, 1) / np.sqrt(D)  # (H, T, T)
if pos == "alibi":  # H a power of two: m_h = 2^(-8 h / H), h from 1
    s -= (2.0 ** (-8.0 * np.arange(1, H + 1) / H))[:, None, None] * (t[:, None] - t[None, :])
s = np.where(t[None, :] <= t[:, None], s, -np.inf)
ref = np.exp(s - s.max(-1, keepdims=True))
ref /= ref.sum(-1, keepdims=True)
problems = []
if d["pos"] != pos or d["tokens"] != ids or d["shape"] != [1, H, T, T] or att.shape != (1, H, T, T):
    problems.append(f"pos {d['pos']}, tokens {d['tokens']}, shape {d['shape']} / {att.shape}")
elif np.abs(att.sum(-1) - 1).max() > 1e-5 or np.triu(att, 1).any() or (att < 0).any():
    problems.append("rows are not causal probabilities")
elif np.abs(att[0] - ref).max() > 1e-4:
    problems.append(f"differs from numpy's by {np.abs(att[0] - ref).max():.2e}")
print("; ".join(problems) or "ok")
PY
}
for pos in rope alibi; do
  if out=$("$SAMPLE" --checkpoint "$tmp/$pos" --prompt_ids "$ids" --attention "$tmp/$pos.json" 2>&1) &&
    [ "$out" = "attention: $tmp/$pos.json, (L 1, H 4, T 12) over the prompt" ] &&
    got=$(check $pos "$tmp/$pos.json" 2>&1) && [ "$got" = ok ]; then pass "sample_attention_$pos"
  else fail "sample_attention_$pos" "$out $got $(tail -2 "$tmp/$pos.txt")"; fi
done

r=("$SAMPLE" --checkpoint "$tmp/rope" --prompt_ids "$ids")
expect_only_error sample_attention_no_folder "^error: cannot write $tmp/none/a.json" -- "${r[@]}" --attention "$tmp/none/a.json"
mkdir "$tmp/dir"
expect_only_error sample_attention_onto_folder "^error: cannot write $tmp/dir: " -- "${r[@]}" --attention "$tmp/dir"
expect_only_error sample_attention_empty "^error: --attention is empty: give the file to write$" -- "${r[@]}" --attention ""
expect_only_error sample_attention_generates_nothing "^error: --attention generates nothing: leave out --tokens$" -- \
  "${r[@]}" --attention "$tmp/a.json" --tokens 4
expect_only_error sample_attention_too_long "^error: --attention: the prompt has 17 tokens, more than the model's max_seq_len 16$" -- \
  "$SAMPLE" --checkpoint "$tmp/rope" --prompt_ids "$(seq -s ' ' 0 16)" --attention "$tmp/a.json"
expect_only_error sample_attention_cpu_only "^error: --attention computes on the CPU: leave out --device$" -- \
  "${r[@]}" --attention "$tmp/a.json" --device cuda
[ ! -e "$tmp/a.json" ] && pass sample_attention_nothing_written_on_error || fail sample_attention_nothing_written_on_error "$tmp/a.json exists"

# the figure of both runs on the first window with both markers; then its bad inputs
p=("$PYTHON" scripts/plot_attention.py "$tmp/rope" "$tmp/alibi" --data "$tmp/syn" --sample "$SAMPLE")
out=$("${p[@]}" --out "$tmp/att.png" 2>&1)
if [[ $out =~ ^"attention figure: $tmp/att.png (window "[0-9]+": "([0-9]+" "){15}[0-9]+")"$ ]] &&
  [[ $out == *" 16 "* && $out == *" 17"* ]] && [ "$(head -c 4 "$tmp/att.png" | tail -c 3)" = PNG ]; then
  pass plot_attention_two_runs
else fail plot_attention_two_runs "$out"; fi
expect_only_error plot_attention_bad_window "^error: --window 999: the validation shard holds windows 0\.\.126 of 16 tokens$" -- \
  "${p[@]}" --out "$tmp/b.png" --window 999
expect_only_error plot_attention_bad_head "^error: --layer 0 --head 4: the model has layers 0\.\.0 and heads 0\.\.3$" -- \
  "${p[@]}" --out "$tmp/b.png" --layer 0 --head 4
expect_fail plot_attention_layer_alone "^error: --layer and --head go together$" -- "${p[@]}" --layer 0
expect_only_error plot_attention_no_checkpoint "^error: .*sample on $tmp/syn: no checkpoint in '$tmp/syn'" -- \
  "$PYTHON" scripts/plot_attention.py "$tmp/rope" "$tmp/syn" --data "$tmp/syn" --sample "$SAMPLE" --out "$tmp/b.png"

# scripts/plot_decay.py on both run folders: sample's maps of 2 validation windows each, pooled, kept
out=$("$PYTHON" scripts/plot_decay.py "$tmp/rope" "$tmp/alibi" --windows 2 --sample "$SAMPLE" --out "$tmp/decay.png" \
  --maps_dir "$tmp/maps" 2>&1)
if [[ $out == "decay figure: $tmp/decay.png (T 16;"* && $out == *$'\n| rope | 2 | '* && $out == *$'\n| alibi | 2 | '* ]] &&
  [ "$(head -c 4 "$tmp/decay.png" | tail -c 3)" = PNG ]; then pass plot_decay_two_runs
else fail plot_decay_two_runs "$out"; fi
# the kept maps, read again, give the same table
again=$("$PYTHON" scripts/plot_decay.py "$tmp"/maps/*.json --out "$tmp/decay2.png" 2>&1)
[ "$(ls "$tmp/maps")" = "$(printf '%s\n' 0.json 1.json 2.json 3.json)" ] && [ "${again#*$'\n'}" = "${out#*$'\n'}" ] &&
  pass plot_decay_kept_maps || fail plot_decay_kept_maps "$(ls "$tmp/maps") $again"
expect_only_error plot_decay_not_a_run "^error: cannot read the run's config $tmp/syn/config.json: " -- \
  "$PYTHON" scripts/plot_decay.py "$tmp/rope" "$tmp/syn" --val "$tmp/syn/synthetic_val_000000.bin" --sample "$SAMPLE" --out "$tmp/b.png"
finish
