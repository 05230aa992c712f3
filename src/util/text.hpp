// Small text helpers: ASCII case folding and trimming, the same rules everywhere (HTTP header names, SigV4's
// canonical headers, INI-style files, YAML scalars), and untrusted text made fit for a message. ASCII only: none
// of these texts is localised.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace datavo::util {

// The ASCII whitespace that every trim() removes: space, tab, CR, LF, VT and FF.
inline constexpr std::string_view k_ascii_space = " \t\r\n\v\f";

inline char to_lower(char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; }
inline std::string to_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = to_lower(c);
  return out;
}
// Whether `a` and `b` are equal ignoring ASCII case.
inline bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (to_lower(a[i]) != to_lower(b[i])) return false;
  }
  return true;
}

inline std::string_view trim_left(std::string_view text) {
  const auto first = text.find_first_not_of(k_ascii_space);
  return first == std::string_view::npos ? std::string_view{} : text.substr(first);
}
inline std::string_view trim_right(std::string_view text) {
  const auto last = text.find_last_not_of(k_ascii_space);
  return last == std::string_view::npos ? std::string_view{} : text.substr(0, last + 1);
}
inline std::string_view trim(std::string_view text) { return trim_right(trim_left(text)); }

// Whether `text` holds an ASCII control character (below 0x20, or DEL): a value no setting may carry.
inline bool has_control_char(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  }
  return false;
}

// `text` (a name from a file, an archive or a request) fit for a one-line message: '"' and '\\' escaped with a
// backslash, every byte outside printable ASCII as \xNN, and at most `max_chars` characters of that; a longer
// text keeps its start and its end (where a path's file name is) with "…" (U+2026) between them. Not quoted.
inline constexpr std::size_t k_max_printable = 120;
std::string printable(std::string_view text, std::size_t max_chars = k_max_printable);

}  // namespace datavo::util
