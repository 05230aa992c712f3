// Range and If-None-Match parsing of shard downloads (src/origin/ranges.cpp).
#include <gtest/gtest.h>

#include "origin/ranges.hpp"

namespace datavo::origin {
namespace {

struct RangeCase {
  const char* header;
  RangeOutcome outcome;
  std::uint64_t first = 0;
  std::uint64_t last = 0;
};

TEST(OriginRanges, OneRangeAgainstAHundredBytes) {
  const std::vector<RangeCase> cases = {
      {"bytes=10-19", RangeOutcome::partial, 10, 19},
      {"bytes=0-0", RangeOutcome::partial, 0, 0},
      {"bytes=90-", RangeOutcome::partial, 90, 99},
      {"bytes=-7", RangeOutcome::partial, 93, 99},
      {"bytes=-500", RangeOutcome::partial, 0, 99},
      {"bytes=5-99999999", RangeOutcome::partial, 5, 99},
      {"bytes=100-", RangeOutcome::unsatisfiable},
      {"bytes=150-200", RangeOutcome::unsatisfiable},
      {"bytes=-0", RangeOutcome::unsatisfiable},
      {"bytes=0-1,5-6", RangeOutcome::whole},
      {"items=0-1", RangeOutcome::whole},
      {"bytes=5-3", RangeOutcome::whole},
      {"bytes=a-3", RangeOutcome::whole},
      {"bytes=+1-3", RangeOutcome::whole},
      {"bytes=-", RangeOutcome::whole},
      {"bytes=1", RangeOutcome::whole},
      {"bytes=10000000000000000000-", RangeOutcome::whole},
  };
  for (const auto& c : cases) {
    ByteRange range{7, 7};
    EXPECT_EQ(parse_range(c.header, 100, range), c.outcome) << c.header;
    if (c.outcome == RangeOutcome::partial) {
      EXPECT_EQ(range.first, c.first) << c.header;
      EXPECT_EQ(range.last, c.last) << c.header;
    }
  }
}

TEST(OriginRanges, NothingIsSatisfiableInAnEmptyEntity) {
  ByteRange range;
  EXPECT_EQ(parse_range("bytes=-5", 0, range), RangeOutcome::unsatisfiable);
  EXPECT_EQ(parse_range("bytes=0-", 0, range), RangeOutcome::unsatisfiable);
}

TEST(OriginRanges, IfNoneMatchListsAndWeakTags) {
  const std::string etag = "\"abc\"";
  for (const char* header : {"\"abc\"", "\"x\", \"abc\"", "W/\"abc\"", " \"abc\" ", "*", "\"x\",\t\"abc\""}) {
    EXPECT_TRUE(etag_matches(header, etag)) << header;
  }
  for (const char* header : {"\"x\"", "", "abc", "\"abcd\"", ","}) {
    EXPECT_FALSE(etag_matches(header, etag)) << header;
  }
}

}  // namespace
}  // namespace datavo::origin
