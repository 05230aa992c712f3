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

TEST(HttpDate, TheImfFixdateFormAzureWritesInListings) {
  EXPECT_EQ(parse_http_date("Wed, 01 May 2024 12:00:00 GMT"), k_base);
  EXPECT_EQ(parse_http_date("Wed, 01 May 2024 12:00:07 GMT"), k_base + 7s);
  EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            std::chrono::sys_days{std::chrono::year{1994} / 11 / 6} + 8h + 49min + 37s);
  EXPECT_EQ(parse_http_date("Thu, 31 Dec 2026 23:59:59 GMT"),
            std::chrono::sys_days{std::chrono::year{2026} / 12 / 31} + 23h + 59min + 59s);
}

TEST(HttpDate, OtherFormsAndBadFieldsAreRefused) {
  for (const char* bad :
       {"", "Wed, 01 May 2024 12:00:00 UTC", "Wed, 01 May 2024 12:00:00 +0000", "Wednesday, 01-May-24 12:00:00 GMT",
        "Wed May  1 12:00:00 2024", "Wed, 1 May 2024 12:00:00 GMT", "Wed, 01 Mai 2024 12:00:00 GMT",
        "Wed, 01 ayJ 2024 12:00:00 GMT", "Wed, 32 May 2024 12:00:00 GMT", "Wed, 01 May 2024 24:00:00 GMT",
        "Wed, 01 May 2024 12:60:00 GMT", "Wed, 01 May 2024 12:00:00 GMT ", "2024-05-01T12:00:00Z"}) {
    EXPECT_EQ(parse_http_date(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace datavo::util
