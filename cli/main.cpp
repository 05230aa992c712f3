// Entry point of the `datavo` command: parses the command line and is the one place where Fatal is caught.
#include <cstdio>
#include <iostream>

#include "cli/cli.hpp"
#include "util/log.hpp"

namespace datavo::cli {

int exit_code_for(const Error& error) {
  switch (error.code) {
    case ErrorCode::config:
    case ErrorCode::invalid_argument: return k_exit_usage;
    default: return k_exit_failed;
  }
}

void print_json(const nlohmann::json& value) { std::cout << value.dump() << std::endl; }

std::string human_bytes(std::uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  if (unit == 0)
    std::snprintf(buffer, sizeof buffer, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buffer, sizeof buffer, "%.1f %s", value, units[unit]);
  return buffer;
}

nlohmann::json wait_for_uploads(ShardCacheHierarchy& cache) {
  const UploadSummary s = cache.flush_uploads(ShardCacheHierarchy::k_destructor_upload_bound);
  return {
      {"uploaded", s.uploaded}, {"already_present", s.already_present}, {"failed", s.failed}, {"pending", s.pending}};
}

std::string describe_uploads(const nlohmann::json& uploads) {
  std::string out = "uploaded " + std::to_string(uploads["uploaded"].get<std::uint64_t>()) + ", already present " +
                    std::to_string(uploads["already_present"].get<std::uint64_t>()) + ", failed " +
                    std::to_string(uploads["failed"].get<std::uint64_t>());
  if (const auto pending = uploads["pending"].get<std::uint64_t>(); pending > 0) {
    out += ", " + std::to_string(pending) + " abandoned (not done within " +
           std::to_string(ShardCacheHierarchy::k_destructor_upload_bound.count() / 1000) + " s)";
  }
  return out;
}

bool any_uploads(const nlohmann::json& uploads) {
  for (const char* field : {"uploaded", "already_present", "failed", "pending"}) {
    if (uploads[field].get<std::uint64_t>() > 0) return true;
  }
  return false;
}

}  // namespace datavo::cli

int main(int argc, char** argv) {
  using namespace datavo::cli;
  CLI::App app{"datavo: a content-addressed shard cache hierarchy for ML training data"};
  app.require_subcommand(1);
  app.fallthrough();
  GlobalOptions global;
  app.add_option("--config", global.config_path, "shards.yaml to use (overrides $DATAVO_SHARD_CACHE_CONFIG)");
  app.add_option("--instance", global.instance, "server instance whose entries to use (default: from $DATAVO_SERVER)");
  app.add_flag("--json", global.json, "print machine-readable JSON on stdout");
  app.add_flag("-v,--verbose", global.verbosity, "log more (-v info, -vv debug); see also $DATAVO_LOG_LEVEL");
  app.parse_complete_callback([&] {
    if (global.verbosity >= 2)
      datavo::log::set_level(datavo::log::Level::debug);
    else if (global.verbosity == 1)
      datavo::log::set_level(datavo::log::Level::info);
  });

  add_cache_commands(app, global);
  add_content_hash_command(app, global);
  add_origin_commands(app, global);
  add_dataset_commands(app, global);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? k_exit_ok : k_exit_usage;
  } catch (const Fatal& fatal) {
    datavo::log::write(datavo::log::Level::error, fatal.error.message);
    return fatal.exit_code;
  } catch (const std::exception& e) {
    datavo::log::write(datavo::log::Level::error, std::string("internal error: ") + e.what());
    return k_exit_failed;
  }
  return k_exit_ok;
}
