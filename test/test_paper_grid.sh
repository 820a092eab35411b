# scripts/paper_grid.sh (gpu_check.sh --paper-grid) on the CPU with a tiny config: missing shards
# are named before any run, committed logs are skipped, each finished run's log lands in the
# results folder as soon as it ends (while the next one runs), runs that the budget cannot
# cover are reported and not started, a run cut by the budget leaves no log, bad arguments fail;
# and scripts/reproduce_paper.sh's reuse of finished runs, only at the same config.
source test/testlib.sh
TRAIN=${TRAIN:-build/train}
PYTHON=${PYTHON:-python3}
grid=scripts/paper_grid.sh
if [ ! -x "$TRAIN" ]; then
  skip paper_grid "$TRAIN not built"
  finish
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

expect_fail paper_grid_no_out "^error: --out is required" -- bash $grid
expect_fail paper_grid_bad_budget "^error: --budget must be a positive number" -- bash $grid --out "$tmp/x" --budget 1h
expect_fail paper_grid_bad_seeds "^error: --seeds must be a positive integer" -- bash $grid --out "$tmp/x" --seeds 0
expect_fail paper_grid_unknown "^error: unknown argument '--foo'" -- bash $grid --out "$tmp/x" --foo
expect_fail paper_grid_no_shards "^error: no dataset has its shards" -- \
  env DATA="$tmp/nodata" TRAIN="$TRAIN" bash $grid --out "$tmp/x"

# two of the three datasets prepared (tiny shards), a tiny config in place of configs/paper.json
mkdir -p "$tmp/data/wikitext2" "$tmp/data/ptb" "$tmp/results"
"$PYTHON" - "$tmp/data" <<'PY'
import random, sys
sys.path.insert(0, "data")
from shards import write_shard
random.seed(2)
for d in ("wikitext2", "ptb"):
    toks = [random.randrange(16) for _ in range(3000)]
    write_shard(f"{sys.argv[1]}/{d}/{d}_train_000000.bin", toks[:2000])
    write_shard(f"{sys.argv[1]}/{d}/{d}_val_000000.bin", toks[2000:])
PY
cat >"$tmp/tiny.json" <<'EOF'
{"n_layer": 1, "n_head": 2, "n_embd": 16, "vocab_size": 16, "max_seq_len": 16, "batch_size": 2, "seq_len": 16,
 "steps": 4, "eval_every": 2, "eval_batches": 1, "device": "cpu"}
EOF
echo '{"type": "config"}' >"$tmp/results/ptb-rope-s1.jsonl"  # committed already
export TRAIN DATA="$tmp/data" RESULTS="$tmp/results" CONFIG="$tmp/tiny.json"

out=$(bash $grid --out "$tmp/out" --budget 600 2>&1)
rc=$?
why=""
[ $rc = 0 ] || why+="exit $rc; "
grep -q '^missing shards: pg19 ' <<<"$out" || why+="pg19's missing shards not named; "
[ "$(grep -n 'missing shards' <<<"$out" | cut -d: -f1)" = 1 ] || why+="missing shards not said first; "
grep -q '^ptb-rope-s1: committed, skipped' <<<"$out" || why+="the committed run not skipped; "
grep -q '^pg19-crope-s1: no shards, skipped' <<<"$out" || why+="pg19 not skipped; "
for n in wikitext2-learned-s1 wikitext2-rope-s1 wikitext2-crope-s1 ptb-learned-s1 ptb-crope-s1; do
  [ "$(grep -c '"type":"train"' "$tmp/out/$n.jsonl" 2>/dev/null)" = 4 ] || why+="$n.jsonl missing or not 4 steps; "
  grep -q '"type":"val"' "$tmp/out/$n.jsonl" 2>/dev/null || why+="$n.jsonl has no evaluation; "
done
[ -e "$tmp/out/ptb-rope-s1.jsonl" ] && why+="the committed run was trained again; "
# each log is copied when its run ends: the first run's log is older than the second run's end
[ "$tmp/out/wikitext2-learned-s1.jsonl" -ot "$tmp/out/runs/wikitext2-rope-s1/log.jsonl" ] ||
  why+="the first log was not written before the next run ended; "
grep -q '^paper grid: 5 run(s) finished, 0 failed' <<<"$out" || why+="no summary line; "
if [ -n "$why" ]; then fail paper_grid_runs "$why$(tail -n 12 <<<"$out")"; else pass paper_grid_runs; fi

# a budget shorter than one run: the first run is cut (no log kept), the rest are not started
cat >"$tmp/long.json" <<'EOF'
{"n_layer": 1, "n_head": 2, "n_embd": 16, "vocab_size": 16, "max_seq_len": 16, "batch_size": 2, "seq_len": 16,
 "steps": 100000000, "eval_every": 0, "device": "cpu"}
EOF
out=$(CONFIG="$tmp/long.json" DATASETS=wikitext2 bash $grid --out "$tmp/cut" --budget 3 2>&1)
why=""
grep -q '^wikitext2-learned-s1: cut (time budget)' <<<"$out" || why+="the first run not cut; "
grep -q '^wikitext2-rope-s1: not run (time budget' <<<"$out" || why+="the second run not reported as not run; "
compgen -G "$tmp/cut/*.jsonl" >/dev/null && why+="a cut run left a log in the results; "
if [ -n "$why" ]; then fail paper_grid_budget "$why$(tail -n 8 <<<"$out")"; else pass paper_grid_budget; fi

# scripts/reproduce_paper.sh on the same tiny setup: two runs at a time; a second call reuses the
# finished runs; one with other trainer arguments stops with one error naming the keys that differ
rp() { DATA="$tmp/data" bash scripts/reproduce_paper.sh --no-build --datasets wikitext2 --pos "rope crope" --seeds 2 \
  --out "$tmp/rp" "$@" 2>&1; }
out=$(rp --jobs 2)
rc=$?
why=""
[ $rc = 0 ] || why+="exit $rc; "
[ "$(grep -c ' done in ' <<<"$out")" = 4 ] || why+="not 4 runs done; "
[ -f "$tmp/rp/compare.md" ] && grep -q 'paired, 2 seeds' "$tmp/rp/compare.md" || why+="no comparison with an interval; "
if [ -n "$why" ]; then fail reproduce_paper_jobs "$why$(tail -n 8 <<<"$out")"; else pass reproduce_paper_jobs; fi
out=$(rp)
if [ "$(grep -c ': complete, skipped' <<<"$out")" = 4 ] && ! grep -q ': training ' <<<"$out"; then pass reproduce_paper_reuses
else fail reproduce_paper_reuses "$(grep '^==' <<<"$out")"; fi
expect_fail reproduce_paper_other_config "^error: .*wikitext2-rope-s1 was trained with another config than this command's \(steps 4, planned 3\)" -- \
  rp -- --steps 3
expect_fail reproduce_paper_bad_jobs "^error: --jobs must be a positive integer, got '0'" -- rp --jobs 0

# a failing run is a failure of the grid, and the reason is shown
out=$(bash $grid --out "$tmp/bad" --budget 600 -- --n_embd 9 2>&1)
rc=$?
if [ $rc = 0 ]; then fail paper_grid_failed_run "exit 0 with runs that fail"
elif ! grep -q '^wikitext2-learned-s1: FAILED (exit 1): error: .*n_embd' <<<"$out"; then
  fail paper_grid_failed_run "no FAILED line with the error: $(tail -n 5 <<<"$out")"
else pass paper_grid_failed_run; fi
finish
