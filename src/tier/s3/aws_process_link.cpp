// The credential_process link of the AWS chain: the profile's command, split as the SDKs split it, run without a
// shell through util::run_program (its own process group, stdin from /dev/null, bounded in time and output), its
// JSON answer read as botocore reads it.
#include <nlohmann/json.hpp>
#include <vector>

#include "tier/s3/aws_config.hpp"
#include "tier/s3/aws_links.hpp"
#include "util/log.hpp"
#include "util/subprocess.hpp"
#include "util/text.hpp"

namespace datavo::s3 {
namespace {

using Found = Result<std::optional<AwsCredentials>>;

// The answer is a few hundred bytes; a process that hangs must not hang the tier.
constexpr std::size_t k_max_process_output = 64 * 1024;
constexpr Milliseconds k_process_timeout{60'000};
// How much of the process's stderr an Error quotes (its own message, never its stdout, which holds secrets).
constexpr std::size_t k_max_stderr_quote = 300;

// Splits a command line as a POSIX shell would split words (the SDKs use shlex): blanks separate, '...' is
// literal, "..." keeps blanks and honours \" \\ \$ \`, a backslash outside quotes escapes the next character.
// Nothing is expanded: there is no shell. The SDKs' dialect; no Debian shell-words library matches it.
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
      continue;
    }
    in_word = true;
    if (c == '\'') {
      const auto end = line.find('\'', i + 1);
      if (end == std::string_view::npos) return Error{ErrorCode::config, "credential_process: unterminated '"};
      word += line.substr(i + 1, end - i - 1);
      i = end;
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
    } else if (c == '\\' && i + 1 < line.size()) {
      word += line[++i];
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  if (words.empty()) return Error{ErrorCode::config, "credential_process is empty"};
  return words;
}

// The program to run: argv[0] itself when it holds a '/', else the first executable of that name in an absolute
// directory of $PATH (never one in the current directory).
Result<std::string> program_of(const std::string& command, const cloud::CredentialEnv& env, const std::string& what) {
  if (command.find('/') != std::string::npos) return command;
  if (auto found = util::find_in_path(command, env.get("PATH").value_or(""))) return *found;
  return Error{ErrorCode::config, what + ": " + command + " is not in an absolute directory of $PATH"};
}

// The first line of `text`, bounded.
std::string first_line(std::string_view text) {
  text = util::trim(text);
  text = text.substr(0, text.find('\n'));
  if (text.size() > k_max_stderr_quote) return std::string(text.substr(0, k_max_stderr_quote)) + "...";
  return std::string(text);
}

Result<AwsCredentials> run_credential_process(const std::string& command_line, const cloud::CredentialEnv& env,
                                              const std::string& what) {
  auto argv = split_command(command_line);
  if (!argv) return Error{argv.error().code, what + ": " + argv.error().message};
  auto program = program_of(argv->front(), env, what);
  if (!program) return std::move(program).error();
  LOG_DEBUG(what << ": running " << *program);
  util::RunOptions options;
  options.timeout = k_process_timeout;
  options.max_output = k_max_process_output;
  auto run = util::run_program(*program, *argv, options);
  if (!run) return Error{run.error().code, what + ": " + run.error().message};
  if (run->exit_code != 0) {
    const std::string message = first_line(run->err);
    return Error{ErrorCode::remote, what + ": " + *program +
                                        (run->exit_code < 0 ? std::string(" was killed by a signal")
                                                            : " exited with status " + std::to_string(run->exit_code)) +
                                        (message.empty() ? "" : ": " + message)};
  }
  const auto answer = nlohmann::json::parse(run->out, nullptr, /*allow_exceptions=*/false);
  if (!answer.is_object()) return Error{ErrorCode::remote, what + ": the output is not a JSON object"};
  const auto version = answer.find("Version");
  if (version == answer.end() || !version->is_number_integer() || version->get<int>() != 1)
    return Error{ErrorCode::remote, what + ": the output's \"Version\" is not 1"};
  return credentials_from_json(run->out, "SessionToken", what);
}

class ProcessLink final : public AwsLink {
 public:
  ProcessLink(const cloud::CredentialEnv& env, std::optional<std::string> profile)
      : env_(env), profile_(std::move(profile)) {}
  std::string name() const override { return "credential_process"; }
  Found fetch(std::string& why) override {
    auto profile = load_profile(env_, profile_name(env_, profile_));
    if (!profile) return std::move(profile).error();
    auto command = profile->get("credential_process");
    if (!command) {
      why = "profile " + profile->name + " has none";
      return std::optional<AwsCredentials>();
    }
    auto found = run_credential_process(*command, env_, "profile " + profile->name + " credential_process");
    if (!found) return std::move(found).error();
    return std::optional<AwsCredentials>(std::move(*found));
  }

 private:
  const cloud::CredentialEnv env_;
  const std::optional<std::string> profile_;
};

}  // namespace

std::unique_ptr<AwsLink> make_process_link(const cloud::CredentialEnv& env, std::optional<std::string> profile) {
  return std::make_unique<ProcessLink>(env, std::move(profile));
}

}  // namespace datavo::s3
