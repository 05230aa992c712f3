// shards.yaml: the typed configuration of a cache hierarchy and its resolution order. One tier's settings, and the
// value syntax they share, are in tier_config.hpp; the tiers are built by the tier registry (tier_registry.hpp).
//
// Schema (docs/config.md): a mapping with one key, `tiers`, a non-empty list, fastest first. Each tier has
// `type` (a registered type: folder | s3 | gcs | azure_blob; default folder), `name` (optional; defaults to the
// path or bucket), `max_bytes` (optional integer or "<n><unit>" with B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, all
// 1024-based; 0 or missing means unbounded) and `read_only` (optional bool), plus the fields of its type, which the
// type's entry in the tier registry parses (src/tier/<type>/<type>_type.cpp). Unknown keys, wrong types, bad sizes,
// duplicate names, missing required fields, an empty list and a list without a folder tier are errors that name
// the file, the line and the field. The legacy top-level `root` is accepted and ignored with a WARNING.
//
// Resolution order (docs/config.md):
//   1. an explicit path (an argument, else $DATAVO_SHARD_CACHE_CONFIG); it must exist;
//   2. /etc/datavo/shards.yaml;
//   3. ~/.config/datavo/shards.yaml;
//   4. the built-in default: one folder tier at $DATAVO_SHARD_CACHE_DIR or ~/.cache/altavo/datavo/shards, 50 GiB.
// A candidate that exists but cannot be read or parsed is an error, never skipped.
//
// Thread safety: functions are reentrant; they read the environment through ConfigEnvironment.
#pragma once

#include <any>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "datavo/result.hpp"
#include "datavo/tier_config.hpp"

namespace datavo {

enum class ConfigSource { argument, environment, system, user, builtin_default };
// "argument", "environment", "system", "user", "builtin_default".
const char* to_string(ConfigSource source);

struct SkippedCandidate {
  std::string path;
  std::string reason;  // e.g. "does not exist"
};

struct CacheConfig {
  std::vector<TierConfig> tiers;
  std::string path;  // the file used; empty for the built-in default
  ConfigSource source = ConfigSource::builtin_default;
  std::vector<SkippedCandidate> skipped;  // candidates looked at before `path`, with the reason
  std::vector<std::string> warnings;      // already logged; kept for `datavo cache info`
};

// Parses and validates YAML text; `file_name` is used in error messages and as CacheConfig::path. Every failure is
// ErrorCode::config with a message "<file_name>:<line>: <field>: <problem>" (line 1-based; field like
// "tiers[1].max_bytes"), stopping at the first problem. A legacy `root` is logged and added to `warnings`.
Result<CacheConfig> parse_config(std::string_view yaml_text, const std::string& file_name,
                                 const ConfigEnvironment& env = ConfigEnvironment::process());
// Reads and parses one file (at most 1 MiB). A file that cannot be read (missing, a directory, no permission) is
// ErrorCode::config naming it, with sys_errno set. The result's source is `argument`.
Result<CacheConfig> load_config_file(const std::string& path,
                                     const ConfigEnvironment& env = ConfigEnvironment::process());
// One setting of a tier given by a program instead of a file (e.g. a keyword argument of the Python SDK's tier
// classes): its shards.yaml key and the text of its value as a YAML scalar would hold it. `quoted` marks a string
// that must stay a string (a quoted scalar: "true" in quotes is not a bool).
struct TierArgument {
  std::string key;
  std::string value;
  bool quoted = false;
};
// Parses `arguments` exactly as the mapping of one tier of type `type` in shards.yaml is parsed: the same keys
// (type, name, max_bytes, read_only and the type's own), defaults, checks, normalisation and ~ / $VAR expansion,
// and the same TierConfig (settings included, their origin being `origin`). Every failure is ErrorCode::config
// worded "<origin>.<key>: <problem>", e.g. "ShardCacheTier.max_bytes: invalid size \"ten\""; an unknown type or
// key, or a key given twice, likewise. Unlike a file, one tier alone need not be a folder tier. No I/O.
Result<TierConfig> parse_tier_arguments(std::string_view type, const std::vector<TierArgument>& arguments,
                                        const std::string& origin,
                                        const ConfigEnvironment& env = ConfigEnvironment::process());
// Applies the resolution order above. `explicit_path` is the argument (it beats the environment variable; an empty
// $DATAVO_SHARD_CACHE_CONFIG counts as unset). Candidates that do not exist are listed in `skipped`; every error
// is ErrorCode::config.
Result<CacheConfig> resolve_config(const std::optional<std::string>& explicit_path,
                                   const ConfigEnvironment& env = ConfigEnvironment::process());

}  // namespace datavo
