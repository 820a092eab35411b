# How build/train treats a run as a user lives it: a run folder that holds a run is not
# reused by mistake, Ctrl-C / SIGTERM stop with a checkpoint the run resumes from exactly,
# output reaches a pipe or file at once, a run folder is locked while a trainer uses it, a
# resume refuses a changed model or data and logs any other change, the grid runner passes
# Ctrl-C to its trainers, the ETA counts evaluation, --init_from is recorded, fine-tuning at a
# longer length under a RoPE scaling works, eval_every 0 never evaluates, and sampling says where
# it looked for the GPT-2 vocabulary.
source test/testlib.sh
TRAIN=${TRAIN:-build/train}
SAMPLE=${SAMPLE:-build/sample}
PYTHON=${PYTHON:-python3}
if [ ! -x "$TRAIN" ]; then
  skip run_control "$TRAIN not built"
  finish
fi
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT

# t_val: 249 windows of 16+1, not a multiple of B=4; big_val: an evaluation many steps long (at
# 8,000 tokens it took only about two of this tiny model's steps, and CI once saw the ETA check miss)
pattern_shards "$tmp" 1 0.1 16 60000 t_train:0:4000 t_val:4000:8000 big_val:4000:60000
data=(--train_data "$tmp/t_train_000000.bin" --val_data "$tmp/t_val_000000.bin")
tiny=(--n_layer 1 --n_head 2 --n_embd 16 --vocab_size 16 --max_seq_len 32 --seq_len 16 --batch_size 4 --device cpu)

# wait_for FILE PATTERN SECONDS: until FILE has a line matching PATTERN
wait_for() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -qE -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
strip() { grep -E '"type":"(train|val)"' "$1" | sed 's/"eta_s":[^,]*,//; s/"flops_per_s":[^,]*,//; s/"step_ms":[^,]*,//; s/,"tokens_per_s":[^}]*//'; }

# --- a run folder that holds a run is refused; --overwrite deletes it whole; --resume continues it
r=$tmp/run
"$TRAIN" "${data[@]}" "${tiny[@]}" --steps 2 --eval_every 1 --checkpoint_every 1 --run_dir "$r" >/dev/null 2>&1
before=$(md5sum <"$r/log.jsonl")
expect_fail run_dir_holds_run "^error: run folder '$r' already holds a run: continue it with --resume" -- \
  "$TRAIN" "${data[@]}" "${tiny[@]}" --pos crope --steps 1 --run_dir "$r"
if [ "$(md5sum <"$r/log.jsonl")" = "$before" ] && grep -q '"pos": "rope"' "$r/config.json"; then pass run_dir_refused_keeps_run
else fail run_dir_refused_keeps_run "the old run's log or config changed"; fi
if "$TRAIN" "${data[@]}" "${tiny[@]}" --pos crope --steps 1 --eval_every 0 --checkpoint_every 0 --overwrite \
  --run_dir "$r" >"$tmp/over.txt" 2>&1 && [ ! -e "$r/latest" ] && ! ls -d "$r"/ckpt_* >/dev/null 2>&1 &&
  grep -q '"pos": "crope"' "$r/config.json" && [ "$(grep -c '"type":"train"' "$r/log.jsonl")" -eq 1 ]; then
  pass run_dir_overwrite_clears_whole
else fail run_dir_overwrite_clears_whole "$(tail -c 300 "$tmp/over.txt"; ls "$r")"; fi

# --- output is line-buffered: the header is in a redirected file while the run still waits
# (here for its training data, a FIFO nobody writes yet); then Ctrl-C twice: the first waits for
# the step to finish, the second ends the process at once
mkfifo "$tmp/fifo_train_000000.bin"
set -m  # background jobs get the default SIGINT (without job control bash ignores it for them)
env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$TRAIN" "${tiny[@]}" --train_data "$tmp/fifo_train_000000.bin" --run_dir "$tmp/fifo_run" \
  >"$tmp/fifo.txt" 2>&1 &
