// Tests of src/tier/cloud/credential_chain.cpp: links are asked in order, one that does not apply is passed over
// with its reason, one that fails ends the walk, the first that answers is kept for every refresh, and a chain
// where nothing applies says what it tried.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tier/cloud/credential_chain.hpp"

namespace datavo::cloud {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

// A link that answers as the test says, and counts its fetches.
class ScriptedLink final : public CredentialLink<AccessToken> {
 public:
  enum class Answer { token, skip, fail };
  ScriptedLink(std::string name, Answer initial) : name_(std::move(name)), answer(initial) {}
  std::string name() const override { return name_; }
  Result<std::optional<AccessToken>> fetch(std::string& why) override {
    ++fetches;
    switch (answer) {
      case Answer::token:
        return std::optional<AccessToken>(AccessToken{name_ + "-" + std::to_string(fetches), WallClock::now() + 1h});
      case Answer::skip: why = "not configured here"; return std::optional<AccessToken>();
      case Answer::fail: return Error{ErrorCode::remote, name_ + " is broken"};
    }
    return std::optional<AccessToken>();
  }

  const std::string name_;
  Answer answer;
  int fetches = 0;
};

struct Chain {
  std::vector<ScriptedLink*> links;
  std::shared_ptr<ChainProvider<AccessToken>> provider;
};

Chain make_chain(std::vector<ScriptedLink::Answer> answers) {
  Chain chain;
  std::vector<std::unique_ptr<CredentialLink<AccessToken>>> links;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    auto link = std::make_unique<ScriptedLink>("link" + std::to_string(i), answers[i]);
    chain.links.push_back(link.get());
    links.push_back(std::move(link));
  }
  chain.provider = std::make_shared<ChainProvider<AccessToken>>(CredentialEnv{}, "the test chain", std::move(links),
                                                                "no test credentials found");
  return chain;
}

using Answer = ScriptedLink::Answer;

TEST(CredentialChain, TheFirstLinkThatAnswersIsUsedAndKept) {
  auto chain = make_chain({Answer::skip, Answer::token, Answer::token});
  EXPECT_EQ(chain.provider->describe(), "the test chain");
  auto token = chain.provider->get();
  ASSERT_TRUE(token) << token.error().message;
  EXPECT_EQ(token->token, "link1-1");
  EXPECT_EQ(chain.provider->describe(), "link1");
  EXPECT_EQ(chain.links[2]->fetches, 0);
  // A refresh asks the kept link alone, even if one above it would answer now.
  chain.links[0]->answer = Answer::token;
  chain.provider->invalidate();
  EXPECT_EQ(chain.provider->get()->token, "link1-2");
  EXPECT_EQ(chain.links[0]->fetches, 1);
}

TEST(CredentialChain, AFailingLinkEndsTheWalk) {
  auto chain = make_chain({Answer::skip, Answer::fail, Answer::token});
  auto token = chain.provider->get();
  ASSERT_FALSE(token);
  EXPECT_EQ(token.error().code, ErrorCode::remote);
  EXPECT_THAT(token.error().message, HasSubstr("link1 is broken"));
  EXPECT_EQ(chain.links[2]->fetches, 0);
}

TEST(CredentialChain, NothingFoundListsEveryLinkAndWhy) {
  auto chain = make_chain({Answer::skip, Answer::skip});
  auto token = chain.provider->get();
  ASSERT_FALSE(token);
  EXPECT_EQ(token.error().code, ErrorCode::permission_denied);
  EXPECT_EQ(token.error().message,
            "no test credentials found; tried: link0: not configured here; link1: not configured here");
}

TEST(CredentialChain, AKeptLinkThatNoLongerAppliesIsAnError) {
  auto chain = make_chain({Answer::token});
  ASSERT_TRUE(chain.provider->get());
  chain.links[0]->answer = Answer::skip;
  chain.provider->invalidate();
  auto token = chain.provider->get();
  ASSERT_FALSE(token);
  EXPECT_EQ(token.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(token.error().message, HasSubstr("link0 no longer gives credentials: not configured here"));
}

}  // namespace
}  // namespace datavo::cloud
