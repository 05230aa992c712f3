#include "tier/s3/credentials.hpp"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "tier/cloud/xml.hpp"
#include "tier/s3/sigv4.hpp"
#include "util/log.hpp"
#include "util/percent.hpp"

extern char** environ;

namespace datavo::s3 {
namespace {

using SystemClock = std::chrono::system_clock;
using Json = nlohmann::json;

// Temporary credentials are refreshed when less than min(k_refresh_ahead, lifetime / k_refresh_fraction) of
// their lifetime is left: five minutes, as the SDKs do, for hour-long credentials, and early enough for
// credentials that only live a few seconds.
constexpr std::chrono::minutes k_refresh_ahead{5};
constexpr int k_refresh_fraction = 4;

// The metadata services answer in milliseconds when they exist and not at all on most machines: a short connect
// timeout and deadline keep an absent IMDS from stalling a tier for long.
constexpr Milliseconds k_metadata_connect_timeout{1000};
constexpr Milliseconds k_imds_probe_deadline{2000};
constexpr Milliseconds k_metadata_deadline{5000};
constexpr Seconds k_metadata_stall{2};
constexpr int k_metadata_attempts = 2;
// STS is a real service on the Internet: normal timeouts, a bounded whole.
constexpr Milliseconds k_sts_deadline{30'000};
constexpr int k_sts_attempts = 3;
// IMDSv2 session tokens may live up to 6 h; one is fetched per credential fetch, so any value works.
constexpr const char* k_imds_token_ttl = "21600";
// credential_process: its answer is a few hundred bytes; a process that hangs must not hang the tier.
constexpr std::size_t k_max_process_output = 64 * 1024;
constexpr Milliseconds k_process_timeout{60'000};
// Config, credentials and token files are small; the bound keeps a wrong path (a device, a huge file) harmless.
constexpr std::size_t k_max_file_size = 1024 * 1024;

const std::string k_imds_default_endpoint = "http://169.254.169.254";

std::string trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return std::string(text);
}

std::string to_lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); });
  return out;
}

// --- Files ------------------------------------------------------------------------------------------------

// The file's bytes; nullopt when it does not exist.
Result<std::optional<std::string>> read_small_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::optional<std::string>();
    return Error::from_errno(errno, "read " + path);
  }
  std::string out;
  char buffer[8192];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int err = errno;
      ::close(fd);
      return Error::from_errno(err, "read " + path);
    }
    if (got == 0) break;
    out.append(buffer, std::size_t(got));
    if (out.size() > k_max_file_size) {
      ::close(fd);
      return Error{ErrorCode::invalid_argument, path + " is larger than " + std::to_string(k_max_file_size) + " bytes"};
    }
  }
  ::close(fd);
  return std::optional<std::string>(std::move(out));
}

// A file that a configured source names: it must exist.
Result<std::string> read_required_file(const std::string& path, const std::string& what) {
  auto bytes = read_small_file(path);
  if (!bytes) return std::move(bytes).error();
  if (!*bytes) return Error{ErrorCode::not_found, what + " " + path + " does not exist"};
  return std::move(**bytes);
}

using Section = std::map<std::string, std::string>;

// The INI dialect of the AWS shared files: "[section]", "key = value" (keys case-insensitive), '#' and ';'
// comments. Indented lines continue a value or form a nested section ("s3 =\n  addressing_style = path"); no
// key used here lives there, so they are skipped.
std::map<std::string, Section> parse_ini(std::string_view text, bool config_file) {
  std::map<std::string, Section> sections;
  Section* current = nullptr;
  while (!text.empty()) {
    const auto newline = text.find('\n');
    std::string_view raw = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    const bool indented = !raw.empty() && (raw.front() == ' ' || raw.front() == '\t');
    const std::string line = trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      current = nullptr;
      const auto close = line.find(']');
      if (close == std::string::npos) continue;
      std::string name = trim(line.substr(1, close - 1));
      if (config_file) {
        // ~/.aws/config: "[default]" or "[profile name]"; other kinds ("[sso-session x]", "[services x]") and a
        // bare "[name]" are not profiles.
        if (name.rfind("profile", 0) == 0 && name.size() > 7 && std::isspace(static_cast<unsigned char>(name[7])))
          name = trim(name.substr(7));
        else if (name != "default")
          continue;
      }
      current = &sections[name];
      continue;
    }
    if (indented || current == nullptr) continue;
    const auto equals = line.find('=');
    if (equals == std::string::npos) continue;
    (*current)[to_lower(trim(line.substr(0, equals)))] = trim(line.substr(equals + 1));
  }
  return sections;
}