pid=$!
pids+=("$pid")
if wait_for "$tmp/fifo.txt" "^parameters: total" 20 && kill -0 "$pid" 2>/dev/null; then pass output_line_buffered
else fail output_line_buffered "no header line in the redirected output while the run was alive: '$(cat "$tmp/fifo.txt")'"; fi
# OpenMP threads spin briefly, then sleep, unless the user says otherwise (scripts/README.md, CPU throughput)
if tr '\0' '\n' <"/proc/$pid/environ" | grep -qx GOMP_SPINCOUNT=1000; then pass openmp_short_spin_by_default
else fail openmp_short_spin_by_default "OpenMP settings of the running trainer: $(tr '\0' '\n' <"/proc/$pid/environ" | grep OMP_)"; fi
# and malloc's large blocks on transparent huge pages where the kernel gives them on request
# (madvise; glibc takes its tunable out of the environment, so the pages tell): a model of 40 MB
# waiting for its data holds some, unless the user's tunable says no
thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)
huge() {  # huge [VAR=VALUE]: AnonHugePages (kB) of a trainer of that model waiting on the FIFO, within 5 s
  local p k n=0
  env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$@" "$TRAIN" "${tiny[@]}" --n_embd 256 --vocab_size 8192 \
    --train_data "$tmp/fifo_train_000000.bin" --run_dir "$tmp/huge_run" >/dev/null 2>&1 &
  p=$!
  for ((k = 0; k < 50 && n == 0; k++)); do
    sleep 0.1
    n=$(sed -n 's/^AnonHugePages: *\([0-9]*\) kB/\1/p' "/proc/$p/smaps_rollup" 2>/dev/null)
    n=${n:-0}
  done
  kill -9 "$p"
  wait "$p" 2>/dev/null
  rm -rf "$tmp/huge_run"
  echo "$n"
}
if [[ $thp != *"[madvise]"* ]]; then
  skip malloc_huge_pages "transparent huge pages are '$thp' on this machine, not madvise"
else
  on=$(huge) off=$(huge GLIBC_TUNABLES=glibc.malloc.hugetlb=0)
  if [ "$on" -gt 0 ] && [ "$off" -eq 0 ]; then pass malloc_huge_pages
  else fail malloc_huge_pages "AnonHugePages $on kB by default, $off kB with glibc.malloc.hugetlb=0"; fi
fi
env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=active "$TRAIN" "${tiny[@]}" --train_data "$tmp/fifo_train_000000.bin" --run_dir "$tmp/fifo_run2" \
  >"$tmp/fifo2.txt" 2>&1 &
p2=$!
pids+=("$p2")
if wait_for "$tmp/fifo2.txt" "^parameters: total" 20 && tr '\0' '\n' <"/proc/$p2/environ" | grep -qx OMP_WAIT_POLICY=active &&
  ! tr '\0' '\n' <"/proc/$p2/environ" | grep -q GOMP_SPINCOUNT
then pass openmp_user_setting_wins; else fail openmp_user_setting_wins "$(tr '\0' '\n' <"/proc/$p2/environ" | grep OMP_)"; fi
kill -9 "$p2"
wait "$p2" 2>/dev/null
# A shell started in the background without job control passes SIGINT on ignored, and no shell
# can undo that; the trainer then keeps ignoring it (as under nohup), so there is nothing to test
if (( 0x$(awk '/^SigIgn/ {print $2}' /proc/$$/status) & 2 )); then
  why="SIGINT is ignored in this test's environment (started in the background), and so in the trainer"
  skip first_sigint_finishes_step "$why"
  skip second_sigint_exits_at_once "$why"
  kill -9 "$pid"
  wait "$pid" 2>/dev/null
else
  kill -INT "$pid"
  sleep 0.5
  if kill -0 "$pid" 2>/dev/null; then pass first_sigint_finishes_step; else fail first_sigint_finishes_step "exited at once"; fi
  kill -INT "$pid"
  wait "$pid"
  rc=$?
  if [ $rc -eq 130 ]; then pass second_sigint_exits_at_once; else fail second_sigint_exits_at_once "exit status $rc"; fi
fi

