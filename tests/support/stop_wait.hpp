// Helpers for the tests of waits that a stopped caller leaves (util::StopScope, src/util/cancel.hpp): a wait for a
// lock that another holder keeps, run on a thread of its own and stopped while it waits. Header-only test support.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "datavo/result.hpp"
#include "util/cancel.hpp"

namespace datavo::stoptest {

// Runs `wait` (returning Result<void>) on a thread of its own inside a StopScope, and stops its token once it has
// waited 200 ms. A wait that ended before the stop, or that does not end within 10 s of it, fails the test. Returns
// what `wait` returned.
template <typename Wait>
Result<void> wait_and_stop(Wait wait) {
  util::StopToken token;
  std::promise<Result<void>> result;
  std::thread waiter([&] {
    util::StopScope scope(token);
    result.set_value(wait());
  });
  auto future = result.get_future();
  const bool returned_early = future.wait_for(std::chrono::milliseconds(200)) == std::future_status::ready;
  token.request_stop();
  const bool returned = future.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!returned) {
    ADD_FAILURE() << "the waiter did not leave the wait within 10 s of being stopped";
    waiter.detach();  // it is stuck; the test has failed
    return Error{ErrorCode::internal, "stuck"};
  }
  waiter.join();
  if (returned_early) ADD_FAILURE() << "the wait ended before it was stopped, while the lock was held";
  return future.get();
}

// The wait left with cancelled, as a stopped StopScope says ("no longer needed").
inline void expect_stopped(const Result<void>& waited) {
  ASSERT_FALSE(waited) << "the wait succeeded while the lock was held";
  EXPECT_EQ(waited.error().code, ErrorCode::cancelled) << waited.error().message;
  EXPECT_NE(waited.error().message.find("no longer needed"), std::string::npos) << waited.error().message;
}

}  // namespace datavo::stoptest
