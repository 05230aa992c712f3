// The error body of the protocol (src/protocol/error_body.cpp).
#include <gtest/gtest.h>

#include "datavo/protocol.hpp"

namespace datavo {
namespace {

TEST(ProtocolErrorBody, RoundTripsAndHasTheDocumentedShape) {
  const ErrorBody body{protocol::error_code_for_status(404), "unknown dataset \"x\""};
  EXPECT_EQ(body.to_json(), R"({"error":{"code":"not_found","message":"unknown dataset \"x\""}})");
  auto parsed = ErrorBody::parse(body.to_json());
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(*parsed, body);
}

TEST(ProtocolErrorBody, InvalidUtf8InAMessageIsReplacedNotThrown) {
  const ErrorBody body{"bad_request", std::string("bad \xff name")};
  auto parsed = ErrorBody::parse(body.to_json());
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->message, "bad \xEF\xBF\xBD name");
}

TEST(ProtocolErrorBody, CodesOfEveryDocumentedStatus) {
  const std::vector<std::pair<int, std::string>> cases = {
      {400, "bad_request"},        {401, "unauthorized"}, {403, "forbidden"},         {404, "not_found"},
      {405, "method_not_allowed"}, {410, "expired"},      {413, "payload_too_large"}, {416, "range_not_satisfiable"},
      {500, "internal"},           {502, "internal"},     {503, "unavailable"},       {418, "error"},
  };
  for (const auto& [status, code] : cases) EXPECT_EQ(protocol::error_code_for_status(status), code) << status;
}

TEST(ProtocolErrorBody, MalformedBodiesAreRefusedNamingTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"<html>", "not JSON"},
      {"[]", "not a JSON object"},
      {R"({"message":"x"})", "\"error\""},
      {R"({"error":"x"})", "\"error\""},
      {R"({"error":{"message":"x"}})", "\"error.code\""},
      {R"({"error":{"code":"x","message":7}})", "\"error.message\""},
  };
  for (const auto& [text, needle] : cases) {
    auto parsed = ErrorBody::parse(text);
    ASSERT_FALSE(parsed) << text;
    EXPECT_EQ(parsed.error().code, ErrorCode::remote);
    EXPECT_NE(parsed.error().message.find(needle), std::string::npos) << parsed.error().message;
  }
}

}  // namespace
}  // namespace datavo
