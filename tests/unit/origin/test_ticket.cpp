#include <gtest/gtest.h>

#include <map>

#include "origin/ticket.hpp"

namespace datavo::origin {
namespace {

TicketFields sample_fields() {
  TicketFields f;
  f.content_hash = "1d8dd7d43d1a547d426d0bdb41c0d851d027688e32889961ca28130a389d21c3";
  f.dataset = "voice_demo_v1";
  f.split = "train";
  f.revision = 42;
  f.shard_index = 3;
  f.keys = {"audio.wav", "transcript.txt"};
  f.expires_at = 1764412800;
  return f;
}

constexpr std::string_view k_secret = "0123456789abcdef0123456789abcdef";

TEST(OriginTicket, CanonicalStringIsTheDocumentedOne) {
  EXPECT_EQ(canonical_ticket_string(sample_fields()),
            "v1\n1d8dd7d43d1a547d426d0bdb41c0d851d027688e32889961ca28130a389d21c3\nvoice_demo_v1\ntrain\n42\n3\n"
            "audio.wav,transcript.txt\n1764412800");
}

TEST(OriginTicket, SignatureMatchesAnIndependentHmacSha256) {
  // python3: hmac.new(secret, canonical, hashlib.sha256).hexdigest()
  EXPECT_EQ(sign_ticket(k_secret, sample_fields()), "ee59524598621e93d266d8afda2ecf101bb82fd290701a91cb49a136ce868533");
}

TEST(OriginTicket, VerifyRefusesAnyChangedField) {
  const auto fields = sample_fields();
  const std::string sig = sign_ticket(k_secret, fields);
  EXPECT_TRUE(verify_ticket_signature(k_secret, fields, sig));
  EXPECT_FALSE(verify_ticket_signature("another secret, 32 characters...", fields, sig));
  EXPECT_FALSE(verify_ticket_signature(k_secret, fields, sig.substr(1)));
  EXPECT_FALSE(verify_ticket_signature(k_secret, fields, ""));
  std::string flipped = sig;
  flipped[10] = flipped[10] == '0' ? '1' : '0';
  EXPECT_FALSE(verify_ticket_signature(k_secret, fields, flipped));

  auto changed = fields;
  changed.revision = 41;
  EXPECT_FALSE(verify_ticket_signature(k_secret, changed, sig));
  changed = fields;
  changed.expires_at += 1;
  EXPECT_FALSE(verify_ticket_signature(k_secret, changed, sig));
  changed = fields;
  changed.keys = {"audio.wav"};
  EXPECT_FALSE(verify_ticket_signature(k_secret, changed, sig));
  changed = fields;
  changed.shard_index = 4;
  EXPECT_FALSE(verify_ticket_signature(k_secret, changed, sig));
  changed = fields;
  changed.split = "test";
  EXPECT_FALSE(verify_ticket_signature(k_secret, changed, sig));
}

// Decodes the query of a ticket URL the simple way (the names in it need no decoding).
std::map<std::string, std::string> query_of(const std::string& url) {
  std::map<std::string, std::string> params;
  std::string query = url.substr(url.find('?') + 1);
  std::size_t begin = 0;
  while (begin < query.size()) {
    std::size_t end = query.find('&', begin);
    if (end == std::string::npos) end = query.size();
    std::string pair = query.substr(begin, end - begin);
    auto eq = pair.find('=');
    params[pair.substr(0, eq)] = pair.substr(eq + 1);
    begin = end + 1;
  }
  return params;
}

TEST(OriginTicket, UrlRoundTrips) {
  const auto fields = sample_fields();
  const std::string sig = sign_ticket(k_secret, fields);
  const std::string url = ticket_url(fields, sig);
  EXPECT_EQ(url.substr(0, url.find('?')), "/v1/shards/" + fields.content_hash + ".tar");
  auto params = query_of(url);
  auto parsed = parse_ticket(fields.content_hash, [&](std::string_view name) -> std::optional<std::string> {
    auto it = params.find(std::string(name));
    return it == params.end() ? std::nullopt : std::optional<std::string>(it->second);
  });
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->signature, sig);
  EXPECT_EQ(canonical_ticket_string(parsed->fields), canonical_ticket_string(fields));
}

TEST(OriginTicket, ParseRefusesMalformedParameters) {
  const auto fields = sample_fields();
  const auto good = query_of(ticket_url(fields, sign_ticket(k_secret, fields)));
  struct Case {
    std::string param;
    std::optional<std::string> value;  // nullopt: removed
  };
  const std::vector<Case> cases = {
      {"sig", std::nullopt},
      {"exp", std::nullopt},
      {"exp", "-5"},
      {"exp", "12a"},
      {"rev", "0"},
      {"rev", "007"},
      {"shard", ""},
      {"keys", ""},
      {"keys", "b.txt,a.txt"},
      {"keys", "a,a"},
      {"keys", "../x"},
      {"dataset", ".."},
      {"dataset", "a/b"},
      {"split", std::string("tr\0in", 5)},
      {"dataset", std::nullopt},
  };
  for (const auto& c : cases) {
    auto params = good;
    if (c.value)
      params[c.param] = *c.value;
    else
      params.erase(c.param);
    auto parsed = parse_ticket(fields.content_hash, [&](std::string_view name) -> std::optional<std::string> {
      auto it = params.find(std::string(name));
      return it == params.end() ? std::nullopt : std::optional<std::string>(it->second);
    });
    EXPECT_FALSE(parsed) << c.param << "=" << c.value.value_or("<absent>");
    if (!parsed) {
      EXPECT_EQ(parsed.error().code, ErrorCode::invalid_argument);
    }
  }
  auto not_a_hash = parse_ticket("../../secret", [](std::string_view) { return std::optional<std::string>("1"); });
  EXPECT_FALSE(not_a_hash);
}

}  // namespace
}  // namespace datavo::origin
