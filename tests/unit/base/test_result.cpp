#include <errno.h>
#include <gtest/gtest.h>

#include <iterator>
#include <set>
#include <string>

#include "datavo/result.hpp"

namespace datavo {
namespace {

TEST(Result, EveryErrorCodeHasItsOwnName) {
  const ErrorCode codes[] = {ErrorCode::invalid_argument,  ErrorCode::config,    ErrorCode::io,
                             ErrorCode::permission_denied, ErrorCode::no_space,  ErrorCode::not_found,
                             ErrorCode::capacity,          ErrorCode::integrity, ErrorCode::remote,
                             ErrorCode::timeout,           ErrorCode::conflict,  ErrorCode::unsupported,
                             ErrorCode::internal,          ErrorCode::cancelled};
  std::set<std::string> names;
  for (ErrorCode code : codes) names.insert(to_string(code));
  EXPECT_EQ(names.size(), std::size(codes));
  EXPECT_STREQ(to_string(ErrorCode::no_space), "no_space");
}

TEST(Result, FromErrnoMapsTheKindsCallersBranchOn) {
  EXPECT_EQ(Error::from_errno(ENOSPC, "x").code, ErrorCode::no_space);
  EXPECT_EQ(Error::from_errno(EROFS, "x").code, ErrorCode::permission_denied);
  EXPECT_EQ(Error::from_errno(ENOENT, "x").code, ErrorCode::not_found);
  Error error = Error::from_errno(EIO, "reading /a/b");
  EXPECT_EQ(error.code, ErrorCode::io);
  EXPECT_EQ(error.sys_errno, EIO);
  EXPECT_NE(error.message.find("reading /a/b"), std::string::npos) << error.message;
}

TEST(Result, UnreachableIsARemoteErrorThatNeverReachedAServer) {
  for (int err : {ECONNREFUSED, EHOSTUNREACH, ENETUNREACH})
    EXPECT_TRUE(is_unreachable(Error{ErrorCode::remote, "x", err})) << err;
  EXPECT_FALSE(is_unreachable(Error{ErrorCode::remote, "HTTP 503", 0}));
  EXPECT_FALSE(is_unreachable(Error{ErrorCode::remote, "reset", ECONNRESET}));  // it may have reached the server
  EXPECT_FALSE(is_unreachable(Error{ErrorCode::io, "x", ECONNREFUSED}));
}

TEST(Result, BadInputNamingSomethingAbsentIsReportedAsNotFound) {
  // An unknown dataset, split, revision or key (include/datavo/dataset.hpp): one name in the CLI and the SDK.
  EXPECT_STREQ(reported_code(Error{ErrorCode::invalid_argument, "no such dataset", ENOENT}), "not_found");
  EXPECT_STREQ(reported_code(Error{ErrorCode::invalid_argument, "bad name"}), "invalid_argument");
  EXPECT_STREQ(reported_code(Error{ErrorCode::io, "x", ENOENT}), "io");
  EXPECT_STREQ(reported_code(Error::from_errno(ENOENT, "x")), "not_found");
  EXPECT_STREQ(reported_code(Error{ErrorCode::remote, "HTTP 503"}), "remote");
}

}  // namespace
}  // namespace datavo
