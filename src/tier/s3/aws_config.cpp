#include "tier/s3/aws_config.hpp"

#include <cerrno>

#include "util/fs.hpp"
#include "util/text.hpp"

namespace datavo::s3 {
namespace {

// The shared files are small; the bound keeps a wrong path (a device, a huge file) harmless.
constexpr std::size_t k_max_file_size = 1024 * 1024;

enum class FileKind { credentials, config };

// The section name of a "[...]" line of `kind`'s file as a profile name; nullopt for sections that are not
// profiles: in the config file "[profile name]" and "[default]" are, "[sso-session x]", "[services x]" and a bare
// "[name]" are not.
std::optional<std::string> profile_of_section(std::string_view line, FileKind kind) {
  const auto close = line.find(']');
  if (close == std::string_view::npos) return std::nullopt;
  std::string name(util::trim(line.substr(1, close - 1)));
  if (kind == FileKind::credentials || name == "default") return name;
  if (name.starts_with("profile") && name.size() > 7 && (name[7] == ' ' || name[7] == '\t'))
    return std::string(util::trim(std::string_view(name).substr(7)));
  return std::nullopt;
}

// The profiles of one shared file (see the top of aws_config.hpp).
std::map<std::string, ProfileSection> parse_shared_file(std::string_view text, FileKind kind) {
  std::map<std::string, ProfileSection> sections;
  ProfileSection* current = nullptr;
  while (!text.empty()) {
    const auto newline = text.find('\n');
    const std::string_view raw = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    const bool indented = !raw.empty() && (raw.front() == ' ' || raw.front() == '\t');
    const std::string_view line = util::trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      const auto profile = profile_of_section(line, kind);
      current = profile ? &sections[*profile] : nullptr;
      continue;
    }
    if (indented || current == nullptr) continue;
    const auto equals = line.find('=');
    if (equals == std::string_view::npos) continue;
    (*current)[util::to_lower(util::trim(line.substr(0, equals)))] = std::string(util::trim(line.substr(equals + 1)));
  }
  return sections;
}

std::string shared_file_path(const cloud::CredentialEnv& env, const char* variable, const char* default_name) {
  if (auto path = env.get(variable)) return env.expand_home(*path);
  return env.home.empty() ? std::string() : env.home + "/.aws/" + default_name;
}

// The file's bytes; nullopt when it does not exist.
Result<std::optional<std::string>> read_if_present(const std::string& path) {
  auto bytes = util::read_file(path, k_max_file_size);
  if (bytes) return std::optional<std::string>(std::move(*bytes));
  if (bytes.error().sys_errno == ENOENT || bytes.error().sys_errno == ENOTDIR) return std::optional<std::string>();
  return std::move(bytes).error();
}

}  // namespace

std::optional<std::string> AwsProfile::get(const std::string& key) const {
  for (const auto* section : {&from_credentials, &from_config}) {
    if (!*section) continue;
    if (auto it = (*section)->find(key); it != (*section)->end() && !it->second.empty()) return it->second;
  }
  return std::nullopt;
}

std::string AwsProfile::where() const {
  auto describe = [](const std::string& path) { return path.empty() ? std::string("(no home directory)") : path; };
  return describe(credentials_path) + " or " + describe(config_path);
}

std::string profile_name(const cloud::CredentialEnv& env, const std::optional<std::string>& explicit_profile) {
  if (explicit_profile && !explicit_profile->empty()) return *explicit_profile;
  return env.get("AWS_PROFILE").value_or("default");
}

bool profile_named(const cloud::CredentialEnv& env, const std::optional<std::string>& explicit_profile) {
  return (explicit_profile && !explicit_profile->empty()) || env.get("AWS_PROFILE").has_value();
}

Result<AwsProfile> load_profile(const cloud::CredentialEnv& env, const std::string& name) {
  AwsProfile profile;
  profile.name = name;
  profile.credentials_path = shared_file_path(env, "AWS_SHARED_CREDENTIALS_FILE", "credentials");
  profile.config_path = shared_file_path(env, "AWS_CONFIG_FILE", "config");
  for (const FileKind kind : {FileKind::credentials, FileKind::config}) {
    const std::string& path = kind == FileKind::config ? profile.config_path : profile.credentials_path;
    if (path.empty()) continue;
    auto bytes = read_if_present(path);
    if (!bytes) return std::move(bytes).error();
    if (!*bytes) continue;
    auto sections = parse_shared_file(**bytes, kind);
    if (auto it = sections.find(name); it != sections.end())
      (kind == FileKind::config ? profile.from_config : profile.from_credentials) = std::move(it->second);
  }
  return profile;
}

Result<std::optional<std::string>> profile_region(const cloud::CredentialEnv& env,
                                                  const std::optional<std::string>& explicit_profile) {
  auto profile = load_profile(env, profile_name(env, explicit_profile));
  if (!profile) return std::move(profile).error();
  // The config file is where the SDKs look for region; the credentials file only as a fallback.
  for (const auto* section : {&profile->from_config, &profile->from_credentials}) {
    if (!*section) continue;
    if (auto it = (*section)->find("region"); it != (*section)->end() && !it->second.empty())
      return std::optional<std::string>(it->second);
  }
  return std::optional<std::string>();
}

Result<std::optional<std::string>> resolve_region(const std::optional<std::string>& field,
                                                  const cloud::CredentialEnv& env,
                                                  const std::optional<std::string>& explicit_profile) {
  if (field && !field->empty()) return field;
  if (auto region = env.get("AWS_REGION")) return region;
  if (auto region = env.get("AWS_DEFAULT_REGION")) return region;
  return profile_region(env, explicit_profile);
}

std::optional<std::string> resolve_endpoint(const std::optional<std::string>& field, const cloud::CredentialEnv& env) {
  if (field && !field->empty()) return field;
  if (auto endpoint = env.get("AWS_ENDPOINT_URL_S3")) return endpoint;
  return env.get("AWS_ENDPOINT_URL");
}

}  // namespace datavo::s3
