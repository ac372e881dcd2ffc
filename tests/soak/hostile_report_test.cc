// The hostile mix's report from its hostile process (bench/soak/
// hostile_actors.h): tallies written by WriteActorReport come back whole
// through ReadActorReport, messages with newlines and quotes included; a
// report cut short, empty or garbled is refused with the reason.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "bench/soak/hostile_actors.h"
#include "bench/soak/hostile_mix.h"
#include "gtest/gtest.h"

namespace maskd::soak::hostile {
namespace {

std::string Written(Shared& sh) {
  char* buf = nullptr;
  size_t size = 0;
  FILE* out = open_memstream(&buf, &size);
  WriteActorReport(sh, out);
  std::fclose(out);
  std::string text(buf, size);
  std::free(buf);
  return text;
}

TEST(HostileReportTest, TalliesComeBackWhole) {
  Shared from;
  from.grammar.Count(absl::OkStatus());
  from.grammar.Count(absl::OkStatus());
  from.grammar.Count(absl::ResourceExhaustedError("two\nlines, \"quoted\", caf\xc3\xa9 \\ end"));
  from.flood.Count(absl::ResourceExhaustedError("share"));
  from.compile.Count(absl::DeadlineExceededError("late"));
  from.compile.Count(absl::UnavailableError("gone"));
  from.flood_peak.store(10000);
  Shared to;
  EXPECT_EQ(ReadActorReport(Written(from), &to), "");
  EXPECT_EQ(to.grammar.attempts.load(), 3);
  EXPECT_EQ(to.grammar.by_code[0].load(), 2);
  EXPECT_EQ(to.grammar.by_code[static_cast<int>(absl::StatusCode::kResourceExhausted)].load(), 1);
  absl::MutexLock l(&to.grammar.mu);
  EXPECT_EQ(to.grammar.first_message[static_cast<int>(absl::StatusCode::kResourceExhausted)],
            "two\nlines, \"quoted\", caf\xc3\xa9 \\ end");
  EXPECT_EQ(to.flood.attempts.load(), 1);
  EXPECT_EQ(to.abandon.attempts.load(), 0);
  EXPECT_EQ(to.compile.by_code[static_cast<int>(absl::StatusCode::kUnavailable)].load(), 1);
  EXPECT_EQ(to.flood_peak.load(), 10000);
}

TEST(HostileReportTest, EmptyReportIsRefused) {
  Shared to;
  EXPECT_EQ(ReadActorReport("", &to), "it reported nothing");
}

TEST(HostileReportTest, ReportCutShortIsRefused) {
  Shared from;
  from.flood.Count(absl::OkStatus());
  std::string text = Written(from);
  text.resize(text.rfind("end\n"));  // no end line
  Shared to;
  EXPECT_EQ(ReadActorReport(text, &to), "its report has no end line (cut short)");
}

TEST(HostileReportTest, GarbledLinesAreRefused) {
  for (const char* bad : {"actor nosuch attempts 1\nend\n", "actor flood attempts many\nend\n",
                          "actor flood code 17 1\nend\n", "hello\nend\n"}) {
    Shared to;
    EXPECT_NE(ReadActorReport(bad, &to).find("unreadable report line"), std::string::npos) << bad;
  }
  Shared to;
  EXPECT_EQ(ReadActorReport("end\nflood_peak 3\n", &to), "its report goes on after its end line");
}

}  // namespace
}  // namespace maskd::soak::hostile
