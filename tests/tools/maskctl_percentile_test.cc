// maskctl's one percentile rule (tools/maskctl/percentile.h): nearest rank.
#include "tools/maskctl/percentile.h"

#include <vector>

#include <gtest/gtest.h>

namespace maskctl {
namespace {

TEST(PercentileTest, EmptyIsZero) { EXPECT_EQ(Percentile({}, 0.5), 0); }

TEST(PercentileTest, NearestRankOfOneToTen) {
  const std::vector<double> v = {7, 3, 10, 1, 9, 2, 8, 4, 6, 5};  // 1..10, unsorted
  EXPECT_EQ(Percentile(v, 0), 1);
  EXPECT_EQ(Percentile(v, 0.1), 1);   // ceil(1) = 1st
  EXPECT_EQ(Percentile(v, 0.11), 2);  // ceil(1.1) = 2nd
  EXPECT_EQ(Percentile(v, 0.5), 5);   // ceil(5): the lower middle, never 5.5
  EXPECT_EQ(Percentile(v, 0.99), 10);
  EXPECT_EQ(Percentile(v, 1), 10);
}

TEST(PercentileTest, P99OfAHundredIsTheSecondLargest) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_EQ(Percentile(v, 0.99), 99);  // ceil(99) = 99th of 100
  EXPECT_EQ(Percentile(v, 0.5), 50);
  v.push_back(101);
  EXPECT_EQ(Percentile(v, 0.5), 51);   // ceil(50.5) = 51st of 101: the middle
  EXPECT_EQ(Percentile(v, 0.99), 100);  // ceil(99.99) = 100th
}

TEST(PercentileTest, OneValue) {
  EXPECT_EQ(Percentile({42}, 0), 42);
  EXPECT_EQ(Percentile({42}, 0.5), 42);
  EXPECT_EQ(Percentile({42}, 1), 42);
}

}  // namespace
}  // namespace maskctl
