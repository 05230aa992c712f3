// Helpers shared by the tar reader and writer tests: scratch directories, external tools, deterministic payloads.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>

namespace datavo::tartest {

namespace fs = std::filesystem;

// A fresh directory per test case, removed with its contents.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "datavo_tar_") {
    std::string pattern = ::testing::TempDir() + prefix + "XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline int run(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline bool have_tool(const std::string& tool) { return run("command -v " + tool + " >/dev/null 2>&1") == 0; }

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline void write_file(const fs::path& path, const std::string& contents) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << contents;
}

// The bytes of `text`, as the tar reader and writer take them.
inline std::span<const std::byte> bytes_of(std::string_view text) { return std::as_bytes(std::span(text)); }

// Deterministic bytes covering all 256 values; `salt` keeps the two suites' golden bytes as they were.
inline std::string payload(std::size_t size, unsigned seed, std::uint32_t salt) {
  std::string out(size, '\0');
  std::uint32_t state = seed * 2654435761u + salt;
  for (char& c : out) {
    state = state * 1664525u + 1013904223u;
    c = static_cast<char>(state >> 24);
  }
  return out;
}

// The bytes of a field or a written chunk as a string, for comparisons.
inline std::string text_of(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

struct Member {
  std::string name;
  std::string data;
  bool operator==(const Member&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const Member& m) {
  return os << '"' << m.name << "\" (" << m.data.size() << " bytes)";
}

}  // namespace datavo::tartest
