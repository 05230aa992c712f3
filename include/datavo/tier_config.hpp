// One tier's configuration, as shards.yaml or a program gives it (TierConfig), and the syntax of the values every
// tier type shares: byte sizes, durations and paths with ~ and $VAR. The tier registry (tier_registry.hpp) builds a
// tier from a TierConfig; the loader of whole files and their resolution order are in config.hpp.
//
// Thread safety: values and reentrant functions; the environment is read through ConfigEnvironment.
#pragma once

#include <any>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "datavo/access.hpp"
#include "datavo/result.hpp"
#include "datavo/units.hpp"

namespace datavo {

// One effective setting of a tier, and where its value came from: what `datavo cache info` shows (like `ccache -p`).
struct TierSetting {
  std::string name;    // e.g. "max_bytes", "durability"
  std::string value;   // as a person reads it; secrets are "<redacted>"
  std::string origin;  // "<file>:<line>", "default", or the environment variable it came from
};

struct TierConfig {
  std::string name;
  std::string type;  // a registered type: "folder", "s3", "gcs", "azure_blob" (tier_registry.hpp)
  std::optional<Bytes> max_bytes;
  Access access = Access::read_write;
  // The backend's options: FolderTierOptions, S3TierOptions, GcsTierOptions or AzureBlobTierOptions, as the
  // type's parser (src/tier/<type>/<type>_type.cpp) filled them in; the common fields above are merged in when the
  // tier is built.
  std::any backend;
  int line = 0;                       // 1-based line of the tier's entry in its file; 0 for the built-in default
  std::vector<TierSetting> settings;  // every effective setting, in the order shown to users
};

// Where configuration comes from; tests substitute every field.
struct ConfigEnvironment {
  std::function<std::optional<std::string>(const std::string&)> getenv;  // empty: ::getenv
  std::string system_path = "/etc/datavo/shards.yaml";
  // The process environment.
  static ConfigEnvironment process();
  // The value of environment variable `name` through `getenv` (the process environment when it is empty).
  std::optional<std::string> get(const std::string& name) const;
};

// Parses "<n>" or "<n><unit>" (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB; 1024-based; case-insensitive unit; optional
// space before the unit). Negative, fractional-garbage, overflowing or unknown units are invalid_argument.
Result<Bytes> parse_byte_size(std::string_view text);
// Parses "<n><unit>" with s, m, h, d or w. invalid_argument otherwise.
Result<Seconds> parse_duration(std::string_view text);
// The inverse of parse_byte_size for people: "200 GiB" when exact in the largest unit that divides it, else
// "<n> B".
std::string format_byte_size(Bytes size);
// The inverse of parse_duration: "30d", "12h", "90m", "45s" (the largest unit that divides it exactly).
std::string format_duration(Seconds duration);
// Expands a leading ~ and $VAR / ${VAR}; an unset variable is invalid_argument naming it.
Result<std::string> expand_path(std::string_view text, const ConfigEnvironment& env);

}  // namespace datavo