# --- SIGTERM mid-run: the step finishes, a checkpoint is written, a "stopped" record logged,
# exit 143; --resume then continues exactly as a run that was never stopped
s=$tmp/sig
"$TRAIN" "${data[@]}" "${tiny[@]}" --steps 100000 --eval_every 0 --checkpoint_every 0 --run_dir "$s" >"$tmp/sig.txt" 2>&1 &
pid=$!
pids+=("$pid")
wait_for "$s/log.jsonl" '"step":5,' 60
kill -TERM "$pid"
wait "$pid"
rc=$?
set +m
k=$(sed -n 's/^stopped by SIGTERM at step \([0-9]*\);.*/\1/p' "$tmp/sig.txt")
if [ $rc -eq 143 ] && [ -n "$k" ] && [ "$(cat "$s/latest" 2>/dev/null)" = "$(printf 'ckpt_%06d' "$k")" ] &&
  tail -1 "$s/log.jsonl" | grep -q "\"signal\":\"SIGTERM\",\"step\":$k,\"type\":\"stopped\""; then
  pass sigterm_checkpoints_and_logs
else fail sigterm_checkpoints_and_logs "rc $rc, step '$k', latest '$(cat "$s/latest" 2>/dev/null)', $(tail -c 200 "$tmp/sig.txt")"; fi
n=$((k + 10))
"$TRAIN" --resume "$s" --steps $n >"$tmp/sig_resume.txt" 2>&1
"$TRAIN" "${data[@]}" "${tiny[@]}" --steps $n --eval_every 0 --checkpoint_every 0 --run_dir "$tmp/nosig" >/dev/null 2>&1
if [ -n "$k" ] && [ "$(strip "$s/log.jsonl" | wc -l)" -eq $n ] && diff <(strip "$s/log.jsonl") <(strip "$tmp/nosig/log.jsonl") >/dev/null
then pass sigterm_resume_bit_identical
else fail sigterm_resume_bit_identical "$(tail -c 300 "$tmp/sig_resume.txt")"; fi
if [ -n "$k" ] && grep -q "\"signal\":\"SIGTERM\",\"step\":$k,\"type\":\"stopped\"" "$s/log.jsonl"; then pass stopped_record_kept_on_resume
else fail stopped_record_kept_on_resume "no stopped record at step '$k' after resuming"; fi
# where and how the run computed: in the first record, and again in a "resumed" record (the
# resuming machine may differ from the first), with the CPU's OpenMP threads (OpenBLAS rounds by them)
on='"run_on":{"arithmetic":"fp32","device":"cpu","threads":[0-9]+}'
if head -1 "$s/log.jsonl" | grep -qE "$on" && grep -qE "^\{$on,\"step\":$k,\"type\":\"resumed\"\}$" "$s/log.jsonl"
then pass run_on_logged_and_on_resume
else fail run_on_logged_and_on_resume "$(head -1 "$s/log.jsonl" | grep -o '"run_on":{[^}]*}'); $(grep '"resumed"' "$s/log.jsonl")"; fi

# --- a run folder is locked while a trainer uses it: a second trainer there (--resume, a new run,
# --overwrite) stops with one error line naming the folder and the holder's pid, and changes
# nothing; the OS drops the lock with the process, so after a SIGKILL the run resumes
l=$tmp/locked
"$TRAIN" "${data[@]}" "${tiny[@]}" --steps 100000 --eval_every 0 --checkpoint_every 5 --run_dir "$l" >"$tmp/locked.txt" 2>&1 &
pid=$!
pids+=("$pid")
wait_for "$l/latest" ckpt_ 60
held="^error: run folder '$l' is in use by another trainer \(pid $pid\): wait for it to end"
expect_only_error lock_second_resume_refused "$held" -- "$TRAIN" --resume "$l"
expect_only_error lock_new_run_refused "$held" -- "$TRAIN" "${data[@]}" "${tiny[@]}" --steps 1 --run_dir "$l"
expect_only_error lock_overwrite_refused "$held" -- "$TRAIN" "${data[@]}" "${tiny[@]}" --steps 1 --overwrite --run_dir "$l"
if kill -0 "$pid" 2>/dev/null && [ -f "$l/config.json" ] && ! grep -q '"resumed"' "$l/log.jsonl" &&
  head -1 "$l/log.jsonl" | grep -q '"type":"config"}$'; then pass lock_refusals_touch_nothing
