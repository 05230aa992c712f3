#include "origin/ticket.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>

#include "datavo/content_hash.hpp"
#include "datavo/protocol.hpp"
#include "util/percent.hpp"

namespace datavo::origin {

namespace {

std::string to_hex(const unsigned char* data, std::size_t size) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    out += digits[data[i] >> 4];
    out += digits[data[i] & 0x0f];
  }
  return out;
}

std::string join_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& key : keys) {
    if (!out.empty()) out += ',';
    out += key;
  }
  return out;
}

// The keys as the URL carries them: each percent-encoded, joined by ','.
std::string encoded_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& key : keys) {
    if (!out.empty()) out += ',';
    out += util::percent_encode(key);
  }
  return out;
}

}  // namespace

std::string canonical_ticket_string(const TicketFields& f) {
  return "v1\n" + f.content_hash + "\n" + f.dataset + "\n" + f.split + "\n" + std::to_string(f.revision) + "\n" +
         std::to_string(f.shard_index) + "\n" + join_keys(f.keys) + "\n" + std::to_string(f.expires_at);
}

std::string sign_ticket(std::string_view secret, const TicketFields& fields) {
  std::string message = canonical_ticket_string(fields);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_size = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &mac_size);
  return to_hex(mac, mac_size);
}

bool verify_ticket_signature(std::string_view secret, const TicketFields& fields, std::string_view signature) {
  std::string expected = sign_ticket(secret, fields);
  if (signature.size() != expected.size()) return false;
  return CRYPTO_memcmp(expected.data(), signature.data(), expected.size()) == 0;
}

std::string ticket_url(const TicketFields& f, std::string_view signature) {
  return "/v1/shards/" + f.content_hash + ".tar?dataset=" + util::percent_encode(f.dataset) +
         "&split=" + util::percent_encode(f.split) + "&rev=" + std::to_string(f.revision) +
         "&shard=" + std::to_string(f.shard_index) + "&keys=" + encoded_keys(f.keys) +
         "&exp=" + std::to_string(f.expires_at) + "&sig=" + util::percent_encode(signature);
}

Result<ParsedTicket> parse_ticket(std::string_view content_hash,
                                  const std::function<std::optional<std::string>(std::string_view)>& param) {
  ParsedTicket ticket;
  auto require = [&](std::string_view name) -> Result<std::string> {
    auto value = param(name);
    if (!value) return Error::invalid_argument("ticket parameter \"" + std::string(name) + "\" is missing");
    return std::move(*value);
  };
  auto number = [&](std::string_view name, std::uint64_t min) -> Result<std::uint64_t> {
    auto text = require(name);
    if (!text) return text.error();
    auto value = protocol::parse_number(*text, min);
    if (!value) return Error::invalid_argument("ticket parameter \"" + std::string(name) + "\" is not a valid number");
    return *value;
  };
  if (!ContentHash::parse(content_hash)) return Error::invalid_argument("the shard name is not a content hash");
  ticket.fields.content_hash = std::string(content_hash);
  auto dataset = require("dataset");
  if (!dataset) return dataset.error();
  DATAVO_TRY(protocol::validate_name("dataset", *dataset));
  ticket.fields.dataset = std::move(dataset).value();
  auto split = require("split");
  if (!split) return split.error();
  DATAVO_TRY(protocol::validate_name("split", *split));
  ticket.fields.split = std::move(split).value();
  auto revision = number("rev", 1);
  if (!revision) return revision.error();
  ticket.fields.revision = *revision;
  auto shard = number("shard", 0);
  if (!shard) return shard.error();
  ticket.fields.shard_index = *shard;
  auto keys = require("keys");
  if (!keys) return keys.error();
  std::string_view rest = *keys;
  for (;;) {
    auto comma = rest.find(',');
    std::string_view key = rest.substr(0, comma);
    DATAVO_TRY(protocol::validate_name("key", key));
    ticket.fields.keys.emplace_back(key);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (!std::is_sorted(ticket.fields.keys.begin(), ticket.fields.keys.end()) ||
      std::adjacent_find(ticket.fields.keys.begin(), ticket.fields.keys.end()) != ticket.fields.keys.end()) {
    return Error::invalid_argument("ticket parameter \"keys\" is not sorted and unique");
  }
  auto exp = number("exp", 0);
  if (!exp) return exp.error();
  ticket.fields.expires_at = static_cast<std::int64_t>(*exp);
  auto sig = require("sig");
  if (!sig) return sig.error();
  ticket.signature = std::move(sig).value();
  return ticket;
}

}  // namespace datavo::origin
