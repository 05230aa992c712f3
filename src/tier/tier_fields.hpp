// TierFields: one tier's mapping of shards.yaml as the tier type's parser sees it (src/tier/<type>/<type>_type.cpp),
// without yaml-cpp. Every accessor returns ErrorCode::config errors worded "<file>:<line>: tiers[i].<key>:
// <problem>", and records the setting it read, so that `datavo cache info` can show every effective setting and
// where it came from. Internal to the tier registry and the config loader.
//
// Thread safety: one thread uses a TierFields.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "datavo/result.hpp"
#include "datavo/tier_config.hpp"
#include "datavo/units.hpp"

namespace datavo {

// One key of the tier's mapping.
struct FieldValue {
  std::string key;
  int line = 0;                       // 1-based
  std::optional<std::string> scalar;  // nullopt for a mapping, list or null
  std::string kind;                   // "a scalar", "a list", "a mapping", "null"
  bool quoted = false;                // a quoted scalar ("true" in quotes is a string)
};

// Whether a setting's value may be shown.
enum class Secret { no, yes };

class TierFields {
 public:
  // `type` and `article` ("a", "an") name the tier type in messages ("an s3 tier needs a bucket").
  TierFields(std::string file, std::string tier_path, int tier_line, std::string type, std::string article,
             std::vector<FieldValue> fields, const ConfigEnvironment& env)
      : file_(std::move(file)),
        tier_path_(std::move(tier_path)),
        tier_line_(tier_line),
        type_(std::move(type)),
        article_(std::move(article)),
        fields_(std::move(fields)),
        env_(env) {}

  const std::string& type() const { return type_; }
  const ConfigEnvironment& env() const { return env_; }
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // A non-empty string without control characters or surrounding whitespace.
  Result<std::string> required_string(std::string_view key, Secret secret = Secret::no);
  Result<std::optional<std::string>> optional_string(std::string_view key, Secret secret = Secret::no);
  Result<std::optional<bool>> optional_bool(std::string_view key);
  // An integer or "<n><unit>" (parse_byte_size).
  Result<std::optional<Bytes>> optional_size(std::string_view key);
  // "<n><unit>" (parse_duration).
  Result<std::optional<Seconds>> optional_duration(std::string_view key);
  // The `max_age` key of every writable tier type: a positive duration (zero would read as "expire everything"),
  // recorded for `datavo cache info` ("none" when absent).
  Result<std::optional<Seconds>> max_age();
  // A whole number in [min, max].
  Result<std::optional<std::uint64_t>> optional_integer(std::string_view key, std::uint64_t min, std::uint64_t max);
  // One of `choices`, by name; "unknown <key> "x" (expected a, the default, or b)" otherwise.
  template <typename E>
  Result<E> choice(std::string_view key, std::initializer_list<std::pair<std::string_view, E>> choices, E fallback);

  // An Error about `key` (at its line when present, else at the tier's).
  Error fail(std::string_view key, const std::string& problem) const;
  // Records the effective value of `key` for `datavo cache info`: from the file when the key is there, else from
  // `origin_if_absent` ("default", or an environment variable's name).
  void effective(std::string_view key, std::string value, std::string origin_if_absent = "default",
                 Secret secret = Secret::no);
  std::vector<TierSetting> take_settings() { return std::move(settings_); }

 private:
  const FieldValue* find(std::string_view key) const;
  std::string where(const FieldValue* field, std::string_view key) const;
  Result<std::optional<std::string>> scalar(std::string_view key, const char* expectation);

  std::string file_;
  std::string tier_path_;
  int tier_line_;
  std::string type_;
  std::string article_;
  std::vector<FieldValue> fields_;
  const ConfigEnvironment& env_;
  std::vector<TierSetting> settings_;
};

template <typename E>
Result<E> TierFields::choice(std::string_view key, std::initializer_list<std::pair<std::string_view, E>> choices,
                             E fallback) {
  auto text = optional_string(key);
  if (!text) return std::move(text).error();
  std::string names;
  for (const auto& [name, value] : choices) {
    if (!names.empty()) names += ", ";
    names += name;
    if (value == fallback) names += " (the default)";
  }
  if (!*text) return fallback;
  for (const auto& [name, value] : choices) {
    if (**text == name) return value;
  }
  return fail(key, "unknown " + std::string(key) + " \"" + **text + "\" (expected " + names + ")");
}

}  // namespace datavo