else fail lock_refusals_touch_nothing "$(ls "$l"; grep -v '"train"' "$l/log.jsonl" | tail -c 300)"; fi
kill -9 "$pid"
wait "$pid" 2>/dev/null
k=$(sed 's/ckpt_0*//' "$l/latest")
if "$TRAIN" --resume "$l" --steps $((k + 2)) >"$tmp/locked_resume.txt" 2>&1 &&
  [ "$(cat "$l/latest")" = "$(printf 'ckpt_%06d' $((k + 2)))" ]; then pass lock_released_by_sigkill
else fail lock_released_by_sigkill "$(tail -c 300 "$tmp/locked_resume.txt")"; fi
# a trainer that ends removes its lock file (a finished run names no pid of a process long gone)
if [ ! -e "$l/lock" ]; then pass lock_removed_at_exit; else fail lock_removed_at_exit "$(cat "$l/lock")"; fi

# --- --resume with changed keys: a model or data key (or the seed, or the folder) is refused with
# one error line naming each with both values, touching nothing; any other change is logged as a
# config_change record at the resume step and applies from there (a later --resume too), while
# config.json keeps what the run started with
c=$tmp/changed
"$TRAIN" "${data[@]}" "${tiny[@]}" --steps 4 --schedule constant --eval_every 0 --checkpoint_every 2 --run_dir "$c" >/dev/null 2>&1
sums() { md5sum "$c/config.json" "$c/log.jsonl" "$c/latest"; }
before=$(sums)
expect_only_error resume_model_keys_refused \
  "^error: --resume $c with n_embd 32 \(the run's: 16\), seq_len 8 \(the run's: 16\), seed 7 \(the run's: 1337\): a resumed run keeps its model, its data and its folder" \
  -- "$TRAIN" --resume "$c" --n_embd 32 --seq_len 8 --seed 7 --lr 0.01
if [ "$(sums)" = "$before" ]; then pass resume_refused_touches_nothing; else fail resume_refused_touches_nothing "the run's files changed"; fi
# a finished run resumed with another lr trains nothing: the change is logged at its last step
"$TRAIN" --resume "$c" --lr 0.01 >"$tmp/changed1.txt" 2>&1
"$TRAIN" --resume "$c" --steps 6 >"$tmp/changed2.txt" 2>&1
if "$PYTHON" - "$c" <<'PY'
import json, sys
run = sys.argv[1]
log = [json.loads(l) for l in open(run + "/log.jsonl")]
changes = [(r["step"], r["changes"]) for r in log if r["type"] == "config_change"]
lrs = [r["lr"] for r in log if r["type"] == "train"]
cfg = json.load(open(run + "/config.json"))
print(changes, lrs, cfg["lr"], cfg["steps"])
sys.exit(0 if changes == [(4, {"lr": [0.001, 0.01]}), (4, {"steps": [4, 6]})] and lrs == [0.001] * 4 + [0.01] * 2
         and cfg["lr"] == 0.001 and cfg["steps"] == 4 else 1)
PY
then pass resume_change_logged_config_kept; else fail resume_change_logged_config_kept "$(grep -h 'config change' "$tmp"/changed[12].txt)"; fi

# --- the grid runner (scripts/reproduce_paper.sh --jobs 2): Ctrl-C (SIGINT to its process group)
# reaches each running trainer once, from the runner: each checkpoints, the runner exits 130 and
# leaves no trainer behind; run again, it resumes and finishes every run, its log's last step the
# one `latest` names. Where this test's SIGINT is ignored (and so the runner's), SIGTERM, exit 143.
g=$tmp/grid
mkdir -p "$g/tiny"
pattern_shards "$g/tiny" 3 0.1 16 6000 tiny_train:0:4000 tiny_val:4000:
cat >"$g/tiny.json" <<'EOF'
{"n_layer": 1, "n_head": 2, "n_embd": 16, "vocab_size": 16, "max_seq_len": 32, "seq_len": 16, "batch_size": 4,
 "steps": 1500, "eval_every": 500, "eval_batches": 1, "checkpoint_every": 500}
