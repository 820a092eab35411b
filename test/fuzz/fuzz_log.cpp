// Fuzz target: the JSONL log readers of --resume and --eval_only (src/config.cpp resumed_config,
// run_threads; src/log.cpp JsonlLog::truncate_after) on any log and config.json. truncate_after
// must leave only whole JSON objects, none past the step.
// Input: log.jsonl; then kFileSep and config.json (empty: the seeds' config).
#include "fuzz.h"

#include <sstream>

#include "config.h"
#include "fileio.h"
#include "log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::vector<std::string> parts = fuzz_parts(data, size, 2);
    const std::string run = fuzz_dir() + "/run";
    fuzz_file("run/config.json", parts[1].empty() ? "{\"seq_len\": 8}" : parts[1]);
    const std::string log = fuzz_file("run/log.jsonl", parts[0]);
    refusal_ok([&] { resumed_config(run); });
    refusal_ok([&] { fuzz_require(run_threads(run) >= 0, "a negative thread count"); });
    const long step = (long)(size % 7);
    refusal_ok([&] {
        JsonlLog(log, true).truncate_after(step);
        std::istringstream in(read_text_file(log));
        for (std::string line; std::getline(in, line);) {
            const nlohmann::json r = nlohmann::json::parse(line, nullptr, false);
            fuzz_require(r.is_object(), "truncate_after kept a line that is not a JSON object");
            if (r.contains("step") && r["step"].is_number())
                fuzz_require(r["step"].get<double>() <= (double)step, "truncate_after kept a record past the step");
        }
    });
    return 0;
}
