// The hostile mix's hostile actors (bench/soak/hostile_mix.cc): threads
// that attack maskd in hostile phases, each with a connection of its own, and
// the process that runs them apart from the driver (--role hostile) with the
// report it sends back.
#ifndef MASKD_BENCH_SOAK_HOSTILE_ACTORS_H_
#define MASKD_BENCH_SOAK_HOSTILE_ACTORS_H_

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/soak/hostile_mix.h"

namespace maskd::soak::hostile {

class Actor;

// The actors of every kind (Flags: --grammar-actors, ...), one thread each,
// on maskd at sh->addr; each stops when sh->stop is set, after its round.
class HostileActors {
 public:
  HostileActors();
  ~HostileActors();  // joins
  HostileActors(const HostileActors&) = delete;
  HostileActors& operator=(const HostileActors&) = delete;

  // `thread_nice` > 0: added to each actor thread's nice value (Linux: per
  // thread); 0 when the whole process was reniced instead.
  void Start(Shared* sh, int thread_nice);
  // Waits for every actor (set sh->stop first).
  void Join();

 private:
  std::vector<std::unique_ptr<Actor>> actors_;
  std::vector<std::thread> threads_;
};

// The hostile process's report: the actors' tallies and sh.flood_peak as
// text lines (format in hostile_actors.cc), ending with "end".
void WriteActorReport(Shared& sh, FILE* out);
// Reads a report into `sh`: empty when it was whole, else what is wrong.
std::string ReadActorReport(const std::string& text, Shared* sh);

// The hostile process (--role hostile; sh->flags parsed): the actors alone,
// on the driver's phase schedule (--t0-unix-ns), until --seconds or SIGTERM;
// then the report on stdout. Returns the exit status.
int RunHostileChild(Shared* sh);

}  // namespace maskd::soak::hostile

#endif  // MASKD_BENCH_SOAK_HOSTILE_ACTORS_H_