EOF
grid=(env DATA="$g" CONFIG="$g/tiny.json" TRAIN="$TRAIN" bash scripts/reproduce_paper.sh --no-build --scale cpu
  --datasets tiny --pos "rope crope" --jobs 2 --out "$g/out" -- --device cpu)
sig=INT rc_want=130
(( 0x$(awk '/^SigIgn/ {print $2}' /proc/$$/status) & 2 )) && sig=TERM rc_want=143
set -m  # the runner in a process group of its own, as a shell's foreground job
"${grid[@]}" >"$g/first.txt" 2>&1 &
runner=$!
pids+=("$runner")
set +m
wait_for "$g/out/tiny-rope-s1/log.jsonl" '"step":5,' 60 && wait_for "$g/out/tiny-crope-s1/log.jsonl" '"step":5,' 60
trainers=$(ps -o pid= --ppid "$runner")
kill -$sig -- -"$runner"
wait "$runner"
rc=$?
why=""
[ $rc = $rc_want ] || why+="exit $rc; "
[ "$(wc -w <<<"$trainers")" = 2 ] || why+="trainers '$trainers'; "
for p in $trainers; do kill -0 "$p" 2>/dev/null && { why+="trainer $p left running; "; kill -9 "$p"; }; done
for r in rope crope; do
  k=$(sed -n "s/^stopped by SIG$sig at step \([0-9]*\);.*/\1/p" "$g/out/tiny-$r-s1.txt" 2>/dev/null)
  [ -n "$k" ] && [ "$(cat "$g/out/tiny-$r-s1/latest" 2>/dev/null)" = "$(printf 'ckpt_%06d' "$k")" ] ||
    why+="$r: stopped at '$k', latest $(cat "$g/out/tiny-$r-s1/latest" 2>/dev/null); "
done
name=grid_runner_sig${sig,,}_stops_trainers
if [ -z "$why" ]; then pass "$name"; else fail "$name" "$why$(tail -n 5 "$g/first.txt")"; fi
[ $sig = TERM ] && skip grid_runner_sigint_stops_trainers "SIGINT is ignored in this test's environment (started in the background), and so in the runner"
"${grid[@]}" >"$g/second.txt" 2>&1
rc=$?
why=""
[ $rc = 0 ] || why+="exit $rc; "
for r in rope crope; do
  grep -q "resuming $g/out/tiny-$r-s1" "$g/second.txt" || why+="$r not resumed; "
  last=$(grep '"type":"train"' "$g/out/tiny-$r-s1/log.jsonl" | tail -1 | grep -o '"step":[0-9]*')
  [ "$last" = '"step":1500' ] && [ "$(cat "$g/out/tiny-$r-s1/latest" 2>/dev/null)" = ckpt_001500 ] ||
    why+="$r: log's last $last, latest $(cat "$g/out/tiny-$r-s1/latest" 2>/dev/null); "
done
if [ -z "$why" ]; then pass grid_runner_rerun_finishes; else fail grid_runner_rerun_finishes "$why$(tail -n 5 "$g/second.txt")"; fi

