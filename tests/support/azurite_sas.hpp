// Test support for the Azure tests that talk to Azurite (tests/conformance/harness_azure.cpp,
// tests/unit/tier/azure/test_azurite_live.cpp): a CredentialEnv made of given variables, and an account SAS signed
// here with OpenSSL, independently of src/tier/azure/shared_key.cpp, so that Azurite's acceptance checks our SAS
// handling against a signer that is not ours.
#pragma once

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <chrono>
#include <ctime>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include "tier/cloud/credential_env.hpp"
#include "util/percent.hpp"

namespace datavo::azuretest {

// An environment with exactly `vars` set, on the wall clock.
inline cloud::CredentialEnv env_of(std::map<std::string, std::string> vars) {
  cloud::CredentialEnv env;
  env.getenv = [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  return env;
}

// The base64 HMAC-SHA256 of `text` under the base64 key `key_base64`.
inline std::string hmac_sha256_base64(const std::string& key_base64, const std::string& text) {
  std::string key(key_base64.size(), '\0');
  const int size = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(key.data()),
                                   reinterpret_cast<const unsigned char*>(key_base64.data()), int(key_base64.size()));
  if (size < 0) throw std::runtime_error("the account key is not base64");
  key.resize(std::size_t(size) - (key_base64.ends_with("==") ? 2 : key_base64.ends_with("=") ? 1 : 0));
  unsigned char mac[32];
  unsigned int mac_size = 0;
  HMAC(EVP_sha256(), key.data(), int(key.size()), reinterpret_cast<const unsigned char*>(text.data()), text.size(), mac,
       &mac_size);
  std::string out(64, '\0');
  out.resize(std::size_t(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), mac, int(mac_size))));
  return out;
}

inline std::string utc(cloud::WallClock::time_point time) {
  const std::time_t seconds = cloud::WallClock::to_time_t(time);
  std::tm tm{};
  ::gmtime_r(&seconds, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

enum class SasSignature { valid, tampered };

// An account SAS ("Create an account SAS", version 2020-12-06 and later: the string-to-sign ends with the
// encryption scope and a newline) for blobs: services, containers and objects; read, write, delete, list, add,
// create; valid from 5 minutes ago for `lifetime`. SasSignature::tampered changes one character of the signature.
inline std::string account_sas(const std::string& account, const std::string& key, std::chrono::seconds lifetime,
                               SasSignature signature = SasSignature::valid) {
  using namespace std::chrono_literals;
  const std::string sv = "2021-12-02", ss = "b", srt = "sco", sp = "rwdlac", spr = "https,http";
  const std::string st = utc(cloud::WallClock::now() - 5min), se = utc(cloud::WallClock::now() + lifetime);
  const std::string string_to_sign =
      account + "\n" + sp + "\n" + ss + "\n" + srt + "\n" + st + "\n" + se + "\n" + "\n" + spr + "\n" + sv + "\n\n";
  std::string sig = hmac_sha256_base64(key, string_to_sign);
  if (signature == SasSignature::tampered) sig[0] = sig[0] == 'A' ? 'B' : 'A';
  auto q = [](const std::string& v) { return util::percent_encode(v); };
  return "sv=" + sv + "&ss=" + ss + "&srt=" + srt + "&sp=" + sp + "&st=" + q(st) + "&se=" + q(se) + "&spr=" + q(spr) +
         "&sig=" + q(sig);
}

}  // namespace datavo::azuretest
