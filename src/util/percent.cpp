#include "util/percent.hpp"

namespace datavo::util {

std::string percent_encode(std::string_view text, Slash slash) {
  static constexpr char k_digits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                            c == '.' || c == '_' || c == '~' || (c == '/' && slash == Slash::keep);
    if (unreserved) {
      out += c;
    } else {
      out += '%';
      out += k_digits[byte >> 4];
      out += k_digits[byte & 0x0f];
    }
  }
  return out;
}

}  // namespace datavo::util
