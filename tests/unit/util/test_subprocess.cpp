// Tests of src/util/subprocess.cpp: output and exit status, the timeout that kills the program (and what it
// started), and the PATH lookup that never uses relative directories.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "support/temp_dir.hpp"
#include "util/subprocess.hpp"

namespace datavo::util {
namespace {

using namespace std::chrono_literals;

TEST(UtilSubprocess, CapturesStdoutStderrAndTheExitStatusWithoutAShell) {
  auto run = run_program("/bin/sh", {"sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(run) << run.error().message;
  EXPECT_EQ(run->exit_code, 3);
  EXPECT_EQ(run->out, "out\n");
  EXPECT_EQ(run->err, "err\n");
  // argv is passed as is: no word splitting, no globbing.
  auto echo = run_program("/bin/echo", {"echo", "a b", "*"});
  ASSERT_TRUE(echo);
  EXPECT_EQ(echo->out, "a b *\n");
}

TEST(UtilSubprocess, ATimeoutKillsTheProgramAndWhatItStarted) {
  shardtest::TempDir dir;
  const std::string marker = dir.sub("grandchild-alive");
  const auto started = std::chrono::steady_clock::now();
  // The grandchild would touch the marker after 1 s unless the process group is killed.
  auto run =
      run_program("/bin/sh", {"sh", "-c", "(sleep 1; touch " + marker + ") & sleep 30"}, RunOptions{.timeout = 300ms});
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(run);
  EXPECT_EQ(run.error().code, ErrorCode::timeout);
  EXPECT_LT(took, 5s);
  std::this_thread::sleep_for(1500ms);
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the grandchild survived the timeout";
}

TEST(UtilSubprocess, OutputIsBounded) {
  auto run = run_program("/bin/sh", {"sh", "-c", "head -c 100000 /dev/zero"}, RunOptions{.max_output = 1000});
  ASSERT_TRUE(run);
  EXPECT_EQ(run->out.size(), 1000u);
  EXPECT_EQ(run->exit_code, 0);
}

TEST(UtilSubprocess, FindInPathSkipsRelativeAndEmptyEntries) {
  shardtest::TempDir dir;
  std::filesystem::create_directories(dir.sub("bin"));
  const std::string tool = dir.sub("bin/tool");
  std::ofstream(tool) << "#!/bin/sh\n";
  ::chmod(tool.c_str(), 0755);
  EXPECT_EQ(find_in_path("tool", "/nonexistent::" + dir.sub("bin")), tool);
  EXPECT_EQ(find_in_path("tool", "/nonexistent"), std::nullopt);
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  EXPECT_EQ(find_in_path("tool", "bin:."), std::nullopt) << "relative PATH entries must be ignored";
  std::filesystem::current_path(cwd);
  EXPECT_EQ(find_in_path("bin/tool", "/"), std::nullopt);
}

}  // namespace
}  // namespace datavo::util
