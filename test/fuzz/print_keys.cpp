// Prints the config keys (src/config.cpp's kKeys) as libFuzzer dictionary lines, for
// test/fuzz/run_fuzz.sh: the dictionary's keys come from the one table that defines them.
#include <cstdio>

#include "config.h"

int main() {
    for (const KeyHelp& k : key_help()) {
        const std::string name = k.name.substr(0, k.name.find(','));  // "help, -h" -> "help"
        std::printf("\"%s\"\n\"--%s\"\n", name.c_str(), name.c_str());
    }
}
