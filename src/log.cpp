#include "log.h"
#include <sstream>

JsonlLog::JsonlLog(const std::string& path, bool append)
    : path_(path), f_(std::make_unique<OutFile>(path, append ? "ab" : "wb")) {}

void JsonlLog::write(const nlohmann::json& record) {
    f_->write(record.dump() + "\n");
    f_->flush();
}

void JsonlLog::truncate_after(long step) {
    f_->close();
    f_.reset();
    std::istringstream in(read_text_file(path_));
    std::string line, kept;
    while (std::getline(in, line)) {
        nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded() || !j.is_object()) continue;
        if (j.contains("step") && j["step"].is_number()) {
            // a train record at `step` is the update that led to the checkpoint, and a stopped
            // record there is the history of the stop, a config_change the config from there on;
            // anything else at `step` (an evaluation) is redone by the resumed run when its
            // schedule says so
            double s = j["step"].get<double>();
            std::string type = j.value("type", "");
            bool kept_at_step = type == "train" || type == "stopped" || type == "config_change";
            if (s > (double)step || (!kept_at_step && s == (double)step)) continue;
        }
        kept += line + "\n";
    }
    write_text_file_atomic(path_, kept);
    f_ = std::make_unique<OutFile>(path_, "ab");
}