std::string home_of(const AwsEnvironment& env) {
  if (!env.home.empty()) return env.home;
  if (auto home = env.var("HOME")) return *home;
  std::vector<char> buffer(16384);
  struct passwd entry {};
  struct passwd* found = nullptr;
  if (::getpwuid_r(::getuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found && found->pw_dir)
    return found->pw_dir;
  return {};
}

std::string expand_home(const std::string& path, const AwsEnvironment& env) {
  if (path == "~" || path.rfind("~/", 0) == 0) return home_of(env) + path.substr(1);
  return path;
}

std::string shared_file_path(const AwsEnvironment& env, const char* variable, const char* default_name) {
  if (auto path = env.var(variable)) return expand_home(*path, env);
  const std::string home = home_of(env);
  return home.empty() ? std::string() : home + "/.aws/" + default_name;
}

// One profile as the two shared files describe it.
struct Profile {
  std::string name;
  std::string credentials_path;
  std::string config_path;
  std::optional<Section> from_credentials;  // nullopt: no such section (or no such file)
  std::optional<Section> from_config;

  bool exists() const { return from_credentials || from_config; }
  // A key of the profile, the credentials file first (as the SDKs merge them).
  std::optional<std::string> get(const std::string& key) const {
    for (const auto* section : {&from_credentials, &from_config}) {
      if (!*section) continue;
      if (auto it = (*section)->find(key); it != (*section)->end() && !it->second.empty()) return it->second;
    }
    return std::nullopt;
  }
  std::string where() const {
    auto describe = [](const std::string& path) { return path.empty() ? std::string("(no home directory)") : path; };
    return describe(credentials_path) + " or " + describe(config_path);
  }
};

Result<Profile> load_profile(const AwsEnvironment& env, const std::string& name) {
  Profile profile;
  profile.name = name;
  profile.credentials_path = shared_file_path(env, "AWS_SHARED_CREDENTIALS_FILE", "credentials");
  profile.config_path = shared_file_path(env, "AWS_CONFIG_FILE", "config");
  for (bool config : {false, true}) {
    const std::string& path = config ? profile.config_path : profile.credentials_path;
    if (path.empty()) continue;
    auto bytes = read_small_file(path);
    if (!bytes) return std::move(bytes).error();
    if (!*bytes) continue;
    auto sections = parse_ini(**bytes, config);
    if (auto it = sections.find(name); it != sections.end())
      (config ? profile.from_config : profile.from_credentials) = std::move(it->second);
  }
  return profile;
}

// --- Parsing the answers ----------------------------------------------------------------------------------

std::optional<int> parse_int(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string json_string(const Json& object, const char* key) {
  if (!object.contains(key) || !object[key].is_string()) return {};
  return object[key].get<std::string>();
}

// The credentials of a JSON answer (ECS, IMDS, credential_process), whose fields are named alike. `token_key` is
// "Token" or "SessionToken". The message never quotes the answer: it holds secrets.
Result<AwsCredentials> credentials_from_json(std::string_view text, const char* token_key, const std::string& source) {
  const Json answer = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (answer.is_discarded() || !answer.is_object())
    return Error{ErrorCode::remote, source + ": the answer is not a JSON object"};
  AwsCredentials out;
  out.source = source;
  out.access_key_id = json_string(answer, "AccessKeyId");
  out.secret_access_key = json_string(answer, "SecretAccessKey");
  out.session_token = json_string(answer, token_key);
  if (out.access_key_id.empty() || out.secret_access_key.empty())
    return Error{ErrorCode::remote, source + ": the answer has no AccessKeyId or no SecretAccessKey"};
  if (const std::string expiration = json_string(answer, "Expiration"); !expiration.empty()) {
    out.expiration = parse_iso8601(expiration);
    if (!out.expiration)
      return Error{ErrorCode::remote, source + ": the Expiration \"" + expiration + "\" is not an ISO 8601 time"};
  }
  return out;
}

// --- credential_process -----------------------------------------------------------------------------------

// Splits a command line as a POSIX shell would split words (the SDKs use shlex): blanks separate, '...' is
// literal, "..." keeps blanks and honours \" \\ \$ \`, a backslash outside quotes escapes the next character.
// Nothing is expanded: there is no shell.
Result<std::vector<std::string>> split_command(std::string_view line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (c == '\'') {
      const auto end = line.find('\'', i + 1);
      if (end == std::string_view::npos) return Error{ErrorCode::config, "credential_process: unterminated '"};
      word += line.substr(i + 1, end - i - 1);
      i = end;
      in_word = true;
    } else if (c == '"') {
      std::size_t j = i + 1;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '\\' && j + 1 < line.size() &&
            std::string_view("\"\\$`").find(line[j + 1]) != std::string_view::npos)
          ++j;
        word += line[j];
      }
      if (j >= line.size()) return Error{ErrorCode::config, "credential_process: unterminated \""};
      i = j;
      in_word = true;
    } else if (c == '\\' && i + 1 < line.size()) {
      word += line[++i];
      in_word = true;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  if (words.empty()) return Error{ErrorCode::config, "credential_process is empty"};
  return words;
}

// Runs `argv` with its stdout captured (stderr and stdin are the caller's). The message names the program and
// its exit status, never its output.
Result<std::string> run_process(const std::vector<std::string>& argv) {
  const std::string& program = argv.front();
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Error::from_errno(errno, "credential_process: pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = ::posix_spawnp(&pid, program.c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (spawned != 0) {
    ::close(pipe_fds[0]);
    return Error::from_errno(spawned, "credential_process: cannot run " + program);
  }

  std::string out;
  std::optional<Error> failure;
  const auto deadline = std::chrono::steady_clock::now() + k_process_timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<Milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left <= Milliseconds{0}) {
      failure = Error{ErrorCode::timeout, "credential_process " + program + " did not finish within " +
                                              std::to_string(k_process_timeout.count() / 1000) + " s"};
      break;
    }
    struct pollfd readable {
      pipe_fds[0], POLLIN, 0
    };
    const int ready = ::poll(&readable, 1, int(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      failure = Error::from_errno(errno, "credential_process: poll");
      break;
    }
    if (ready == 0) continue;
    char buffer[4096];
    const ssize_t got = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      failure = Error::from_errno(errno, "credential_process: read");
      break;
    }
    if (got == 0) break;
    out.append(buffer, std::size_t(got));
    if (out.size() > k_max_process_output) {
      failure = Error{ErrorCode::remote, "credential_process " + program + " wrote more than " +
                                             std::to_string(k_max_process_output) + " bytes"};
      break;
    }
  }
  ::close(pipe_fds[0]);
  if (failure) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (failure) return *failure;
  if (WIFSIGNALED(status))
    return Error{ErrorCode::remote,
                 "credential_process " + program + " was killed by signal " + std::to_string(WTERMSIG(status))};
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Error{ErrorCode::remote,
                 "credential_process " + program + " exited with status " + std::to_string(WEXITSTATUS(status))};
  return out;
}

