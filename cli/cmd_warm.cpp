// `datavo warm`: fills the cache hierarchy with every shard of a key group (datavo::warm), or says what it would do
// (--dry-run: datavo::plan_warm).
#include <iostream>

#include "cli/cli.hpp"
#include "cli/warm_progress.hpp"
#include "datavo/warm.hpp"
#include "util/human.hpp"
#include "util/log.hpp"

namespace datavo::cli {
namespace {

struct WarmArgs {
  DatasetArgs dataset;
  std::size_t jobs = 4;
  bool dry_run = false;
  bool allow_partial = false;
  std::optional<std::string> metrics_textfile;
  std::optional<std::string> share;  // "I/N"
  std::uint64_t share_wait_seconds = 120;
};

void print_plan(const GlobalOptions& global, const WarmPlan& plan) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& shard : plan.shards) {
    nlohmann::json row = {{"shard_index", shard.shard_index},
                          {"content_hash", shard.content_hash.hex()},
                          {"samples", shard.samples},
                          {"tier", nullptr},
                          {"size_bytes", nullptr}};
    if (shard.tier) row["tier"] = *shard.tier;
    if (shard.size) row["size_bytes"] = shard.size->count();
    rows.push_back(std::move(row));
    if (global.json) continue;
    std::cout << "shard " << shard.shard_index << "  " << shard.content_hash.hex() << "  ";
    if (!shard.tier)
      std::cout << "would fetch from the origin (size unknown until fetched)\n";
    else if (shard.size)
      std::cout << "served by tier " << *shard.tier << " (" << human_bytes(shard.size->count()) << ")\n";
    else
      std::cout << "served by tier " << *shard.tier << " (size not known without reading it)\n";
  }
  if (!global.json) {
    std::cout << plan.shards.size() << " shards: " << plan.cached_shards << " cached ("
              << human_bytes(plan.cached_size.count()) << "), " << plan.shards_to_fetch
              << " to fetch from the origin (size unknown until fetched)\n";
    return;
  }
  print_json({{"dataset", plan.dataset},
              {"revision", plan.revision},
              {"keys", plan.keys},
              {"dry_run", true},
              {"shards", plan.shards.size()},
              {"shard_list", rows},
              {"cached_shards", plan.cached_shards},
              {"cached_bytes", plan.cached_size.count()},
              {"shards_to_fetch", plan.shards_to_fetch}});
}

nlohmann::json tier_uploads_json(const WarmTierUploads& up) {
  auto reason = [](const std::optional<std::string>& text) { return text ? nlohmann::json(*text) : nullptr; };
  return {{"uploaded", up.uploaded},
          {"already_present", up.already_present},
          {"failed", up.failed},
          {"skipped", up.skipped},
          {"failed_reason", reason(up.failed_reason)},
          {"skipped_reason", reason(up.skipped_reason)}};
}

nlohmann::json report_json(const WarmReport& report) {
  nlohmann::json tiers = nlohmann::json::array();
  for (const auto& tier : report.tiers) {
    nlohmann::json row = {{"tier", tier.tier},     {"hits", tier.hits}, {"promoted_into", tier.promoted_into},
                          {"cached", tier.cached}, {"held", nullptr},   {"uploads", nullptr}};
    if (tier.held) row["held"] = *tier.held;
    if (tier.uploads) row["uploads"] = tier_uploads_json(*tier.uploads);
    tiers.push_back(std::move(row));
  }
  nlohmann::json out = {{"dataset", report.dataset},
                        {"revision", report.revision},
                        {"keys", report.keys},
                        {"shards", report.shards},
                        {"failed", report.failed},
                        {"size_bytes", report.size.count()},
                        {"origin", {{"shards", report.origin_shards}, {"size_bytes", report.origin_size.count()}}},
                        {"tiers", tiers},
                        {"not_cached", report.not_cached},
                        {"seconds", report.elapsed.count()}};
  if (report.uploads) out["uploads"] = uploads_json(*report.uploads);
  out["share"] = nullptr;
  if (report.share) {
    out["share"] = {{"index", report.share->share.index},
                    {"count", report.share->share.count},
                    {"deferred", report.share->deferred},
                    {"from_region", report.share->from_region},
                    {"fetched_after_wait", report.share->fetched_after_wait},
                    {"waited_seconds", report.share->waited.count()}};
  }
  return out;
}

// "  tier region: 0 hits, 0 promoted into it; holds 2 of the 8 shards now", then what went up to a remote tier.
void print_tier_text(const WarmTierReport& tier, std::uint64_t shards) {
  std::cout << "  tier " << tier.tier << ": " << tier.hits << " hits, " << tier.promoted_into << " promoted into it";
  if (tier.held)
    std::cout << "; holds " << *tier.held << " of the " << shards << " shards now\n";
  else
    std::cout << " (read-only: not asked which shards it holds)\n";
  if (!tier.uploads) return;
  const WarmTierUploads& up = *tier.uploads;
  std::cout << "    uploads: " << up.uploaded << " uploaded, " << up.already_present << " already there, " << up.failed
            << " failed, " << up.skipped << " skipped\n";
  if (up.failed > 0) std::cout << "    failed: " << up.failed_reason.value_or("") << "\n";
  if (up.skipped > 0) std::cout << "    skipped: " << up.skipped_reason.value_or("") << "\n";
}

