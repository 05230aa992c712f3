// `datavo content-hash`: prints the content hash of a shard identity (docs/content-hash.md).
#include <iostream>

#include "cli/cli.hpp"
#include "datavo/content_hash.hpp"

namespace datavo::cli {

void add_content_hash_command(CLI::App& app, GlobalOptions& global) {
  auto* cmd = app.add_subcommand("content-hash", "compute the content hash of a shard's identity");
  auto identity = std::make_shared<ShardIdentity>();
  cmd->add_option("--manifest-ref", identity->manifest_ref, "dataset manifest reference")->required();
  cmd->add_option("--revision", identity->revision, "revision watermark (decimal)")->required();
  cmd->add_option("--shard-index", identity->shard_index, "shard index")->required();
  cmd->add_option("--key", identity->keys, "requested key (repeatable)")->required();
  cmd->add_option("--sample-id", identity->sample_ids, "sample id, in shard order (repeatable)");
  cmd->callback([identity, &global] {
    auto hash = compute_content_hash(*identity);
    if (global.json)
      print_json({{"content_hash", hash.hex()}});
    else
      std::cout << hash.hex() << "\n";
  });
}

}  // namespace datavo::cli
