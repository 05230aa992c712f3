// shards.yaml: parsing, validation, file loading and the resolution order (config.hpp, docs/config.md).
#include "datavo/config.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "datavo/folder_tier.hpp"
#include "datavo/tier_registry.hpp"
#include "tier/registry.hpp"
#include "tier/tier_fields.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/text.hpp"

namespace datavo {
namespace {

// The spec's built-in default: one user-local folder tier with 50 GiB of LRU capacity.
constexpr Bytes k_default_max_bytes = GiB(50);
constexpr const char* k_default_tier_name = "default";
constexpr const char* k_default_dir_under_home = "/.cache/altavo/datavo/shards";
constexpr const char* k_user_config_under_home = "/.config/datavo/shards.yaml";
// Real configurations are a few hundred bytes; the cap keeps `--config /dev/zero` from exhausting memory.
constexpr std::size_t k_max_config_bytes = std::size_t{1} << 20;

constexpr const char* k_folder = "folder";

bool is_common_field(std::string_view key) {
  return std::find(std::begin(k_common_tier_fields), std::end(k_common_tier_fields), key) !=
         std::end(k_common_tier_fields);
}

bool takes(const TierType& type, std::string_view key) {
  return std::find(type.fields.begin(), type.fields.end(), key) != type.fields.end();
}

template <typename Items>
std::string join(const Items& items, const char* separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

std::string kind_of(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null: return "null";
    case YAML::NodeType::Scalar: return "a scalar";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Undefined: return "nothing";
  }
  return "nothing";
}

// "unknown key for an s3 tier (...); an s3 tier takes ..."
std::string unknown_tier_key(const std::string& key, const TierType& type) {
  std::vector<std::string> allowed(std::begin(k_common_tier_fields), std::end(k_common_tier_fields));
  allowed.insert(allowed.end(), type.fields.begin(), type.fields.end());
  const std::string a_type = std::string(type.article) + " " + std::string(type.name);
  std::string message = "unknown key for " + a_type + " tier";
  std::vector<std::string> owners;
  for (const TierType* other : tier_types()) {
    if (takes(*other, key)) owners.emplace_back(other->name);
  }
  if (!owners.empty()) message += " (" + key + " belongs to " + join(owners, " and ") + " tiers)";
  return message + "; " + a_type + " tier takes " + join(allowed, ", ");
}

// The common fields (max_bytes, read_only) and the type's own, once the keys are known to be the type's: shared by
// shards.yaml and parse_tier_arguments(). Fills `tier` (its type and name already set) and its settings.
Result<void> parse_tier_fields(const TierType& type, TierFields& tier_fields, TierConfig& tier) {
  auto max_bytes = tier_fields.optional_size("max_bytes");
  if (!max_bytes) return max_bytes.error();
  // The schema's "0 means unbounded".
  if (*max_bytes && (*max_bytes)->count() > 0) tier.max_bytes = **max_bytes;
  auto read_only = tier_fields.optional_bool("read_only");
  if (!read_only) return read_only.error();
  if (*read_only && **read_only) tier.access = Access::read_only;

  tier_fields.effective("type", tier.type);
  DATAVO_TRY(type.parse(tier_fields, tier));
  tier_fields.effective("max_bytes", tier.max_bytes ? format_byte_size(*tier.max_bytes) : "unbounded");
  tier_fields.effective("read_only", tier.access == Access::read_only ? "true" : "false");
  tier.settings = tier_fields.take_settings();
  return {};
}

// One key of a mapping, with where it is and the dotted path shown in messages.
struct YamlField {
  std::string key;
  std::string path;
  YAML::Mark mark;
  YAML::Node value;
};

class Parser {
 public:
  Parser(const std::string& file, const ConfigEnvironment& env) : file_(file), env_(env) {}

