#include "tar/format.hpp"

namespace datavo::tar_format {

const char* unsafe_name_reason(std::string_view name) {
  if (name.empty()) return "empty member name";
  if (name.find('\0') != std::string_view::npos) return "member name contains a NUL byte";
  if (name.front() == '/') return "absolute member name";
  std::size_t begin = 0;
  while (begin <= name.size()) {
    std::size_t end = name.find('/', begin);
    if (end == std::string_view::npos) end = name.size();
    if (name.substr(begin, end - begin) == "..") return "member name has a '..' component";
    begin = end + 1;
  }
  return nullptr;
}

std::string escape_name(std::string_view name) {
  // Names come from untrusted archives: keep messages one line and bounded whatever the bytes are.
  constexpr std::size_t k_max_shown = 256;
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < name.size() && i < k_max_shown; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += k_hex[c >> 4];
      out += k_hex[c & 0xf];
    }
  }
  if (name.size() > k_max_shown) out += "...";
  return out;
}

std::string error_message(std::string_view shard, std::string_view member, std::uint64_t offset,
                          std::string_view what) {
  std::string message = "shard ";
  message += shard;
  message += ": ";
  if (!member.empty()) {
    message += "member \"";
    message += escape_name(member);
    message += "\" ";
  }
  message += "at byte offset ";
  message += std::to_string(offset);
  message += ": ";
  message += what;
  return message;
}

}  // namespace datavo::tar_format
