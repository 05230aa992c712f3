// The server's error and JSON answers (src/origin/responses.cpp).
#include <gtest/gtest.h>

#include "datavo/protocol.hpp"
#include "origin/responses.hpp"

namespace datavo::origin {
namespace {

TEST(OriginResponses, AnErrorIsTheProtocolsErrorBody) {
  httplib::Response res;
  send_error(res, 410, "the ticket expired");
  EXPECT_EQ(res.status, 410);
  EXPECT_EQ(res.get_header_value("Content-Type"), "application/json");
  auto body = ErrorBody::parse(res.body);
  ASSERT_TRUE(body) << body.error().message;
  EXPECT_EQ(*body, (ErrorBody{"expired", "the ticket expired"}));

  httplib::Response refused;
  send_refusal(refused, Refusal{404, "unknown dataset"});
  EXPECT_EQ(refused.status, 404);
  EXPECT_EQ(ErrorBody::parse(refused.body)->code, "not_found");
}

TEST(OriginResponses, AStoreFailureIsA500ThatNamesNoPath) {
  const Refusal refusal = store_failure(Error{ErrorCode::integrity, "/srv/store/datasets/x/LATEST: malformed"});
  EXPECT_EQ(refusal.status, 500);
  EXPECT_EQ(refusal.message, "the store failed: integrity");
}

TEST(OriginResponses, JsonAnswersKeepTheirStatus) {
  httplib::Response res;
  send_json(res, R"({"status":"preparing"})", 202);
  EXPECT_EQ(res.status, 202);
  EXPECT_EQ(res.body, R"({"status":"preparing"})");
  EXPECT_EQ(res.get_header_value("Content-Type"), "application/json");
}

}  // namespace
}  // namespace datavo::origin