# --- a second runner on the same --out is refused while the first runs, before its runs' first
# checkpoints and after, and changes nothing; with --wait it waits, then finds every run complete.
# A trainer that outlives its runner (killed outright) keeps its folder from the next runner.
runner_on() {
  local out=$1
  shift
  env DATA="$g" CONFIG="$g/tiny.json" TRAIN="$TRAIN" bash scripts/reproduce_paper.sh --no-build --scale cpu \
    --datasets tiny --pos "rope crope" --jobs 2 --out "$out" "$@" -- --device cpu
}
o=$g/two
runner_on "$o" >"$g/a.txt" 2>&1 &
a=$!
pids+=("$a")
wait_for "$o/tiny-rope-s1/log.jsonl" '"type":"config"' 60
ra=$(cat "$o/runner.lock")  # the runner's own pid (under the subshell and env that started it)
busy="^error: $o is in use by another runner \(pid $ra\): wait for it, give another --out, or add --wait$"
expect_only_error grid_second_runner_refused_before_checkpoints "$busy" -- runner_on "$o"
wait_for "$o/tiny-rope-s1/latest" ckpt_ 60
expect_only_error grid_second_runner_refused_after_checkpoints "$busy" -- runner_on "$o"
runner_on "$o" --wait >"$g/b.txt" 2>&1
rc=$?
wait "$a"
rca=$?
why=""
[ $rc = 0 ] && [ $rca = 0 ] || why+="exits $rca, $rc; "
grep -q "^== waiting for the runner using $o (pid $ra)$" "$g/b.txt" || why+="no waiting line; "
[ "$(grep -c ': complete, skipped$' "$g/b.txt")" = 2 ] || why+="not both complete; "
for r in rope crope; do
  [ "$(grep -c '^model:' "$o/tiny-$r-s1.txt")" = 1 ] || why+="$r: $(grep -c '^model:' "$o/tiny-$r-s1.txt") trainers; "
