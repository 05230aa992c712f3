#include "tier/tier_fields.hpp"

#include <cctype>

#include "util/text.hpp"

namespace datavo {
const FieldValue* TierFields::find(std::string_view key) const {
  for (const auto& field : fields_) {
    if (field.key == key) return &field;
  }
  return nullptr;
}

std::string TierFields::where(const FieldValue* field, std::string_view key) const {
  // Settings given by a program (parse_tier_arguments) have no file: "<tier path>.<key>: ".
  if (file_.empty()) return tier_path_ + "." + std::string(key) + ": ";
  const int line = field ? field->line : tier_line_;
  std::string out = file_;
  if (line > 0) out += ":" + std::to_string(line);
  return out + ": " + tier_path_ + "." + std::string(key) + ": ";
}

Error TierFields::fail(std::string_view key, const std::string& problem) const {
  return Error{ErrorCode::config, where(find(key), key) + problem};
}

void TierFields::effective(std::string_view key, std::string value, std::string origin_if_absent, Secret secret) {
  const FieldValue* field = find(key);
  std::string origin = !field          ? std::move(origin_if_absent)
                       : file_.empty() ? tier_path_
                                       : file_ + ":" + std::to_string(field->line);
  settings_.push_back(
      TierSetting{std::string(key), secret == Secret::yes ? std::string("<redacted>") : std::move(value), origin});
}

Result<std::optional<std::string>> TierFields::scalar(std::string_view key, const char* expectation) {
  const FieldValue* field = find(key);
  if (field == nullptr) return std::optional<std::string>{};
  if (!field->scalar) return fail(key, std::string("expected ") + expectation + ", got " + field->kind);
  return std::optional<std::string>{*field->scalar};
}

Result<std::optional<std::string>> TierFields::optional_string(std::string_view key, Secret secret) {
  auto text = scalar(key, "a string");
  if (!text || !*text) return text;
  const std::string& value = **text;
  if (value.empty()) return fail(key, "must not be empty");
  if (util::has_control_char(value)) return fail(key, "must not contain control characters");
  // Usually a stray quote or a pasted line break (yaml-cpp folds an unterminated quote at the end of the file).
  if (std::isspace(static_cast<unsigned char>(value.front())) ||
      std::isspace(static_cast<unsigned char>(value.back()))) {
    return fail(key, "must not start or end with whitespace");
  }
  (void)secret;
  return text;
}

Result<std::string> TierFields::required_string(std::string_view key, Secret secret) {
  auto text = optional_string(key, secret);
  if (!text) return std::move(text).error();
  if (!*text) {
    return fail(key, "missing; " + article_ + " " + type_ + " tier needs a " + std::string(key));
  }
  return std::move(**text);
}

Result<std::optional<bool>> TierFields::optional_bool(std::string_view key) {
  const FieldValue* field = find(key);
  if (field == nullptr) return std::optional<bool>{};
  if (!field->scalar) return fail(key, "expected true or false, got " + field->kind);
  const std::string& text = *field->scalar;
  // A quoted "true" is a string in YAML; accepting it would blur the line the schema draws.
  if (!field->quoted && (text == "true" || text == "True" || text == "TRUE")) return std::optional<bool>{true};
  if (!field->quoted && (text == "false" || text == "False" || text == "FALSE")) return std::optional<bool>{false};
  return fail(key,
              "expected true or false, got " + std::string(field->quoted ? "the string " : "") + "\"" + text + "\"");
}

Result<std::optional<Bytes>> TierFields::optional_size(std::string_view key) {
  auto text = scalar(key, "a size such as 50GB");
  if (!text) return std::move(text).error();
  if (!*text) return std::optional<Bytes>{};
  auto size = parse_byte_size(**text);
  if (!size) return fail(key, size.error().message);
  return std::optional<Bytes>{*size};
}

Result<std::optional<Seconds>> TierFields::optional_duration(std::string_view key) {
  auto text = scalar(key, "a duration such as 30d");
  if (!text) return std::move(text).error();
  if (!*text) return std::optional<Seconds>{};
  auto duration = parse_duration(**text);
  if (!duration) return fail(key, duration.error().message);
  return std::optional<Seconds>{*duration};
}

Result<std::optional<Seconds>> TierFields::max_age() {
  auto max_age = optional_duration("max_age");
  if (!max_age) return std::move(max_age).error();
  // Unlike max_bytes, zero is not "unbounded": it would read as "expire everything", so neither is guessed.
  if (*max_age && (*max_age)->count() == 0) return fail("max_age", "must be positive; omit max_age for no age limit");
  effective("max_age", *max_age ? format_duration(**max_age) : "none");
  return max_age;
}

Result<std::optional<std::uint64_t>> TierFields::optional_integer(std::string_view key, std::uint64_t min,
                                                                  std::uint64_t max) {
  auto text = scalar(key, "a whole number");
  if (!text) return std::move(text).error();
  if (!*text) return std::optional<std::uint64_t>{};
  const std::string& value = **text;
  std::uint64_t number = 0;
  bool digits = !value.empty() && value.size() <= 19;
  for (char c : value) {
    if (c < '0' || c > '9') digits = false;
    if (digits) number = number * 10 + std::uint64_t(c - '0');
  }
  if (!digits || number < min || number > max) {
    return fail(key, "expected a whole number from " + std::to_string(min) + " to " + std::to_string(max) + ", got \"" +
                         value + "\"");
  }
  return std::optional<std::uint64_t>{number};
}

}  // namespace datavo
