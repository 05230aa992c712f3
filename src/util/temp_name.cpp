#include "util/temp_name.hpp"

#include <unistd.h>

#include <cstdint>
#include <limits>

#include "util/decimal.hpp"
#include "util/fs.hpp"

namespace datavo::util {
namespace {

// 8 random bytes: two writers of one host and pid (a pid reused since) never pick the same name.
constexpr std::size_t k_random_bytes = 8;
constexpr std::string_view k_tmp_infix = ".tmp.";
constexpr std::string_view k_tmp_suffix = ".tmp";

// Reads "<host>.<pid>." at the start of `text` (the random part and anything after it are not checked).
std::optional<TempWriter> parse_tag(std::string_view text) {
  const auto host_end = text.find('.');
  if (host_end == std::string_view::npos || host_end == 0) return std::nullopt;
  const auto pid_end = text.find('.', host_end + 1);
  if (pid_end == std::string_view::npos) return std::nullopt;
  const auto pid = parse_decimal(text.substr(host_end + 1, pid_end - host_end - 1));
  if (!pid || *pid == 0 || *pid > std::uint64_t(std::numeric_limits<pid_t>::max())) return std::nullopt;
  return TempWriter{std::string(text.substr(0, host_end)), pid_t(*pid)};
}

}  // namespace

std::string writer_tag() { return host_name() + "." + std::to_string(::getpid()) + "." + random_hex(k_random_bytes); }

std::string temp_name_beside(const std::string& target) { return target + std::string(k_tmp_infix) + writer_tag(); }

std::string temp_name_in(const std::string& dir, std::string_view stem) {
  return dir + "/" + writer_tag() + "." + std::string(stem) + std::string(k_tmp_suffix);
}

std::optional<TempWriter> temp_writer(std::string_view file_name) {
  if (file_name.ends_with(k_tmp_suffix)) return parse_tag(file_name);
  const auto infix = file_name.rfind(k_tmp_infix);
  if (infix == std::string_view::npos) return std::nullopt;
  return parse_tag(file_name.substr(infix + k_tmp_infix.size()));
}

bool written_by_dead_local_process(std::string_view file_name) {
  const auto writer = temp_writer(file_name);
  return writer && writer->host == host_name() && !process_alive(writer->pid);
}

}  // namespace datavo::util