  Result<CacheConfig> parse(std::string_view text) {
    std::vector<YAML::Node> documents;
    try {
      documents = YAML::LoadAll(std::string(text));
    } catch (const YAML::Exception& e) {
      return fail(e.mark, "", "YAML syntax error: " + e.msg);
    }
    if (documents.empty() || documents[0].IsNull()) {
      return fail(YAML::Mark(), "", "empty configuration (expected a mapping with a tiers list)");
    }
    if (documents.size() > 1) {
      return fail(documents[1].Mark(), "", "a second YAML document; a configuration file holds exactly one");
    }
    const YAML::Node& root = documents[0];
    if (!root.IsMap()) {
      return fail(root.Mark(), "", "expected a mapping with a tiers list at the top level, got " + kind_of(root));
    }
    return parse_top(root);
  }

 private:
  Error fail(const YAML::Mark& mark, const std::string& path, const std::string& message) const {
    return Error{ErrorCode::config, where(mark, path) + message};
  }

  std::string where(const YAML::Mark& mark, const std::string& path) const {
    std::string out = file_;
    if (!mark.is_null()) out += ":" + std::to_string(mark.line + 1);
    out += ": ";
    if (!path.empty()) out += path + ": ";
    return out;
  }

  // The keys of a mapping in file order; a non-scalar or repeated key is an error (yaml-cpp keeps both copies
  // of a repeated key, and silently using one of them would hide a mistake).
  Result<std::vector<YamlField>> fields(const YAML::Node& map, const std::string& path_prefix) const {
    std::vector<YamlField> out;
    std::map<std::string, int> seen;
    for (const auto& entry : map) {
      // Copies: yaml-cpp's iterator hands out a temporary pair, so references into it would dangle.
      YAML::Node key = entry.first;
      YAML::Node value = entry.second;
      if (!key.IsScalar()) {
        return fail(key.Mark(), path_prefix.empty() ? "" : path_prefix,
                    "keys must be plain names, got " + kind_of(key));
      }
      std::string path = path_prefix.empty() ? key.Scalar() : path_prefix + "." + key.Scalar();
      auto [previous, inserted] = seen.emplace(key.Scalar(), key.Mark().line + 1);
      if (!inserted) {
        return fail(key.Mark(), path, "duplicate key (first given on line " + std::to_string(previous->second) + ")");
      }
      out.push_back(YamlField{key.Scalar(), std::move(path), key.Mark(), value});
    }
    return out;
  }

  Result<std::string> string_value(const YamlField& field) const {
    if (!field.value.IsScalar()) return fail(field.mark, field.path, "expected a string, got " + kind_of(field.value));
    const std::string& text = field.value.Scalar();
    if (text.empty()) return fail(field.mark, field.path, "must not be empty");
    if (util::has_control_char(text)) return fail(field.mark, field.path, "must not contain control characters");
    // Usually a stray quote or a pasted line break (yaml-cpp folds an unterminated quote at the end of the file).
    if (std::isspace(static_cast<unsigned char>(text.front())) ||
        std::isspace(static_cast<unsigned char>(text.back()))) {
      return fail(field.mark, field.path, "must not start or end with whitespace");
    }
    return text;
  }

  Result<CacheConfig> parse_top(const YAML::Node& root) {
    auto top = fields(root, "");
    if (!top) return top.error();
    CacheConfig config;
    config.path = file_;
    const YamlField* tiers = nullptr;
    for (const YamlField& field : *top) {
      if (field.key == "tiers") {
        tiers = &field;
      } else if (field.key == "root") {
        std::string warning = where(field.mark, field.path) +
                              "ignored: the legacy root field is no longer used (the server is the source of "
                              "truth); remove it";
        LOG_WARNING(warning);
        config.warnings.push_back(std::move(warning));
      } else {
        return fail(field.mark, field.path, "unknown key (the top level takes tiers, and the legacy root)");
      }
    }
    if (tiers == nullptr) {
      return fail(root.Mark(), "tiers", "missing; a configuration needs a non-empty list of tiers");
    }
    if (!tiers->value.IsSequence()) {
      return fail(tiers->mark, "tiers", "expected a non-empty list of tiers, got " + kind_of(tiers->value));
    }
    if (tiers->value.size() == 0) {
      return fail(tiers->mark, "tiers", "empty list; at least one folder tier is required");
    }
    for (std::size_t i = 0; i < tiers->value.size(); ++i) {
      auto tier = parse_tier(tiers->value[i], "tiers[" + std::to_string(i) + "]");
      if (!tier) return tier.error();
      config.tiers.push_back(std::move(*tier));
    }
    if (std::none_of(config.tiers.begin(), config.tiers.end(),
                     [](const TierConfig& tier) { return tier.type == k_folder; })) {
      return fail(tiers->mark, "tiers",
                  "no folder tier; at least one is required, as the local landing zone of remote hits");
    }
    for (std::size_t i = 0; i < config.tiers.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        if (config.tiers[i].name != config.tiers[j].name) continue;
        const auto& [mark, is_default] = name_marks_[i];
        return fail(mark, "tiers[" + std::to_string(i) + "].name",
                    "duplicate tier name \"" + config.tiers[i].name + "\"" +
                        (is_default ? " (the default name, from the tier's location)" : "") + ", also used by tiers[" +
                        std::to_string(j) + "] on line " + std::to_string(config.tiers[j].line) +
                        "; give each tier a distinct name");
      }
    }
    return config;
  }

