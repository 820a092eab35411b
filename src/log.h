// JSONL run log: one JSON object per line, flushed after every record so a crash loses at most
// the record being written.
#pragma once
#include <memory>
#include <string>
#include <nlohmann/json.hpp>
#include "fileio.h"

class JsonlLog {
  public:
    // append=false starts a new file; append=true continues an existing one (resume).
    JsonlLog(const std::string& path, bool append);
    // One line per record; throws "cannot write <path>: ..." on failure.
    void write(const nlohmann::json& record);
    // For resume from `step`: rewrites the file without records whose "step" is > step, or is
    // == step for anything but a train, stopped or config_change record (the steps and evaluations
    // that will be redone), and without unparsable lines (a record torn by a crash).
    // Records without a "step" (e.g. the config record) are kept.
    void truncate_after(long step);
    const std::string& path() const { return path_; }

  private:
    std::string path_;
    std::unique_ptr<OutFile> f_;
};
