// set_log_sink() and set_log_level() (include/datavo/log.hpp, src/util/log.cpp).
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "datavo/log.hpp"
#include "util/log.hpp"

namespace datavo {
namespace {

class LogSinkTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = log_level(); }
  void TearDown() override {
    set_log_sink({});
    set_log_level(saved_);
  }
  LogLevel saved_ = LogLevel::warning;
};

TEST_F(LogSinkTest, LinesGoToTheSinkAtTheirLevel) {
  std::mutex mu;
  std::vector<std::pair<LogLevel, std::string>> lines;
  set_log_sink([&](LogLevel level, std::string_view message) {
    std::lock_guard lock(mu);
    lines.emplace_back(level, std::string(message));
  });
  set_log_level(LogLevel::info);
  LOG_WARNING("tier " << 3 << " skipped");
  LOG_INFO("promoted");
  LOG_DEBUG("not formatted");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].first, LogLevel::warning);
  EXPECT_EQ(lines[0].second, "tier 3 skipped");
  EXPECT_EQ(lines[1].first, LogLevel::info);
  EXPECT_EQ(log_level(), LogLevel::info);
}

TEST_F(LogSinkTest, ReplacedSinkGetsNothingMoreAndConcurrentLinesAllArrive) {
  std::atomic<int> first{0}, second{0};
  set_log_sink([&](LogLevel, std::string_view) { first.fetch_add(1); });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 100; ++i) LOG_WARNING("line " << i);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(first.load(), 400);
  set_log_sink([&](LogLevel, std::string_view) { second.fetch_add(1); });
  LOG_WARNING("after");
  EXPECT_EQ(first.load(), 400);
  EXPECT_EQ(second.load(), 1);
}

}  // namespace
}  // namespace datavo