  Result<TierConfig> parse_tier(const YAML::Node& node, const std::string& path) {
    if (!node.IsMap()) return fail(node.Mark(), path, "expected a mapping of tier fields, got " + kind_of(node));
    auto all = fields(node, path);
    if (!all) return all.error();

    TierConfig tier;
    tier.line = node.Mark().line + 1;
    tier.type = k_folder;
    const TierType* type = find_tier_type(k_folder);
    for (const YamlField& field : *all) {
      if (field.key != "type") continue;
      auto name = string_value(field);
      if (!name) return name.error();
      type = find_tier_type(*name);
      if (type == nullptr) {
        return fail(field.mark, field.path,
                    "unknown tier type \"" + *name + "\" (expected " + join(tier_type_names(), ", ") + ")");
      }
      tier.type = *name;
    }

    std::vector<FieldValue> values;
    for (const YamlField& field : *all) {
      if (!is_common_field(field.key) && !takes(*type, field.key)) {
        for (const auto& [key, why] : type->hints) {
          if (key != field.key) continue;
          std::string message(why);
          if (auto at = message.find("{a type}"); at != std::string::npos)
            message.replace(at, 8, std::string(type->article) + " " + std::string(type->name));
          return fail(field.mark, field.path, message);
        }
        return fail(field.mark, field.path, unknown_tier_key(field.key, *type));
      }
      FieldValue value;
      value.key = field.key;
      value.line = field.mark.line + 1;
      value.kind = kind_of(field.value);
      if (field.value.IsScalar()) value.scalar = field.value.Scalar();
      value.quoted = field.value.Tag() == "!";
      values.push_back(std::move(value));
    }
    TierFields tier_fields(file_, path, tier.line, tier.type, std::string(type->article), std::move(values), env_);

    YAML::Mark name_mark = node.Mark();
    bool name_is_default = true;
    for (const YamlField& field : *all) {
      if (field.key != "name") continue;
      auto name = string_value(field);
      if (!name) return name.error();
      tier.name = *name;
      name_mark = field.mark;
      name_is_default = false;
    }
    name_marks_.emplace_back(name_mark, name_is_default);

    DATAVO_TRY(parse_tier_fields(*type, tier_fields, tier));
    tier.settings.insert(tier.settings.begin(),
                         TierSetting{"name", tier.name,
                                     name_is_default ? "default (from the location)"
                                                     : file_ + ":" + std::to_string(name_mark.line + 1)});
    return tier;
  }

  const std::string& file_;
  const ConfigEnvironment& env_;
  // Per tier: where its name is (the name key, or the tier when the name is a default) and whether it is one.
  std::vector<std::pair<YAML::Mark, bool>> name_marks_;
};

Error unreadable(const std::string& path, int err) {
  return Error{ErrorCode::config, path + ": cannot read configuration file: " + std::strerror(err), err};
}

Result<std::string> read_config_text(const std::string& path) {
  auto text = util::read_file(path, k_max_config_bytes);
  if (text) return text;
  if (text.error().sys_errno != 0) return unreadable(path, text.error().sys_errno);
  return Error{ErrorCode::config, path + ": cannot read configuration file: larger than 1 MiB"};
}

enum class Existence { exists, missing };

Result<Existence> check_exists(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) return Existence::exists;
  if (errno == ENOENT || errno == ENOTDIR) return Existence::missing;
  int err = errno;
  return Error{ErrorCode::config, path + ": cannot check configuration file: " + std::strerror(err), err};
}