Result<AwsCredentials> credentials_from_process(const std::string& command, const std::string& source) {
  auto argv = split_command(command);
  if (!argv) return std::move(argv).error();
  auto output = run_process(*argv);
  if (!output) return std::move(output).error();
  const Json answer = Json::parse(*output, nullptr, false);
  if (answer.is_discarded() || !answer.is_object())
    return Error{ErrorCode::remote, source + ": the output is not a JSON object"};
  if (!answer.contains("Version") || !answer["Version"].is_number_integer() || answer["Version"].get<int>() != 1)
    return Error{ErrorCode::remote, source + ": the output's \"Version\" is not 1"};
  return credentials_from_json(*output, "SessionToken", source);
}

// --- The chain --------------------------------------------------------------------------------------------

// What one link found: credentials, or nullopt with the reason it did not apply (in `notes`).
using Found = Result<std::optional<AwsCredentials>>;

bool is_loopback_or_container_host(const std::string& host) {
  if (host == "localhost" || host == "[::1]" || host == "169.254.170.2" || host == "169.254.170.23" ||
      host == "[fd00:ec2::23]")
    return true;
  // 127.0.0.0/8, as an address: "127.0.0.1.example.com" is a name anyone may own.
  struct in_addr address {};
  return ::inet_pton(AF_INET, host.c_str(), &address) == 1 && (ntohl(address.s_addr) >> 24) == 127;
}

