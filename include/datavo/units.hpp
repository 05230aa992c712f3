// Typed byte sizes and durations, so that no public function takes a bare integer for either.
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>

namespace datavo {

// A count of bytes. Construct with Bytes{n} or the helpers below; 1 KiB = 1024 bytes.
class Bytes {
 public:
  constexpr Bytes() = default;
  constexpr explicit Bytes(std::uint64_t count) : count_(count) {}
  constexpr std::uint64_t count() const { return count_; }
  constexpr auto operator<=>(const Bytes&) const = default;
  constexpr Bytes operator+(Bytes other) const { return Bytes{count_ + other.count_}; }
  constexpr Bytes operator-(Bytes other) const { return Bytes{count_ > other.count_ ? count_ - other.count_ : 0}; }
  constexpr Bytes& operator+=(Bytes other) {
    count_ += other.count_;
    return *this;
  }

 private:
  std::uint64_t count_ = 0;
};

constexpr Bytes KiB(std::uint64_t n) { return Bytes{n << 10}; }
constexpr Bytes MiB(std::uint64_t n) { return Bytes{n << 20}; }
constexpr Bytes GiB(std::uint64_t n) { return Bytes{n << 30}; }
constexpr Bytes TiB(std::uint64_t n) { return Bytes{n << 40}; }

using Seconds = std::chrono::seconds;
using Milliseconds = std::chrono::milliseconds;

}  // namespace datavo