std::optional<std::string> non_empty_env(const ConfigEnvironment& env, const std::string& name) {
  auto value = env.get(name);
  if (!value || value->empty()) return std::nullopt;
  return value;
}

Result<CacheConfig> builtin_default(const ConfigEnvironment& env, std::vector<SkippedCandidate> skipped) {
  std::string dir;
  auto home = non_empty_env(env, "HOME");
  bool from_dir_env = false;
  if (auto from_env = non_empty_env(env, "DATAVO_SHARD_CACHE_DIR")) {
    from_dir_env = true;
    dir = *from_env;
    // A quoted "~/cache" reaches us unexpanded by the shell.
    if (dir == "~" || dir.rfind("~/", 0) == 0) {
      if (!home) {
        return Error{ErrorCode::config, "DATAVO_SHARD_CACHE_DIR=" + dir + ": cannot expand ~: HOME is not set"};
      }
      dir = *home + dir.substr(1);
    }
    if (dir.front() != '/') {
      return Error{ErrorCode::config, "DATAVO_SHARD_CACHE_DIR=" + dir + ": expected an absolute path"};
    }
  } else if (home) {
    dir = *home + k_default_dir_under_home;
    if (dir.front() != '/') return Error{ErrorCode::config, "HOME=" + *home + ": expected an absolute path"};
  } else {
    return Error{ErrorCode::config,
                 "no configuration file found, and the built-in default cache needs DATAVO_SHARD_CACHE_DIR or HOME, "
                 "neither of which is set"};
  }
  TierConfig tier;
  tier.name = k_default_tier_name;
  tier.type = k_folder;
  tier.max_bytes = k_default_max_bytes;
  FolderTierOptions folder;
  folder.path = std::move(dir);
  // Every effective setting, as for a tier of a file (what `datavo cache info` shows).
  const std::string k_builtin = "built-in default";
  tier.settings = {{"name", tier.name, k_builtin},
                   {"type", tier.type, k_builtin},
                   {"path", folder.path, from_dir_env ? "$DATAVO_SHARD_CACHE_DIR" : "built-in default ($HOME)"},
                   {"durability", to_string(folder.durability), k_builtin},
                   {"max_age", folder.max_age ? format_duration(*folder.max_age) : "none", k_builtin},
                   {"verify", to_string(folder.verify), k_builtin},
                   {"max_bytes", format_byte_size(k_default_max_bytes), k_builtin},
                   {"read_only", "false", k_builtin}};
  tier.backend = std::move(folder);
  CacheConfig config;
  config.tiers.push_back(std::move(tier));
  config.source = ConfigSource::builtin_default;
  config.skipped = std::move(skipped);
  return config;
}

}  // namespace

const char* to_string(ConfigSource source) {
  switch (source) {
    case ConfigSource::argument: return "argument";
    case ConfigSource::environment: return "environment";
    case ConfigSource::system: return "system";
    case ConfigSource::user: return "user";
    case ConfigSource::builtin_default: return "builtin_default";
  }
  return "builtin_default";
}

Result<CacheConfig> parse_config(std::string_view yaml_text, const std::string& file_name,
                                 const ConfigEnvironment& env) {
  try {
    return Parser(file_name, env).parse(yaml_text);
  } catch (const std::exception& e) {
    // yaml-cpp throws from accessors too; a configuration problem must never take the process down.
    return Error{ErrorCode::config, file_name + ": cannot parse configuration: " + e.what()};
  }
}

Result<CacheConfig> load_config_file(const std::string& path, const ConfigEnvironment& env) {
  auto text = read_config_text(path);
  if (!text) return text.error();
  auto config = parse_config(*text, path, env);
  if (config) config->source = ConfigSource::argument;
  return config;
}

