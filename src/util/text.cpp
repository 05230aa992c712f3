#include "util/text.hpp"

namespace datavo::util {

namespace {

std::size_t escaped_width(unsigned char c) { return (c == '"' || c == '\\') ? 2 : (c >= 0x20 && c < 0x7f) ? 1 : 4; }

void append_escaped(std::string& out, std::string_view text) {
  static constexpr char k_hex[] = "0123456789abcdef";
  for (const char byte : text) {
    const auto c = static_cast<unsigned char>(byte);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += byte;
    } else if (c >= 0x20 && c < 0x7f) {
      out += byte;
    } else {
      out += "\\x";
      out += k_hex[c >> 4];
      out += k_hex[c & 0xf];
    }
  }
}

}  // namespace

std::string printable(std::string_view text, std::size_t max_chars) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < text.size() && width <= max_chars; ++i) {
    width += escaped_width(static_cast<unsigned char>(text[i]));
  }
  std::string out;
  if (width <= max_chars) {
    append_escaped(out, text);
    return out;
  }
  // Cut between escapes, never inside one: the head and the tail each get half of what "…" leaves.
  const std::size_t half = max_chars > 1 ? (max_chars - 1) / 2 : 0;
  std::size_t head = 0;
  for (std::size_t w = escaped_width(static_cast<unsigned char>(text[0])); w <= half;) {
    ++head;
    w += escaped_width(static_cast<unsigned char>(text[head]));
  }
  std::size_t tail = text.size();
  for (std::size_t w = escaped_width(static_cast<unsigned char>(text[tail - 1])); w <= half;) {
    --tail;
    w += escaped_width(static_cast<unsigned char>(text[tail - 1]));
  }
  append_escaped(out, text.substr(0, head));
  out += "\u2026";
  append_escaped(out, text.substr(tail));
  return out;
}

}  // namespace datavo::util
