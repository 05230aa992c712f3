// Typed reads of JSON objects for the protocol's parsers (and the origin store's files): every refusal is an
// Error of one code whose message names the field, as "<context>"<path><field>" <problem>".
//
// Thread safety: a JsonFields reads an object it does not own; it lives no longer than that object.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/result.hpp"

namespace datavo::protocol {

// `text` parsed as one JSON object. Else an Error of `code`: "<context>not JSON" or "<context>not a JSON object".
Result<nlohmann::json> parse_object(std::string_view text, ErrorCode code, std::string_view context);

// The compact text of `value`, with any invalid UTF-8 replaced (so that writing never throws).
std::string dump(const nlohmann::json& value);

class JsonFields {
 public:
  // Reads fields of `object`; `context` starts every message ("malformed manifest: ", "<file>: "), `path` names
  // where `object` sits in its document ("shards[2]."; empty at the top).
  JsonFields(const nlohmann::json& object, ErrorCode code, std::string context, std::string path = {});

  // The Error for `field` of this object: <context>"<path><field>" <problem>.
  Error refuse(std::string_view field, std::string_view problem) const;

  Result<std::string> string(const char* field) const;
  Result<std::string> non_empty_string(const char* field) const;
  Result<std::uint64_t> unsigned_number(const char* field) const;  // a JSON integer >= 0
  Result<std::uint64_t> positive_number(const char* field) const;  // a JSON integer >= 1
  Result<std::int64_t> integer(const char* field) const;           // any JSON integer that fits
  Result<const nlohmann::json*> array(const char* field) const;
  Result<const nlohmann::json*> object(const char* field) const;
  // Whether the object has `field` at all (for optional fields).
  bool has(const char* field) const;

  // A JsonFields over `element` (an object inside this one), whose messages name it by `path`.
  JsonFields nested(const nlohmann::json& element, std::string path) const;
  // Every element of `array` a string, into `out`; else refuse(array_field) naming the element's index.
  Result<void> strings(const char* array_field, const nlohmann::json& array, std::vector<std::string>& out) const;

 private:
  const nlohmann::json& object_;
  ErrorCode code_;
  std::string context_;
  std::string path_;
};

}  // namespace datavo::protocol
