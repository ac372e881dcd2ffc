#include "bench/soak/soak_flags.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/soak/flag_pairs.h"

namespace maskd::soak {

bool ParseFlags(int argc, char** argv, Flags* f) {
  auto set = [f](const std::string& a, const std::string& v) {
    if (a == "--seconds") f->seconds = atof(v.c_str());
    else if (a == "--workers") f->workers = atoi(v.c_str());
    else if (a == "--kill-every") f->kill_every = atof(v.c_str());
    else if (a == "--warmup") f->warmup = atof(v.c_str());
    else if (a == "--flat-min-samples") f->flat_min_samples = atoi(v.c_str());
    else if (a == "--rss-tolerance-mb") f->rss_tolerance_mb = atof(v.c_str());
    else if (a == "--fd-tolerance") f->fd_tolerance = atoi(v.c_str());
    else if (a == "--shm") f->shm = atoi(v.c_str()) != 0;
    else if (a == "--seed") f->seed = strtoull(v.c_str(), nullptr, 10);
    else if (a == "--maskd") f->maskd = v;
    else if (a == "--tokenizer-dir") f->tokenizer_dir = v;
    else if (a == "--dir") f->dir = v;
    else if (a == "--samples-csv") f->samples_csv = v;
    else return false;
    return true;
  };
  if (!ReadFlagPairs(argc, argv, "maskd_soak", &f->command, set)) return false;
  if (f->seconds <= 0 || f->workers < 1 || f->workers > 64) {
    std::fprintf(stderr, "maskd_soak: need --seconds > 0 and 1 <= --workers <= 64\n");
    return false;
  }
  return true;
}

}  // namespace maskd::soak
