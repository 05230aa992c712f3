// Tests of src/tier/s3/aws_process_link.cpp: credential_process scripts written into the test's temp dir, run
// without a shell, their JSON read, their failures reported without their output.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "unit/tier/s3/aws_chain_fixture.hpp"

namespace datavo::s3 {
namespace {

using namespace std::chrono_literals;
using namespace chain_test;
using s3test::FakeEcs;
using s3test::LoopbackServer;
using s3test::write_text;
using ::testing::HasSubstr;
using ::testing::Not;

// A credential_process script written into the test's temp dir.
std::string write_process_script(const shardtest::TempDir& dir, const std::string& body) {
  const std::string path = dir.sub("cred-proc.sh");
  write_text(path, "#!/bin/sh\n" + body);
  ::chmod(path.c_str(), 0700);
  return path;
}

TEST_F(CredentialsTest, CredentialProcessRunsWithoutAShellAndItsJsonIsRead) {
  const std::string script =
      write_process_script(dir_,
                           "printf '{\"Version\": 1, \"AccessKeyId\": \"%s\", \"SecretAccessKey\": \"proc-secret\", "
                           "\"SessionToken\": \"%s\", \"Expiration\": \"%s\"}' \"$1\" \"$3\" \"$2\"\n");
  write_text(home_file(".aws/config"),
             "[profile proc]\ncredential_process = " + script + " 'AKID PROC' \"2030-01-02T04:00:00.000Z\" $HOME\n");
  auto found = chain("proc")->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "AKID PROC");  // quoted: one argument, blank kept
  EXPECT_EQ(found->secret_access_key, "proc-secret");
  EXPECT_EQ(found->session_token, "$HOME");  // no shell: nothing is expanded
  ASSERT_TRUE(found->expiration);
  EXPECT_EQ(*found->expiration, k_now + 1h);
  EXPECT_THAT(found->source, HasSubstr("credential_process"));
}

TEST_F(CredentialsTest, StaticKeysOfTheCredentialsFileBeatCredentialProcessWhichBeatsConfigKeys) {
  const std::string script = write_process_script(
      dir_, "echo '{\"Version\": 1, \"AccessKeyId\": \"AKIDPROC\", \"SecretAccessKey\": \"s\"}'\n");
  write_text(home_file(".aws/config"), "[default]\ncredential_process = " + script +
                                           "\naws_access_key_id = AKIDCONFIG\naws_secret_access_key = c\n");
  write_text(home_file(".aws/credentials"), "[default]\naws_access_key_id = AKIDCREDS\naws_secret_access_key = k\n");
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "AKIDCREDS");

  write_text(home_file(".aws/credentials"), "[default]\nregion = us-east-2\n");
  found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "AKIDPROC");
}

TEST_F(CredentialsTest, AFailingCredentialProcessIsAnErrorWithoutItsOutput) {
  std::string script = write_process_script(dir_, "echo '{\"SecretAccessKey\": \"LEAKED-SECRET\"}'\nexit 3\n");
  write_text(home_file(".aws/config"), "[default]\ncredential_process = " + script + "\n");
  auto found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_THAT(found.error().message, HasSubstr("exited with status 3"));
  EXPECT_THAT(found.error().message, Not(HasSubstr("LEAKED-SECRET")));

  write_process_script(dir_,
                       "echo '{\"Version\": 2, \"AccessKeyId\": \"A\", \"SecretAccessKey\": \"LEAKED-SECRET\"}'\n");
  found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_THAT(found.error().message, HasSubstr("Version"));
  EXPECT_THAT(found.error().message, Not(HasSubstr("LEAKED-SECRET")));

  write_text(home_file(".aws/config"), "[default]\ncredential_process = " + dir_.sub("no-such-program") + "\n");
  found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_THAT(found.error().message, HasSubstr("no-such-program"));
}

TEST_F(CredentialsTest, ExpiredCredentialsOfAProcessAreRefusedAndTheProcessRunsOncePerFetch) {
  // Each run appends a line to runs.txt; the answer expired an hour before the fake clock's now.
  const std::string runs = dir_.sub("runs.txt");
  const std::string script = write_process_script(
      dir_, "echo run >> '" + runs +
                "'\nsleep 0.2\necho '{\"Version\": 1, \"AccessKeyId\": \"AKIDOLD\", \"SecretAccessKey\": "
                "\"s\", \"SessionToken\": \"t\", \"Expiration\": \"2030-01-02T02:00:00Z\"}'\n");
  write_text(home_file(".aws/config"), "[default]\ncredential_process = " + script + "\n");
  auto provider = chain();
  std::vector<std::thread> threads;
  std::atomic<int> refused{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      auto found = provider->get();
      if (!found && found.error().code == ErrorCode::permission_denied &&
          found.error().message.find("expired at 2030-01-02T02:00:00Z, 3600 s ago") != std::string::npos)
        ++refused;
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(refused.load(), 4) << "expired credentials are refused, never handed out";
  std::ifstream in(runs);
  const std::string lines((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), 1) << "the callers waiting for the run shared it";
}

TEST_F(CredentialsTest, TheProgramIsFoundInAnAbsoluteDirectoryOfPathOnly) {
  std::filesystem::create_directories(dir_.sub("bin"));
  const std::string script = write_process_script(
      dir_, "echo '{\"Version\": 1, \"AccessKeyId\": \"AKIDPATH\", \"SecretAccessKey\": \"s\"}'\n");
  std::filesystem::rename(script, dir_.sub("bin/datavo-creds"));
  write_text(home_file(".aws/config"), "[default]\ncredential_process = datavo-creds --flag\n");
  fake_.vars["PATH"] = dir_.sub("bin");
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "AKIDPATH");
  // A relative entry is never searched, even when it names the same directory.
  const std::string relative = std::filesystem::relative(dir_.sub("bin")).string();
  fake_.vars["PATH"] = relative + ":.";
  auto refused = chain()->get();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::config);
  EXPECT_THAT(refused.error().message, HasSubstr("datavo-creds is not in an absolute directory of $PATH"));
}

}  // namespace
}  // namespace datavo::s3