void print_report_text(const WarmReport& report) {
  std::cout << "warmed " << (report.shards - report.failed) << " of " << report.shards << " shards of "
            << report.dataset << " revision " << report.revision << " (" << human_bytes(report.size.count()) << ") in "
            << util::fixed_point(report.elapsed.count(), 2) << " s\n  origin: " << report.origin_shards << " shards, "
            << human_bytes(report.origin_size.count()) << "\n";
  for (const auto& tier : report.tiers) print_tier_text(tier, report.shards);
  if (report.not_cached > 0) std::cout << "  cached nowhere: " << report.not_cached << " shards\n";
  if (report.share && report.share->deferred > 0) {
    const WarmShareReport& share = *report.share;
    std::cout << "  region share " << share.share.index << "/" << share.share.count << ": " << share.deferred
              << " shards left to their members while the region's tier was down: " << share.from_region
              << " read from the region, " << share.fetched_after_wait << " fetched from the origin after waiting "
              << util::fixed_point(share.waited.count(), 1) << " s\n";
  }
  if (report.uploads && report.uploads->pending > 0)
    std::cout << "  " << report.uploads->pending << " upload(s) still running when warm stopped waiting\n";
}

void cmd_warm(const GlobalOptions& global, const WarmArgs& args) {
  InterruptOnSignal interrupt;
  WarmRequest request;
  request.dataset = args.dataset.dataset;
  request.keys = args.dataset.keys;
  request.revision = args.dataset.revision;
  request.cache_config_path = global.config_path;
  request.origin = origin_options(global, args.dataset.server);
  request.jobs = args.jobs;
  request.allow_partial = args.allow_partial ? AllowPartial::yes : AllowPartial::no;
  request.metrics_textfile = args.metrics_textfile;
  if (args.share) {
    RegionShare share = require(RegionShare::parse(*args.share));
    share.wait = Seconds(args.share_wait_seconds);
    request.share = share;
  }
  if (args.dry_run) return print_plan(global, require(plan_warm(request)));

  WarmProgress progress;
  request.observer = &progress;
  const WarmReport report = require(warm(request));
  // Each failure is printed once: on its progress line, or (under a bar, which has no per-shard lines) here.
  if (progress.style() == WarmProgress::Style::bar) {
    for (const auto& failure : report.failures)
      log::write(log::Level::error, "shard " + std::to_string(failure.shard_index) + ": " + failure.error.message);
  }
  if (!global.json) print_report_text(report);
  const nlohmann::json json = report_json(report);
  fail_if(report.error, json);
  if (report.partial) log::write(log::Level::warning, *report.partial + " (--allow-partial)");
  if (global.json) print_json(json);
}

}  // namespace

void add_warm_command(CLI::App& app, GlobalOptions& global) {
  auto args = std::make_shared<WarmArgs>();
  auto* warm = app.add_subcommand("warm", "fill the cache hierarchy with every shard of a key group");
  warm->footer(
      "On a terminal, warm draws a progress bar on stderr (shards, bytes fetched from the origin, rate, ETA);\n"
      "otherwise it logs one line per shard. --json prints a summary: shards, bytes fetched from the origin,\n"
      "shards served per tier, seconds.\n"
      "\n"
      "After warming, warm looks every shard up again. When the top tier does not hold them all (it is too small,\n"
      "or eviction removed shards warmed earlier in the run), it says how many remain cached in which tier and\n"
      "how many are cached nowhere, and exits 1; --allow-partial makes that a WARNING with exit 0.\n"
      "\n"
      "Backfill: every writable remote tier (a bucket) that misses a shard is then made to hold it, uploaded from\n"
      "the local copy, so a warm after an outage fills the bucket without asking the origin. Each such tier's line\n"
      "counts every shard: uploaded, already there, failed, skipped (tier down, too small), with the reasons. When\n"
      "one did not receive every shard, warm exits 1; --allow-partial makes that a WARNING with exit 0 too.\n"
      "\n"
      "--share I/N: this VM is member I of the N that warm the dataset in a region (e.g. the job's node rank and\n"
      "node count). While the bucket that coordinates the region's fetches (its leases) cannot be reached, warm\n"
      "fetches from the origin only the shards of its share (manifest position modulo N equal to I), uploads them\n"
      "once the bucket is back, and reads the other members' shards from it, waiting at most --share-wait seconds\n"
      "(default 120) from the outage's start; what is still missing then is fetched from the origin. With the\n"
      "bucket up the leases decide, as without --share.\n"
      "\n"
      "--dry-run fetches nothing and asks the origin for the manifest only. For each shard it prints the tier\n"
      "that would serve it (looked up without reading it) and, for shards in a folder tier, their size. The\n"
      "size of a shard still to fetch is reported as unknown: the manifest carries no sizes, and learning\n"
      "them would take one ticket request per shard.");
  add_dataset_args(warm, args->dataset);
  warm->add_option("--jobs", args->jobs, "shards fetched in parallel (default 4)");
  warm->add_flag("--dry-run", args->dry_run, "list what would be fetched and which tier holds what");
  warm->add_flag("--allow-partial", args->allow_partial,
                 "exit 0 with a WARNING when the top tier cannot hold every shard, or a writable remote tier did not "
                 "receive every shard (default: exit 1)");
  add_metrics_textfile_option(warm, args->metrics_textfile);
  warm->add_option("--share", args->share,
                   "I/N: this VM is member I of N in the region; during a bucket outage fetch only its share of the "
                   "shards from the origin and wait for the others' (see below)");
  warm->add_option("--share-wait", args->share_wait_seconds,
                   "seconds to wait for the region's other members during an outage before fetching their shares "
                   "here (default 120; with --share)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{86'400}));
  warm->callback([&global, args] { cmd_warm(global, *args); });
}

}  // namespace datavo::cli