done
ls -d "$o"/*.stale-* >/dev/null 2>&1 && why+="a folder moved aside; "
grep -q FAILED "$g/a.txt" && why+="the first runner saw a failure; "
[ -e "$o/runner.lock" ] && why+="runner.lock left; "
if [ -z "$why" ]; then pass grid_second_runner_waits; else fail grid_second_runner_waits "$why$(tail -n 4 "$g/a.txt" "$g/b.txt")"; fi
o=$g/three
set -m
runner_on "$o" >"$g/c.txt" 2>&1 &
c=$!
set +m
pids+=("$c")
wait_for "$o/tiny-rope-s1/log.jsonl" '"step":5,' 60 && wait_for "$o/tiny-crope-s1/log.jsonl" '"step":5,' 60
rc_=$(cat "$o/runner.lock")
trainers=$(ps -o pid= --ppid "$rc_")
kill -9 "$rc_"
wait "$c" 2>/dev/null
for p in $trainers; do pids+=("$p"); kill -STOP "$p"; done  # stopped, each still holds its folder's lock
expect_only_error grid_runner_leaves_live_trainers \
  "^error: $o/tiny-(rope|crope)-s1 is in use by a trainer \(pid [0-9]+\): wait for it to end" -- runner_on "$o"
if [ "$(wc -w <<<"$trainers")" = 2 ] && ! ls -d "$o"/*.stale-* >/dev/null 2>&1 && [ "$(grep -c '^model:' "$o/tiny-rope-s1.txt")" = 1 ]
then pass grid_live_trainers_untouched; else fail grid_live_trainers_untouched "trainers '$trainers'; $(ls "$o")"; fi
for p in $trainers; do kill -9 "$p"; kill -CONT "$p"; done

# --- the ETA counts the whole wall time of a step, evaluation included: with an evaluation
# far longer than a step, the ETA after step 2 (the first to follow one of the step
# evaluations; step 0's is not counted) is far more than the remaining steps' step_ms
"$TRAIN" --train_data "$tmp/t_train_000000.bin" --val_data "$tmp/big_val_000000.bin" "${tiny[@]}" --steps 4 \
  --eval_every 1 --eval_batches 0 --checkpoint_every 0 --run_dir "$tmp/eta" >/dev/null 2>&1
if "$PYTHON" - "$tmp/eta/log.jsonl" <<'PY'
import json, sys
train = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "train"]
rest = sum(r["step_ms"] for r in train[2:]) / 1000
print("eta after step 2: %.3f s; the remaining steps' step_ms: %.3f s" % (train[1]["eta_s"], rest))
sys.exit(0 if len(train) == 4 and train[1]["eta_s"] > 3 * rest else 1)
PY
then pass eta_includes_evaluation; else fail eta_includes_evaluation "ETA left out the evaluation"; fi

# --- eval_every 0 never evaluates, not even at the end; the whole split (eval_batches 0) is its
# full batches: 249 windows at B=4 give 62 batches, 3968 tokens
"$TRAIN" "${data[@]}" "${tiny[@]}" --steps 2 --eval_every 0 --checkpoint_every 0 --run_dir "$tmp/noeval" >"$tmp/noeval.txt" 2>&1
if ! grep -q '"type":"val"' "$tmp/noeval/log.jsonl" && ! grep -q '^val' "$tmp/noeval.txt"; then pass eval_every_0_never
else fail eval_every_0_never "$(grep '^val' "$tmp/noeval.txt")"; fi
"$TRAIN" "${data[@]}" "${tiny[@]}" --steps 0 --eval_every 1 --eval_batches 0 --checkpoint_every 0 --run_dir "$tmp/whole" >/dev/null 2>&1
if grep -q '"tokens":3968,"type":"val"' "$tmp/whole/log.jsonl"; then pass eval_whole_split_full_batches
else fail eval_whole_split_full_batches "$(grep '"type":"val"' "$tmp/whole/log.jsonl")"; fi

# --- --init_from is recorded with the file's SHA-256 in config.json, the log and the checkpoints
w=$tmp/run/ckpt_000001/model.safetensors
[ -f "$w" ] || { "$TRAIN" "${data[@]}" "${tiny[@]}" --steps 1 --checkpoint_every 1 --run_dir "$tmp/src" >/dev/null 2>&1; w=$tmp/src/ckpt_000001/model.safetensors; }
sum=$(sha256sum "$w" | cut -d' ' -f1)
"$TRAIN" "${data[@]}" "${tiny[@]}" --steps 1 --eval_every 0 --checkpoint_every 1 --init_from "$w" --run_dir "$tmp/init" >/dev/null 2>&1
if "$PYTHON" - "$tmp/init" "$w" "$sum" <<'PY'
import json, struct, sys
run, path, sha = sys.argv[1:]
want = {"path": path, "sha256": sha}
cfg = json.load(open(run + "/config.json"))["init_from"]
log = json.loads(open(run + "/log.jsonl").readline())["config"]["init_from"]
raw = open(run + "/ckpt_000001/model.safetensors", "rb").read()
meta = json.loads(json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"]["config"])["init_from"]
sys.exit(0 if cfg == log == meta == want else 1)
PY
then pass init_from_recorded_with_sha256; else fail init_from_recorded_with_sha256 "$(grep -o '"init_from[^}]*}' "$tmp/init/config.json")"; fi
if "$TRAIN" --resume "$tmp/init" --steps 2 >/dev/null 2>&1 && grep -q "$sum" "$tmp/init/config.json"; then
  pass init_from_record_survives_resume
else fail init_from_record_survives_resume "$(cat "$tmp/init/config.json" | head -c 300)"; fi

# --- fine-tuning at a longer length: --init_from a checkpoint trained at T = 8, then 2T and 4T
# under linear and yarn: the run names the scaling and the training length 8 it measures s from,
# config.json records both, and the validation loss at the new length falls in 5 steps
"$TRAIN" "${data[@]}" "${tiny[@]}" --seq_len 8 --steps 2 --eval_every 0 --checkpoint_every 2 --run_dir "$tmp/t8" >/dev/null 2>&1
for sc in linear yarn; do
  for T in 16 32; do
    r=$tmp/ft_${sc}_$T
    out=$("$TRAIN" "${data[@]}" "${tiny[@]}" --seq_len $T --steps 5 --lr 3e-3 --eval_every 5 --eval_seq_lens $T,$((2 * T)) \
      --checkpoint_every 0 --rope_scaling $sc --init_from "$tmp/t8/ckpt_000002/model.safetensors" --run_dir "$r" 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && grep -q "^model: pos=rope .* | rope_scaling $sc, s max(1, L / training length), training length 8 |" <<<"$out" &&
      "$PYTHON" - "$r" "$sc" "$T" <<'PY'
import json, math, sys
run, sc, T = sys.argv[1], sys.argv[2], int(sys.argv[3])
cfg = json.load(open(run + "/config.json"))
val = {(r["step"], r["seq_len"]): r["loss"] for r in map(json.loads, open(run + "/log.jsonl")) if r["type"] == "val"}
ok = cfg["rope_scaling"] == sc and cfg["rope_train_len"] == 8 and all(math.isfinite(v) for v in val.values())
sys.exit(0 if ok and (5, 2 * T) in val and val[(5, T)] < val[(0, T)] else 1)
PY
    then pass finetune_longer_${sc}_$T
    else fail finetune_longer_${sc}_$T "status $rc: $(grep -E '^(model|val|error)' <<<"$out" | head -c 600)"; fi
  done
done

# --- partial rotary and llama3: the run header names both (R of the head's D channels), config.json
# records them
out=$("$TRAIN" "${data[@]}" "${tiny[@]}" --steps 1 --eval_every 0 --checkpoint_every 0 --partial_rotary_factor 0.5 \
  --rope_scaling llama3 --rope_scaling_factor 4 --run_dir "$tmp/partial" 2>&1)
if grep -q "^model: pos=rope .* | partial_rotary_factor 0.5: 4 of 8 channels rotate | rope_scaling llama3, s 4, training length 16 |" <<<"$out" &&
  "$PYTHON" -c 'import json, sys; c = json.load(open(sys.argv[1]))
sys.exit(0 if c["partial_rotary_factor"] == 0.5 and c["rope_scaling"] == "llama3" else 1)' "$tmp/partial/config.json"; then
  pass partial_rotary_llama3_recorded
else fail partial_rotary_llama3_recorded "$(grep -E '^(model|error)' <<<"$out" | head -c 400)"; fi

# --- sampling: a GPT-2-vocabulary model without encoder.json prints ids and says, once, where it
# looked; a small-vocabulary model (the synthetic task) prints ids without a word
if [ -x "$SAMPLE" ]; then
  "$TRAIN" --train_data "$tmp/t_train_000000.bin" --n_layer 1 --n_head 2 --n_embd 16 --vocab_size 50257 --max_seq_len 32 \
    --seq_len 16 --batch_size 4 --device cpu --steps 0 --eval_every 0 --checkpoint_every 1 --run_dir "$tmp/v50257" >/dev/null 2>&1
  "$SAMPLE" --checkpoint "$tmp/v50257" --prompt_ids 464 --tokens 3 --encoder_json "$tmp/nowhere/encoder.json" >"$tmp/ids.txt" 2>"$tmp/note.txt"
  if [ "$(grep -c "no GPT-2 vocabulary at $tmp/nowhere/encoder.json" "$tmp/note.txt")" -eq 1 ] &&
    grep -q "data/prepare_data.py" "$tmp/note.txt" && grep -qE '^464( [0-9]+){3}$' "$tmp/ids.txt"; then
    pass sample_says_where_encoder_was_looked_for
  else fail sample_says_where_encoder_was_looked_for "stderr '$(cat "$tmp/note.txt")', stdout '$(cat "$tmp/ids.txt")'"; fi
  "$SAMPLE" --checkpoint "$s" --prompt_ids 3 --tokens 3 --encoder_json "$tmp/nowhere/encoder.json" >/dev/null 2>"$tmp/note16.txt"
  if [ -z "$(grep -v '^speed: \|^memory: ' "$tmp/note16.txt")" ]; then pass sample_small_vocab_quiet  # stderr: memory and speed
  else fail sample_small_vocab_quiet "$(cat "$tmp/note16.txt")"; fi
  "$TRAIN" --resume "$tmp/v50257" --steps 2 --sample_every 1 --encoder_json "$tmp/nowhere/encoder.json" >"$tmp/tr.txt" 2>&1
  if [ "$(grep -c "no GPT-2 vocabulary at" "$tmp/tr.txt")" -eq 1 ] && [ "$(grep -c '^sample | step' "$tmp/tr.txt")" -eq 1 ]; then
    pass train_sample_says_once
  else fail train_sample_says_once "$(grep -E 'note|sample' "$tmp/tr.txt")"; fi
else
  skip sample_says_where_encoder_was_looked_for "$SAMPLE not built"
fi
finish
