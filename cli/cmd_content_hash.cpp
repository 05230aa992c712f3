// `datavo content-hash`: prints the content hash of a shard identity (docs/content-hash.md).
#include <iostream>

#include "cli/cli.hpp"
#include "datavo/content_hash.hpp"
#include "datavo/protocol.hpp"

namespace datavo::cli {
namespace {

// A hash of an identity no server can emit could never match a cached shard: refuse it, naming the argument.
[[noreturn]] void refuse(const std::string& argument, const std::string& value, const std::string& why) {
  throw Fatal{k_exit_usage, Error{ErrorCode::invalid_argument, argument + " '" + value + "': " + why}};
}

void validate(const ShardIdentity& identity) {
  if (identity.manifest_ref.empty()) refuse("--manifest-ref", identity.manifest_ref, "must not be empty");
  // As the server writes revisions: a positive decimal without leading zeros, at most 18 digits.
  if (!protocol::parse_number(identity.revision, 1)) {
    refuse("--revision", identity.revision,
           "expected a positive decimal integer without leading zeros (at most 18 digits), as the server emits it");
  }
  for (const auto& key : identity.keys) {
    if (auto valid = protocol::validate_name("key", key); !valid) refuse("--key", key, valid.error().message);
  }
  for (const auto& id : identity.sample_ids) {
    if (auto valid = protocol::validate_sample_id(id); !valid) refuse("--sample-id", id, valid.error().message);
  }
}

}  // namespace

void add_content_hash_command(CLI::App& app, GlobalOptions& global) {
  auto* cmd = app.add_subcommand("content-hash", "compute the content hash of a shard's identity");
  cmd->footer(
      "The revision, keys and sample ids are checked as the origin checks them (docs/protocol.md): a revision is a\n"
      "positive decimal without leading zeros, a key a name, a sample id '/'-separated components. Anything else\n"
      "is refused with exit 2, since its hash could never match a shard a server serves.");
  auto identity = std::make_shared<ShardIdentity>();
  cmd->add_option("--manifest-ref", identity->manifest_ref, "dataset manifest reference")->required();
  cmd->add_option("--revision", identity->revision, "revision watermark (positive decimal)")->required();
  cmd->add_option("--shard-index", identity->shard_index, "shard index")->required();
  cmd->add_option("--key", identity->keys, "requested key (repeatable)")->required();
  cmd->add_option("--sample-id", identity->sample_ids, "sample id, in shard order (repeatable)");
  cmd->callback([identity, &global] {
    validate(*identity);
    auto hash = compute_content_hash(*identity);
    if (global.json)
      print_json({{"content_hash", hash.hex()}});
    else
      std::cout << hash.hex() << "\n";
  });
}

}  // namespace datavo::cli