// The host of an http(s) URL, lowercased, brackets kept; empty when there is none.
std::string url_host(std::string_view url) {
  auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return {};
  std::string_view rest = url.substr(scheme_end + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (auto at = rest.rfind('@'); at != std::string_view::npos) rest.remove_prefix(at + 1);
  if (!rest.empty() && rest.front() == '[') return to_lower(rest.substr(0, rest.find(']') + 1));
  return to_lower(rest.substr(0, rest.find(':')));
}

class DefaultChain final : public AwsCredentialProvider {
 public:
  DefaultChain(AwsEnvironment env, std::optional<std::string> profile)
      : env_(std::move(env)),
        profile_(std::move(profile)),
        clock_(env_.clock_or_system()),
        metadata_http_(metadata_options(), clock_),
        sts_http_(sts_options(), clock_) {}

  Result<AwsCredentials> get() override {
    std::lock_guard lock(mutex_);
    const auto now = clock_->wall_now();
    if (cached_ && !invalidated_ && !due_for_refresh(now)) return *cached_;
    auto fresh = resolve();
    if (fresh) {
      LOG_DEBUG("AWS credentials from " << fresh->source << (fresh->expiration ? ", temporary" : ", long-term"));
      cached_ = *fresh;
      fetched_at_ = now;
      invalidated_ = false;
      return std::move(fresh).value();
    }
    // A refresh ahead of expiry failed: what we hold still works until it expires.
    if (cached_ && !invalidated_ && cached_->expiration && now < *cached_->expiration) {
      LOG_WARNING("refreshing the AWS credentials from " << cached_->source << " failed (" << fresh.error().message
                                                         << "); using the current ones until they expire");
      return *cached_;
    }
    return std::move(fresh).error();
  }

  void invalidate() override {
    std::lock_guard lock(mutex_);
    invalidated_ = true;
  }

 private:
  static TransportOptions metadata_options() {
    TransportOptions options;
    options.connect_timeout = k_metadata_connect_timeout;
    options.stall_timeout = k_metadata_stall;
    options.max_attempts = k_metadata_attempts;
    options.initial_backoff = Milliseconds{100};
    options.max_backoff = Milliseconds{500};
    return options;
  }
  static TransportOptions sts_options() {
    TransportOptions options;
    options.max_attempts = k_sts_attempts;
    return options;
  }

  bool due_for_refresh(SystemClock::time_point now) const {
    if (!cached_->expiration) return false;
    const auto lifetime = *cached_->expiration - fetched_at_;
    const auto ahead = std::min<SystemClock::duration>(k_refresh_ahead, lifetime / k_refresh_fraction);
    return now >= *cached_->expiration - ahead;
  }

  Result<AwsCredentials> resolve() {
    std::vector<std::string> notes;
    auto fail = [](Error error) {
      error.message = "AWS credentials: " + error.message;
      return error;
    };
    // The environment first and on its own: keys there win even when the shared files cannot be read.
    auto from_env = from_environment(notes);
    if (!from_env) return fail(std::move(from_env).error());
    if (*from_env) return std::move(**from_env);
    auto profile = load_profile(env_, profile_name(env_, profile_));
    if (!profile) return fail(std::move(profile).error());
    using Link = Found (DefaultChain::*)(const Profile&, std::vector<std::string>&);
    for (Link link : {&DefaultChain::from_web_identity, &DefaultChain::from_shared_files, &DefaultChain::from_container,
                      &DefaultChain::from_imds}) {
      auto found = (this->*link)(*profile, notes);
      if (!found) return fail(std::move(found).error());
      if (*found) return std::move(**found);
    }
    std::string message = "no AWS credentials found; tried: ";
    for (std::size_t i = 0; i < notes.size(); ++i) message += (i ? "; " : "") + notes[i];
    return Error{ErrorCode::permission_denied, std::move(message)};
  }

  Found from_environment(std::vector<std::string>& notes) {
    auto key = env_.var("AWS_ACCESS_KEY_ID");
    auto secret = env_.var("AWS_SECRET_ACCESS_KEY");
    if (!key && !secret) {
      notes.push_back("environment: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set");
      return std::optional<AwsCredentials>();
    }
    if (!key || !secret)
      return Error{ErrorCode::config, std::string(key ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY") +
                                          " is set but " + (key ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID") +
                                          " is not"};
    AwsCredentials out{*key, *secret, env_.var("AWS_SESSION_TOKEN").value_or(""), std::nullopt, "environment"};
    return std::optional<AwsCredentials>(std::move(out));
  }

  Found from_web_identity(const Profile& profile, std::vector<std::string>& notes) {
    std::optional<std::string> token_file = env_.var("AWS_WEB_IDENTITY_TOKEN_FILE");
    std::optional<std::string> role_arn = env_.var("AWS_ROLE_ARN");
    std::optional<std::string> session_name = env_.var("AWS_ROLE_SESSION_NAME");
    std::string origin = "AWS_WEB_IDENTITY_TOKEN_FILE";
    if (!token_file || !role_arn) {
      token_file = profile.get("web_identity_token_file");
      role_arn = profile.get("role_arn");
      session_name = profile.get("role_session_name");
      origin = "profile " + profile.name;
      if (!token_file || !role_arn) {
        notes.push_back(
            "web identity: AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN are not both set, nor "
            "web_identity_token_file and role_arn in profile " +
            profile.name);
        return std::optional<AwsCredentials>();
      }
      token_file = expand_home(*token_file, env_);
    }
    const std::string source = "web identity (" + origin + ", role " + *role_arn + ")";
    auto token = read_required_file(*token_file, "the web identity token file");
    if (!token) return Error{token.error().code, source + ": " + token.error().message};
    const std::string jwt = trim(*token);
    if (jwt.empty()) return Error{ErrorCode::config, source + ": the token file " + *token_file + " is empty"};

    auto region = resolve_region(std::nullopt, env_, profile.name);
    if (!region) return std::move(region).error();
    const std::string endpoint = sts_endpoint(env_, *region);
    if (!session_name) {
      const auto millis =
          std::chrono::duration_cast<std::chrono::milliseconds>(clock_->wall_now().time_since_epoch()).count();
      session_name = "datavo-" + std::to_string(millis);
    }
    net::HttpRequest request;
    request.method = net::HttpMethod::post;
    request.url = endpoint;
    request.headers = {{"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"},
                       {"Accept", "application/xml"}};
    // In the body, not the URL: the token is a secret and URLs reach logs (redacted, but still).
    request.body = "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=" + util::percent_encode(*role_arn) +
                   "&RoleSessionName=" + util::percent_encode(*session_name) +
                   "&WebIdentityToken=" + util::percent_encode(jwt);
    request.idempotent = true;  // assuming a role twice does no harm
    request.deadline = k_sts_deadline;
    auto response = sts_http_.perform(request);
    if (!response)
      return Error{response.error().code,
                   source + ": STS AssumeRoleWithWebIdentity failed: " + response.error().message};
    auto fields = cloud::xml_child_texts(response->body, "Credentials");
    AwsCredentials out;
    out.source = source;
    if (fields) {
      out.access_key_id = trim((*fields)["AccessKeyId"]);
      out.secret_access_key = trim((*fields)["SecretAccessKey"]);
      out.session_token = trim((*fields)["SessionToken"]);
      out.expiration = parse_iso8601(trim((*fields)["Expiration"]));
    }
    if (out.access_key_id.empty() || out.secret_access_key.empty() || out.session_token.empty() || !out.expiration)
      return Error{ErrorCode::remote,
                   source + ": the STS answer from " + log::redact_url(endpoint) + " has no complete <Credentials>"};
    return std::optional<AwsCredentials>(std::move(out));
  }

  Found from_shared_files(const Profile& profile, std::vector<std::string>& notes) {
    if (!profile.exists()) {
      const bool named = (profile_ && !profile_->empty()) || env_.var("AWS_PROFILE").has_value();
      if (named) return Error{ErrorCode::config, "the profile " + profile.name + " is in neither " + profile.where()};
      notes.push_back("shared files: no profile " + profile.name + " in " + profile.where());
      return std::optional<AwsCredentials>();
    }
    if (profile.get("role_arn") && (profile.get("source_profile") || profile.get("credential_source")))
      return Error{ErrorCode::unsupported, "profile " + profile.name +
                                               ": role_arn with source_profile or credential_source (AssumeRole) "
                                               "is not supported; use web_identity_token_file, "
                                               "credential_process or static keys"};
    auto static_keys = [&](const std::optional<Section>& section, const std::string& file) -> Found {
      if (!section) return std::optional<AwsCredentials>();
      auto value = [&](const char* key) {
        auto it = section->find(key);
        return it == section->end() ? std::string() : it->second;
      };
      const std::string key = value("aws_access_key_id");
      const std::string secret = value("aws_secret_access_key");
      if (key.empty() && secret.empty()) return std::optional<AwsCredentials>();
      if (key.empty() || secret.empty())
        return Error{ErrorCode::config, "profile " + profile.name + " in " + file + " has " +
                                            (key.empty() ? "aws_secret_access_key but no aws_access_key_id"
                                                         : "aws_access_key_id but no aws_secret_access_key")};
      return std::optional<AwsCredentials>(AwsCredentials{key, secret, value("aws_session_token"), std::nullopt,
                                                          "profile " + profile.name + " (" + file + ")"});
    };
    auto from_credentials_file = static_keys(profile.from_credentials, profile.credentials_path);
    if (!from_credentials_file || *from_credentials_file) return from_credentials_file;
    if (auto command = profile.get("credential_process")) {
      auto found = credentials_from_process(*command, "profile " + profile.name + " credential_process");
      if (!found) return std::move(found).error();
      return std::optional<AwsCredentials>(std::move(found).value());
    }
    auto from_config_file = static_keys(profile.from_config, profile.config_path);
    if (!from_config_file || *from_config_file) return from_config_file;
    notes.push_back("shared files: profile " + profile.name + " has no static keys nor credential_process");
    return std::optional<AwsCredentials>();
  }

  Found from_container(const Profile&, std::vector<std::string>& notes) {
    std::string url;
    if (auto relative = env_.var("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")) {
      url = env_.container_host + (relative->front() == '/' ? "" : "/") + *relative;
    } else if (auto full = env_.var("AWS_CONTAINER_CREDENTIALS_FULL_URI")) {
      url = *full;
      // The SDKs' rule: plain http only to this machine or the ECS / EKS agent, so that a token (and the
      // credentials) never cross a network in the clear.
      const bool https = to_lower(url.substr(0, 8)) == "https://";
      const bool http = to_lower(url.substr(0, 7)) == "http://";
      if (!https && !(http && is_loopback_or_container_host(url_host(url))))
        return Error{ErrorCode::config, "AWS_CONTAINER_CREDENTIALS_FULL_URI " + log::redact_url(url) +
                                            " must be https, or http to a loopback address or the ECS/EKS agent"};
    } else {
      notes.push_back("ECS container: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and _FULL_URI are not set");
      return std::optional<AwsCredentials>();
    }
    const std::string source = "ECS container endpoint " + log::redact_url(url);
    net::HttpRequest request;
    request.url = url;
    request.headers = {{"Accept", "application/json"}};
    std::optional<std::string> token;
    if (auto token_file = env_.var("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")) {
      // Read for every fetch: EKS Pod Identity rotates the file.
      auto text = read_required_file(*token_file, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
      if (!text) return Error{text.error().code, source + ": " + text.error().message};
      token = trim(*text);
    } else {
      token = env_.var("AWS_CONTAINER_AUTHORIZATION_TOKEN");
    }
    if (token) {
      if (token->find_first_of("\r\n") != std::string::npos)
        return Error{ErrorCode::config, source + ": the authorization token contains a line break"};
      request.headers.push_back({"Authorization", *token});
    }
    request.deadline = k_metadata_deadline;
    auto response = metadata_http_.perform(request);
    // The transport's message names the URL already.
    if (!response) return Error{response.error().code, "ECS container endpoint: " + response.error().message};
    auto found = credentials_from_json(response->body, "Token", source);
    if (!found) return std::move(found).error();
    return std::optional<AwsCredentials>(std::move(found).value());
  }

  Found from_imds(const Profile&, std::vector<std::string>& notes) {
    if (auto disabled = env_.var("AWS_EC2_METADATA_DISABLED"); disabled && to_lower(*disabled) == "true") {
      notes.push_back("EC2 instance metadata: disabled by AWS_EC2_METADATA_DISABLED");
      return std::optional<AwsCredentials>();
    }
    std::string endpoint = env_.var("AWS_EC2_METADATA_SERVICE_ENDPOINT").value_or(k_imds_default_endpoint);
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
    const std::string source = "EC2 instance metadata " + log::redact_url(endpoint);

    net::HttpRequest token_request;
    token_request.method = net::HttpMethod::put;
    token_request.url = endpoint + "/latest/api/token";
    token_request.headers = {{"X-aws-ec2-metadata-token-ttl-seconds", k_imds_token_ttl}};
    token_request.deadline = k_imds_probe_deadline;
    auto token = metadata_http_.perform(token_request);
    if (!token) {
      // The usual answer off EC2: nobody there. (IMDSv1 without a token is not used: IMDSv2 is on every
      // instance type, and v1 is what SSRF attacks reach.)
      notes.push_back(source + ": no IMDSv2 session token (" + token.error().message + ")");
      return std::optional<AwsCredentials>();
    }
    const std::string session = trim(token->body);
    const net::HttpHeaders with_token = {{"X-aws-ec2-metadata-token", session}};

    net::HttpRequest role_request;
    role_request.url = endpoint + "/latest/meta-data/iam/security-credentials/";
    role_request.headers = with_token;
    role_request.accepted_statuses = {404};
    role_request.deadline = k_metadata_deadline;
    auto roles = metadata_http_.perform(role_request);
    if (!roles) return Error{roles.error().code, "EC2 instance metadata: " + roles.error().message};
    const std::string role = trim(roles->body.substr(0, roles->body.find('\n')));
    if (roles->status == 404 || role.empty()) {
      notes.push_back(source + ": no IAM role is attached to this instance");
      return std::optional<AwsCredentials>();
    }
    net::HttpRequest credentials_request;
    credentials_request.url = endpoint + "/latest/meta-data/iam/security-credentials/" + util::percent_encode(role);
    credentials_request.headers = with_token;
    credentials_request.deadline = k_metadata_deadline;
    auto answer = metadata_http_.perform(credentials_request);
    if (!answer) return Error{answer.error().code, "EC2 instance metadata: " + answer.error().message};
    const Json parsed = Json::parse(answer->body, nullptr, false);
    if (parsed.is_object() && parsed.contains("Code") && parsed["Code"].is_string() &&
        parsed["Code"].get<std::string>() != "Success")
      return Error{ErrorCode::remote, source + ": role " + role + ": Code " + parsed["Code"].get<std::string>()};
    auto found = credentials_from_json(answer->body, "Token", source + " (role " + role + ")");
    if (!found) return std::move(found).error();
    return std::optional<AwsCredentials>(std::move(found).value());
  }

  const AwsEnvironment env_;
  const std::optional<std::string> profile_;
  const std::shared_ptr<net::Clock> clock_;
  net::HttpClient metadata_http_;
  net::HttpClient sts_http_;

  std::mutex mutex_;  // serializes get(): one fetch at a time, and guards what follows
  std::optional<AwsCredentials> cached_;
  SystemClock::time_point fetched_at_;
  bool invalidated_ = false;
};

class StaticCredentials final : public AwsCredentialProvider {
 public:
  explicit StaticCredentials(AwsCredentials credentials) : credentials_(std::move(credentials)) {}
  Result<AwsCredentials> get() override { return credentials_; }
  void invalidate() override {}

 private:
  const AwsCredentials credentials_;
};

}  // namespace

std::optional<std::string> AwsEnvironment::var(const std::string& name) const {
  std::optional<std::string> value;
  if (getenv) {
    value = getenv(name);
  } else if (const char* text = std::getenv(name.c_str())) {
    value = std::string(text);
  }
  if (value && value->empty()) return std::nullopt;
  return value;
}

std::shared_ptr<net::Clock> AwsEnvironment::clock_or_system() const { return clock ? clock : net::system_clock(); }

std::shared_ptr<AwsCredentialProvider> make_default_credential_chain(AwsEnvironment env,
                                                                     std::optional<std::string> profile) {
  return std::make_shared<DefaultChain>(std::move(env), std::move(profile));
}

std::shared_ptr<AwsCredentialProvider> make_static_credentials(AwsCredentials credentials) {
  if (credentials.source.empty()) credentials.source = "static credentials";
  return std::make_shared<StaticCredentials>(std::move(credentials));
}

std::string profile_name(const AwsEnvironment& env, const std::optional<std::string>& explicit_profile) {
  if (explicit_profile && !explicit_profile->empty()) return *explicit_profile;
  return env.var("AWS_PROFILE").value_or("default");
}

Result<std::optional<std::string>> profile_region(const AwsEnvironment& env,
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

Result<std::optional<std::string>> resolve_region(const std::optional<std::string>& field, const AwsEnvironment& env,
                                                  const std::optional<std::string>& explicit_profile) {
  if (field && !field->empty()) return field;
  if (auto region = env.var("AWS_REGION")) return region;
  if (auto region = env.var("AWS_DEFAULT_REGION")) return region;
  return profile_region(env, explicit_profile);
}

std::optional<std::string> resolve_endpoint(const std::optional<std::string>& field, const AwsEnvironment& env) {
  if (field && !field->empty()) return field;
  if (auto endpoint = env.var("AWS_ENDPOINT_URL_S3")) return endpoint;
  return env.var("AWS_ENDPOINT_URL");
}

std::string sts_endpoint(const AwsEnvironment& env, const std::optional<std::string>& region) {
  if (auto endpoint = env.var("AWS_ENDPOINT_URL_STS")) return *endpoint;
  if (auto endpoint = env.var("AWS_ENDPOINT_URL")) return *endpoint;
  if (region && !region->empty()) return "https://sts." + *region + ".amazonaws.com";
  return "https://sts.amazonaws.com";
}

std::optional<std::chrono::system_clock::time_point> parse_iso8601(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.fraction](Z|+hh:mm|-hh:mm)
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' || (text[10] != 'T' && text[10] != 't') || text[13] != ':' ||
      text[16] != ':')
    return std::nullopt;
  auto number = [&](std::size_t at, std::size_t length) { return parse_int(text.substr(at, length)); };
  auto year = number(0, 4), month = number(5, 2), day = number(8, 2);
  auto hour = number(11, 2), minute = number(14, 2), second = number(17, 2);
  if (!year || !month || !day || !hour || !minute || !second || *month < 1 || *month > 12 || *day < 1 || *day > 31 ||
      *hour > 23 || *minute > 59 || *second > 60)
    return std::nullopt;
  std::size_t at = 19;
  if (at < text.size() && text[at] == '.') {
    ++at;
    const std::size_t digits = at;
    while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) ++at;
    if (at == digits) return std::nullopt;
  }
  std::chrono::seconds offset{0};
  const std::string_view zone = text.substr(at);
  if (zone == "Z" || zone == "z") {
  } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':') {
    auto hours = parse_int(zone.substr(1, 2)), minutes = parse_int(zone.substr(4, 2));
    if (!hours || !minutes || *hours > 23 || *minutes > 59) return std::nullopt;
    offset = std::chrono::hours{*hours} + std::chrono::minutes{*minutes};
    if (zone[0] == '-') offset = -offset;
  } else {
    return std::nullopt;
  }
  struct tm utc {};
  utc.tm_year = *year - 1900;
  utc.tm_mon = *month - 1;
  utc.tm_mday = *day;
  utc.tm_hour = *hour;
  utc.tm_min = *minute;
  utc.tm_sec = *second;
  const time_t seconds = ::timegm(&utc);
  if (seconds == time_t(-1)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(seconds) - offset;
}

}  // namespace datavo::s3
