// `datavo pack`: builds or extends a dataset in an origin store (docs/protocol.md).
#include <iostream>

#include "cli/cli.hpp"
#include "datavo/origin.hpp"

namespace datavo::cli {
namespace {

void cmd_pack(const GlobalOptions& global, const PackOptions& options) {
  InterruptOnSignal interrupt;
  PackReport report = require(pack_dataset(options));
  if (report.skipped.notable() > 0) {
    std::cerr << "datavo: WARNING: " << options.source << ": skipped " << report.skipped.notable()
              << " members of the source tars, in no sample: " << describe_skips(report.skipped)
              << " (samples are made of regular files named <sample_id>.<key>; `tar --dereference "
                 "--hard-dereference` stores the files that links name)\n";
  }
  if (global.json) {
    const TarSkips& skipped = report.skipped;
    print_json({{"dataset", options.dataset},
                {"revision", report.revision},
                {"samples_added", report.samples_added},
                {"shards_added", report.shards_added},
                {"total_shards", report.total_shards},
                {"added_bytes", report.bytes_added.count()},
                {"skipped_members",
                 {{"symlinks", skipped.symlinks},
                  {"hard_links", skipped.hard_links},
                  {"other", skipped.other},
                  {"unnamed", skipped.unnamed},
                  {"directories", skipped.directories}}}});
    return;
  }
  if (report.samples_added == 0) {
    std::cout << options.dataset << ": nothing new in " << options.source << "; revision stays " << report.revision
              << "\n";
    return;
  }
  std::cout << options.dataset << " revision " << report.revision << ": added " << report.samples_added
            << " samples in " << report.shards_added << " shards (" << report.total_shards << " in all), "
            << human_bytes(report.bytes_added.count()) << " of new objects\n";
}

}  // namespace

void add_pack_command(CLI::App& app, GlobalOptions& global) {
  auto pack_options = std::make_shared<PackOptions>();
  auto* pack = app.add_subcommand("pack", "build or extend a dataset in an origin store");
  pack->add_option("source", pack_options->source,
                   "a directory of <sample_id>.<key> files, a directory of WebDataset tar shards, or one tar shard "
                   "(.tar, or compressed: .tar.gz/.tgz, .tar.zst/.tzst)")
      ->required();
  pack->add_option("--root", pack_options->store, "the store directory (created if missing)")->required();
  pack->add_option("--dataset", pack_options->dataset, "<dataset>/<split>, e.g. voice_demo_v1/train")->required();
  pack->add_option("--samples-per-shard", pack_options->samples_per_shard, "samples per new shard (default 1000)")
      ->check(CLI::PositiveNumber);
  pack->add_flag_callback(
      "--allow-missing-end-marker", [pack_options] { pack_options->end_marker = EndMarker::optional; },
      "accept source tars that end without the end-of-archive marker (two zero blocks), as some tools write "
      "them; by default such a tar is refused as cut short");
  pack->callback([&global, pack_options] { cmd_pack(global, *pack_options); });
}

}  // namespace datavo::cli
