// `datavo demo`: the main job, self-contained (datavo::run_demo); prints the cold and the warm pass side by side.
#include <iomanip>
#include <iostream>

#include "cli/cli.hpp"
#include "datavo/demo.hpp"
#include "util/human.hpp"

namespace datavo::cli {
namespace {

struct DemoArgs {
  std::size_t samples = 2000;
  std::size_t samples_per_shard = 200;
  bool keep = false;
};

double per_second(double count, const DemoPass& pass) {
  const double seconds = pass.elapsed.count();
  return seconds > 0 ? count / seconds : 0;
}

nlohmann::json pass_json(const DemoPass& pass) {
  return {{"seconds", pass.elapsed.count()},
          {"samples", pass.samples},
          {"valid_wavs", pass.valid_wavs},
          {"field_bytes", pass.field_bytes.count()},
          {"samples_per_second", per_second(double(pass.samples), pass)},
          {"mb_per_second", per_second(megabytes(pass.field_bytes), pass)},
          {"origin_shards", pass.origin_shards},
          {"requests",
           {{"manifest", pass.requests.manifest},
            {"not_modified", pass.requests.not_modified},
            {"ticket", pass.requests.ticket},
            {"shard", pass.requests.shard}}}};
}

void print_setup(const DemoSetup& setup) {
  std::cout << "datavo demo: " << setup.samples << " synthetic utterances (audio.wav + transcript.txt, "
            << human_bytes(setup.generated.count()) << ") packed into " << setup.shards << " shards\n"
            << "  origin " << setup.origin_url << " serving " << setup.store << "\n"
            << "  cache  " << setup.cache_dir << " (fresh)\n\n"
            << std::flush;
}

void print_passes(const DemoPass& cold, const DemoPass& warm) {
  auto row = [](const std::string& label, const std::string& a, const std::string& b) {
    std::cout << "  " << std::left << std::setw(24) << label << std::right << std::setw(12) << a << std::setw(12) << b
              << "\n";
  };
  const auto fixed = util::fixed_point;
  row("", "cold pass", "warm pass");
  row("time", fixed(cold.elapsed.count(), 2) + " s", fixed(warm.elapsed.count(), 2) + " s");
  row("samples", std::to_string(cold.samples), std::to_string(warm.samples));
  row("samples/s", fixed(per_second(double(cold.samples), cold), 0), fixed(per_second(double(warm.samples), warm), 0));
  row("MB/s", fixed(per_second(megabytes(cold.field_bytes), cold), 1),
      fixed(per_second(megabytes(warm.field_bytes), warm), 1));
  row("manifest requests", std::to_string(cold.requests.manifest),
      std::to_string(warm.requests.manifest) + (warm.requests.not_modified > 0 ? " (304)" : ""));
  row("ticket requests", std::to_string(cold.requests.ticket), std::to_string(warm.requests.ticket));
  row("shard requests", std::to_string(cold.requests.shard), std::to_string(warm.requests.shard));
  row("shards from the origin", std::to_string(cold.origin_shards), std::to_string(warm.origin_shards));
  std::cout << "\n(request counts from the origin's /v1/metrics; the warm pass reads every shard from the local "
               "cache and only revalidates the manifest)\n";
}

void cmd_demo(const GlobalOptions& global, const DemoArgs& args) {
  InterruptOnSignal interrupt;
  DemoRequest request;
  request.samples = args.samples;
  request.samples_per_shard = args.samples_per_shard;
  request.keep = args.keep ? KeepDirectory::yes : KeepDirectory::no;
  if (!global.json) request.on_ready = print_setup;
  request.on_kept = [](const std::string& directory) { std::cerr << "datavo: demo: kept " << directory << "\n"; };
  const DemoReport report = require(run_demo(request));
  const nlohmann::json json = {{"samples", report.setup.samples},
                               {"shards", report.setup.shards},
                               {"cold", pass_json(report.cold)},
                               {"warm", pass_json(report.warm)}};
  if (!global.json) print_passes(report.cold, report.warm);
  fail_if(report.error, json);
  if (global.json) print_json(json);
}

}  // namespace

void add_demo_command(CLI::App& app, GlobalOptions& global) {
  auto args = std::make_shared<DemoArgs>();
  auto* demo = app.add_subcommand(
      "demo",
      "the main job: generate a synthetic speech dataset, pack it, serve it on loopback and read it twice through "
      "a fresh cache; prints the cold and the warm pass side by side");
  demo->add_option("--samples", args->samples, "utterances to generate (default 2000)");
  demo->add_option("--samples-per-shard", args->samples_per_shard, "samples per shard (default 200)");
  demo->add_flag("--keep", args->keep, "keep the temporary directory (printed on exit)");
  demo->callback([&global, args] { cmd_demo(global, *args); });
}

}  // namespace datavo::cli