Result<TierConfig> parse_tier_arguments(std::string_view type_name, const std::vector<TierArgument>& arguments,
                                        const std::string& origin, const ConfigEnvironment& env) {
  const TierType* type = find_tier_type(type_name);
  const std::string where = origin.empty() ? std::string("tier") : origin;
  if (type == nullptr) {
    return Error{ErrorCode::config, where + ": unknown tier type \"" + std::string(type_name) + "\" (expected " +
                                        join(tier_type_names(), ", ") + ")"};
  }
  TierConfig tier;
  tier.type = std::string(type->name);
  std::vector<FieldValue> values;
  for (const TierArgument& argument : arguments) {
    if (argument.key == "type") continue;
    if (!is_common_field(argument.key) && !takes(*type, argument.key)) {
      return Error{ErrorCode::config, where + "." + argument.key + ": " + unknown_tier_key(argument.key, *type)};
    }
    if (std::any_of(values.begin(), values.end(), [&](const auto& v) { return v.key == argument.key; })) {
      return Error{ErrorCode::config, where + "." + argument.key + ": given twice"};
    }
    FieldValue value;
    value.key = argument.key;
    value.kind = "a scalar";
    value.scalar = argument.value;
    value.quoted = argument.quoted;
    values.push_back(std::move(value));
  }
  // Without a file, TierFields words its errors "<origin>.<key>: <problem>".
  TierFields tier_fields("", where, 0, tier.type, std::string(type->article), values, env);
  bool name_given = false;
  for (const auto& value : values) {
    if (value.key != "name") continue;
    auto name = tier_fields.optional_string("name");
    if (!name) return std::move(name).error();
    tier.name = **name;
    name_given = true;
  }
  DATAVO_TRY(parse_tier_fields(*type, tier_fields, tier));
  tier.settings.insert(tier.settings.begin(),
                       TierSetting{"name", tier.name, name_given ? where : "default (from the location)"});
  return tier;
}

Result<CacheConfig> resolve_config(const std::optional<std::string>& explicit_path, const ConfigEnvironment& env) {
  std::optional<std::string> chosen = explicit_path;
  ConfigSource source = ConfigSource::argument;
  const char* named_by = "the explicit configuration path";
  if (!chosen) {
    chosen = non_empty_env(env, "DATAVO_SHARD_CACHE_CONFIG");
    source = ConfigSource::environment;
    named_by = "$DATAVO_SHARD_CACHE_CONFIG";
  }
  if (chosen) {
    if (chosen->empty()) return Error{ErrorCode::config, "the explicit configuration path is empty"};
    // An explicit path is what the user asked for: falling back to another file would hide their mistake.
    auto exists = check_exists(*chosen);
    if (!exists) return exists.error();
    if (*exists == Existence::missing) {
      return Error{ErrorCode::config,
                   *chosen + ": configuration file does not exist (named by " + std::string(named_by) + ")", ENOENT};
    }
    auto config = load_config_file(*chosen, env);
    if (config) config->source = source;
    return config;
  }

  std::vector<std::pair<std::string, ConfigSource>> candidates;
  std::vector<SkippedCandidate> skipped;
  candidates.emplace_back(env.system_path, ConfigSource::system);
  if (auto home = non_empty_env(env, "HOME")) {
    candidates.emplace_back(*home + k_user_config_under_home, ConfigSource::user);
  }
  for (const auto& [path, candidate_source] : candidates) {
    auto exists = check_exists(path);
    if (!exists) return exists.error();
    if (*exists == Existence::missing) {
      skipped.push_back(SkippedCandidate{path, "does not exist"});
      continue;
    }
    auto config = load_config_file(path, env);
    if (!config) return config;
    config->source = candidate_source;
    config->skipped = std::move(skipped);
    return config;
  }
  if (!non_empty_env(env, "HOME")) {
    skipped.push_back(SkippedCandidate{std::string("~") + k_user_config_under_home, "HOME is not set"});
  }
  return builtin_default(env, std::move(skipped));
}

}  // namespace datavo
