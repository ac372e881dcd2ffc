// maskd_soak's command line (the flags are listed in soak.cc).
#ifndef MASKD_BENCH_SOAK_SOAK_FLAGS_H_
#define MASKD_BENCH_SOAK_SOAK_FLAGS_H_

#include <cstdint>
#include <string>

namespace maskd::soak {

struct Flags {
  double seconds = 60;
  int workers = 4;
  double kill_every = 20;  // <= 0: never
  double warmup = 10;
  int flat_min_samples = 20;
  double rss_tolerance_mb = 64;
  int fd_tolerance = 16;
  bool shm = true;
  uint64_t seed = 1;
  std::string maskd = std::string(MASKD_BIN_DIR) + "/maskd";
  std::string tokenizer_dir = std::string(MASKD_SOURCE_DIR) + "/data/tokenizers";
  std::string dir;  // empty: a fresh /tmp/maskd-soak-XXXXXX
  std::string samples_csv;  // every sample: t_s,instance,rss_bytes,fds
  std::string command;
};

// Parses argv into `f` (--name value or --name=value); false, with a message
// on stderr, on an unknown flag, a missing value or out-of-range numbers.
bool ParseFlags(int argc, char** argv, Flags* f);

}  // namespace maskd::soak

#endif  // MASKD_BENCH_SOAK_SOAK_FLAGS_H_
