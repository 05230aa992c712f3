// Tests of src/util/rfc3339.cpp: the forms the cloud services write (Z, fractions, offsets), what is refused, and
// the formatter's round trip.
#include <gtest/gtest.h>

#include "util/rfc3339.hpp"

namespace datavo::util {
namespace {

using namespace std::chrono_literals;

const auto k_base = std::chrono::sys_days{std::chrono::year{2024} / 5 / 1} + 12h;

TEST(Rfc3339, TheFormsCloudServicesWrite) {
  EXPECT_EQ(parse_rfc3339("2024-05-01T12:00:00Z"), k_base);
  EXPECT_EQ(parse_rfc3339("2024-05-01t12:00:00z"), k_base);
  EXPECT_EQ(parse_rfc3339("2024-05-01T12:00:00.123Z"), k_base);
  EXPECT_EQ(parse_rfc3339("2024-05-01T12:00:00.123456789Z"), k_base);
  EXPECT_EQ(parse_rfc3339("2024-05-01T14:30:00+02:30"), k_base);
  EXPECT_EQ(parse_rfc3339("2024-05-01T10:00:00-02:00"), k_base);
  EXPECT_EQ(parse_rfc3339("2023-11-14T22:13:20Z"), std::chrono::system_clock::time_point(1'700'000'000s));
}

TEST(Rfc3339, AnythingElseIsRefused) {
  for (const char* bad : {"", "2024-05-01", "2024-05-01 12:00:00Z", "2024-13-01T12:00:00Z", "2024-05-00T12:00:00Z",
                          "2024-05-01T24:00:00Z", "2024-05-01T12:60:00Z", "2024-05-01T12:00:00",
                          "2024-05-01T12:00:00.Z", "2024-05-01T12:00:00+0200", "2024-05-01T12:00:00+24:00",
                          "2024-05-01T12:00:00Zjunk", "+024-05-01T12:00:00Z", "yesterday"})
    EXPECT_FALSE(parse_rfc3339(bad)) << bad;
}

TEST(Rfc3339, FormatRoundTrips) {
  EXPECT_EQ(format_rfc3339(k_base), "2024-05-01T12:00:00Z");
  EXPECT_EQ(parse_rfc3339(format_rfc3339(k_base + 1234567s)), k_base + 1234567s);
  EXPECT_EQ(format_rfc3339(k_base + 900ms), "2024-05-01T12:00:00Z");
}

}  // namespace
}  // namespace datavo::util
