// Run folder and checkpoint protocol (the file helpers are in fileio.h).
//
// A checkpoint is written into RUN_DIR/ckpt_NNNNNN.tmp/, fsynced, renamed to RUN_DIR/ckpt_NNNNNN/,
// and only then is RUN_DIR/latest (a text file holding the folder name) replaced atomically.
// A crash or error at any point leaves the previous checkpoint and `latest` untouched. Older
// checkpoints go only after that (checkpoint_prune), so a run never lacks a loadable one.
#pragma once
#include <functional>
#include <string>
#include <nlohmann/json.hpp>

#include "fileio.h"

// A run folder "holds a run" when it has any of config.json, log.jsonl or latest. Starting a new
// run there would mix two runs (a new log beside the old checkpoints), so it is refused unless
// overwrite is set; overwrite deletes what is in the folder, but only when everything in it belongs
// to a run (never a folder of other files given by mistake). An existing folder is locked
// (lock_run_dir) before it is looked at. Throws with what to do instead.
void claim_run_dir(const std::string& path, bool overwrite);
// Locks the run folder for as long as this process lives: an flock on RUN_DIR/lock, which holds
// the pid, so that a second trainer on the folder stops before it writes anything, with
// "run folder '<path>' is in use by another trainer (pid N)". The OS drops the lock when the
// process ends, however it ends (SIGKILL too). Locking a folder this process holds does nothing.
void lock_run_dir(const std::string& path);
// mkdir -p plus a write probe; throws "cannot create run folder '<path>': <reason>".
void make_run_dir(const std::string& path);

// Writes RUN_DIR/ckpt_NNNNNN (NNNNNN = step, zero-padded to 6) via write_files(tmpdir), then
// points RUN_DIR/latest at it. Returns the final folder path. On error the tmp folder is removed
// and a std::runtime_error "cannot write checkpoint ...: <reason>" is thrown.
std::string checkpoint_write(const std::string& run_dir, long step,
                             const std::function<void(const std::string& dir)>& write_files);
// Path of the folder named by RUN_DIR/latest; throws "no checkpoint in '<RUN_DIR>' ..." if none.
std::string checkpoint_latest(const std::string& run_dir);
// A checkpoint folder's state.json, checked: {"step": N, "train_data": {...}} with N the step of
// its name (ckpt_NNNNNN), as the weights were written at; throws "bad training state in <path>: ...".
nlohmann::json checkpoint_state(const std::string& dir);
// checkpoint_latest, once its files read back (the weights; with optimizer, the AdamW moments and
// state.json too); else throws naming the newest older checkpoint of the run that does.
std::string checkpoint_sound(const std::string& run_dir, bool optimizer);
// Retention, after `latest` names a new checkpoint: deletes every RUN_DIR/ckpt_NNNNNN except the
// newest `keep` (0 = keep all), those whose step is a multiple of `keep_every` (0 = none such) and
// the one `latest` names. Each is renamed to ckpt_NNNNNN.del first, so a crash leaves no
// half-deleted folder under a checkpoint's name; a later prune removes what .del is left.
void checkpoint_prune(const std::string& run_dir, int keep, int keep_every);
