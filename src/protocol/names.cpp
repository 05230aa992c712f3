// The name rules of docs/protocol.md ("Concepts"), and numbers as the protocol writes them in text.
#include <algorithm>
#include <cstdio>

#include "datavo/protocol.hpp"
#include "util/decimal.hpp"

namespace datavo {
namespace {

constexpr std::size_t k_max_name = 128;
constexpr std::size_t k_max_sample_id = 512;
// 18 digits always fit in 64 bits, so a number the protocol writes never depends on overflow rules.
constexpr std::size_t k_max_number_digits = 18;

bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
bool is_name_char(char c) { return is_alnum(c) || c == '.' || c == '_' || c == '-'; }

// Why `part` is not a sample id component, or nullptr when it is one.
const char* sample_component_problem(std::string_view part) {
  if (part.empty()) return "empty path component (a leading, trailing or double '/')";
  if (part.size() > k_max_name) return "a path component is longer than 128 bytes";
  if (!is_alnum(part.front()) && part.front() != '_' && part.front() != '-')
    return "a path component must start with a letter, a digit, '_' or '-'";
  if (!std::all_of(part.begin(), part.end(), is_name_char)) return "only A-Z a-z 0-9 . _ - and / are allowed";
  return nullptr;
}

}  // namespace

namespace protocol {

std::string quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7f || c == '"' || c == '\\') {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

Result<void> validate_name(std::string_view what, std::string_view name) {
  auto refuse = [&](const char* why) {
    return Error::invalid_argument("invalid " + std::string(what) + " name " + quote(name) + ": " + why);
  };
  if (name.empty()) return refuse("empty");
  if (name.size() > k_max_name) return refuse("longer than 128 bytes");
  if (!is_alnum(name.front())) return refuse("must start with a letter or a digit");
  if (!std::all_of(name.begin(), name.end(), is_name_char)) return refuse("only A-Z a-z 0-9 . _ - are allowed");
  if (name.find("..") != std::string_view::npos) return refuse("\"..\" is not allowed");
  return ok();
}

Result<void> validate_sample_id(std::string_view id) {
  auto refuse = [&](const char* why) { return Error::invalid_argument("invalid sample id " + quote(id) + ": " + why); };
  if (id.empty()) return refuse("empty");
  if (id.size() > k_max_sample_id) return refuse("longer than 512 bytes");
  for (std::size_t begin = 0;;) {
    const std::size_t end = id.find('/', begin);
    const std::string_view part = id.substr(begin, end == std::string_view::npos ? end : end - begin);
    if (const char* problem = sample_component_problem(part)) return refuse(problem);
    if (end == std::string_view::npos) {
      if (part.find('.') != std::string_view::npos) return refuse("the last component cannot hold a '.'");
      return ok();
    }
    begin = end + 1;
  }
}

std::optional<std::uint64_t> parse_number(std::string_view text, std::uint64_t min) {
  if (text.size() > k_max_number_digits || (text.size() > 1 && text.front() == '0')) return std::nullopt;
  const auto value = util::parse_decimal(text);
  if (!value || *value < min) return std::nullopt;
  return value;
}

}  // namespace protocol

Result<DatasetName> DatasetName::parse(std::string_view text) {
  const std::string context = "dataset " + protocol::quote(text) + ": ";
  const auto slash = text.find('/');
  if (slash == std::string_view::npos)
    return Error::invalid_argument(context + "expected <dataset>/<split>, e.g. voice_demo_v1/train");
  DatasetName name{std::string(text.substr(0, slash)), std::string(text.substr(slash + 1))};
  for (auto [what, part] : {std::pair{"dataset", &name.dataset}, std::pair{"split", &name.split}}) {
    if (auto valid = protocol::validate_name(what, *part); !valid)
      return Error::invalid_argument(context + valid.error().message);
  }
  return name;
}

}  // namespace datavo
