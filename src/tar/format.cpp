#include "tar/format.hpp"

#include "util/text.hpp"

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

std::string escape_name(std::string_view name) { return util::printable(name); }

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
