// Tests of src/tier/cloud/credential_env.cpp: empty variables count as unset, a missing getenv or clock has a
// safe meaning, and "~" expands to the home directory only when there is one.
#include <gtest/gtest.h>

#include "tier/cloud/credential_env.hpp"

namespace datavo::cloud {
namespace {

TEST(CredentialEnv, EmptyIsUnset) {
  CredentialEnv env;
  env.getenv = [](const std::string& name) -> std::optional<std::string> {
    if (name == "EMPTY") return std::string();
    if (name == "SET") return std::string("value");
    return std::nullopt;
  };
  EXPECT_EQ(env.get("SET"), "value");
  EXPECT_EQ(env.get("EMPTY"), std::nullopt);
  EXPECT_EQ(env.get("UNSET"), std::nullopt);
}

TEST(CredentialEnv, ADefaultEnvironmentHasNoVariablesAndTheSystemClock) {
  CredentialEnv env;
  EXPECT_EQ(env.get("PATH"), std::nullopt);
  EXPECT_NE(env.clock_or_system(), nullptr);
  const auto before = WallClock::now();
  EXPECT_GE(env.now(), before);
}

TEST(CredentialEnv, HomeExpansion) {
  CredentialEnv env;
  env.home = "/home/u";
  EXPECT_EQ(env.expand_home("~/.aws/config"), "/home/u/.aws/config");
  EXPECT_EQ(env.expand_home("~"), "/home/u");
  EXPECT_EQ(env.expand_home("~other/x"), "~other/x");
  EXPECT_EQ(env.expand_home("/abs/~/x"), "/abs/~/x");
  env.home.clear();
  EXPECT_EQ(env.expand_home("~/.aws/config"), "~/.aws/config");
}

TEST(CredentialEnv, FromProcessReadsTheProcessEnvironment) {
  ::setenv("DATAVO_CREDENTIAL_ENV_TEST", "x", 1);
  const auto env = CredentialEnv::from_process();
  EXPECT_EQ(env.get("DATAVO_CREDENTIAL_ENV_TEST"), "x");
  ::unsetenv("DATAVO_CREDENTIAL_ENV_TEST");
  EXPECT_EQ(env.get("DATAVO_CREDENTIAL_ENV_TEST"), std::nullopt);
}

}  // namespace
}  // namespace datavo::cloud
