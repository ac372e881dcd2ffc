#include "bench/soak/flag_pairs.h"

#include <cstdio>

namespace maskd::soak {

bool ReadFlagPairs(int argc, char** argv, const char* program, std::string* command,
                   const std::function<bool(const std::string&, const std::string&)>& set) {
  for (int i = 0; i < argc; ++i) *command += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    std::string name = argv[i];
    std::string value;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      std::fprintf(stderr, "%s: %s needs a value\n", program, name.c_str());
      return false;
    }
    if (!set(name, value)) {
      std::fprintf(stderr, "%s: unknown flag %s\n", program, name.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace maskd::soak
