#include "datavo/metrics.hpp"

#include <sys/stat.h>

#include "util/fs.hpp"
#include "util/log.hpp"

namespace datavo {
namespace {

// One counter of TierStats as a Prometheus sample: its family, and the outcome label of the uploads.
struct CounterMetric {
  TierStat stat;
  const char* family;
  const char* help;
  const char* outcome;  // nullptr: no third label
};

// The families of the counters, in the order of metrics.hpp; the four upload outcomes share one family.
constexpr CounterMetric k_counters[] = {
    {TierStat::hits, "datavo_tier_hits_total", "Lookups this tier served.", nullptr},
    {TierStat::misses, "datavo_tier_misses_total", "Lookups this tier could not serve.", nullptr},
    {TierStat::promotions, "datavo_tier_promotions_total", "Entries copied into this tier from a slower tier.",
     nullptr},
    {TierStat::installs, "datavo_tier_installs_total", "Entries installed into this tier after an origin fetch.",
     nullptr},
    {TierStat::capacity_skips, "datavo_tier_capacity_skips_total",
     "Installs skipped because the shard is larger than max_bytes.", nullptr},
    {TierStat::evictions, "datavo_tier_evictions_total", "Entries removed by LRU, max_age or rm.", nullptr},
    {TierStat::quarantined, "datavo_tier_quarantined_total", "Damaged entries moved aside or deleted.", nullptr},
    {TierStat::errors, "datavo_tier_errors_total", "Failures that were degraded to a miss or a skip.", nullptr},
    {TierStat::uploads, "datavo_tier_uploads_total", "Uploads to this remote tier, by outcome.", "uploaded"},
    {TierStat::uploads_present, "datavo_tier_uploads_total", "", "already_present"},
    {TierStat::upload_failures, "datavo_tier_uploads_total", "", "failed"},
    {TierStat::upload_skips, "datavo_tier_uploads_total", "", "skipped"},
    {TierStat::lease_waits, "datavo_tier_lease_waits_total", "Fetches that waited for another VM's lease.", nullptr},
    {TierStat::hedges_sent, "datavo_tier_hedges_sent_total",
     "Second requests sent for a ranged GET that had received no byte for the hedge deadline.", nullptr},
    {TierStat::hedges_won, "datavo_tier_hedges_won_total", "Hedged requests that answered before the first one.",
     nullptr},
    {TierStat::bytes_served, "datavo_tier_served_bytes_total", "Bytes handed to readers from this tier (out).",
     nullptr},
    {TierStat::bytes_installed, "datavo_tier_installed_bytes_total",
     "Bytes of installs, promotions and uploads into this tier (in).", nullptr},
};

MetricFamily& family_named(std::vector<MetricFamily>& families, const char* name, MetricKind kind, const char* help) {
  for (auto& family : families) {
    if (family.name == name) return family;
  }
  families.push_back(MetricFamily{name, kind, help, {}});
  return families.back();
}

std::uint64_t count_of(const TierStats& stats, TierStat wanted) {
  std::uint64_t out = 0;
  stats.for_each_stat([&](TierStat stat, const char*, std::uint64_t count) {
    if (stat == wanted) out = count;
  });
  return out;
}

void add_gauges(std::vector<MetricFamily>& families, const TierInfo& t) {
  const auto gauge = [&](const char* name, const char* help, std::uint64_t value,
                         std::optional<std::pair<std::string, std::string>> label = std::nullopt) {
    family_named(families, name, MetricKind::gauge, help).samples.push_back(MetricSample{t.name, t.type, label, value});
  };
  gauge("datavo_tier_breaker_open", "Whether this process skips the tier for a cooldown (its breaker is open).",
        t.breaker_open ? 1 : 0);
  if (t.usage) {
    gauge("datavo_tier_used_bytes", "Bytes under the tier, every instance.", t.usage->used.count());
    gauge("datavo_tier_entries", "Entries in the tier, every instance.", t.usage->entries);
  }
  if (t.max_bytes) gauge("datavo_tier_max_bytes", "The tier's capacity (max_bytes).", t.max_bytes->count());
  gauge("datavo_tier_info",
        "Whose counters the tier's figures are: every_process (a folder tier), this_machine or this_process.", 1,
        std::pair<std::string, std::string>{"scope", to_string(t.scope)});
}

// The format's escapes: a backslash and a newline everywhere, a double quote in label values only.
enum class Escape { help, label_value };

std::string escape(std::string_view text, Escape what) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && what == Escape::label_value) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

const char* to_string(MetricKind kind) {
  switch (kind) {
    case MetricKind::counter: return "counter";
    case MetricKind::gauge: return "gauge";
  }
  return "untyped";
}

std::vector<MetricFamily> tier_metrics(const std::vector<TierInfo>& tiers) {
  std::vector<MetricFamily> families;
  // Every family in its place, even one whose first tier does not keep it; emptied ones are dropped at the end.
  for (const auto& counter : k_counters) family_named(families, counter.family, MetricKind::counter, counter.help);
  for (const auto& t : tiers) {
    for (const auto& counter : k_counters) {
      if (!t.kept.contains(counter.stat)) continue;
      std::optional<std::pair<std::string, std::string>> label;
      if (counter.outcome != nullptr) label.emplace("outcome", counter.outcome);
      family_named(families, counter.family, MetricKind::counter, counter.help)
          .samples.push_back(MetricSample{t.name, t.type, std::move(label), count_of(t.stats, counter.stat)});
    }
  }
  for (const auto& t : tiers) add_gauges(families, t);
  std::erase_if(families, [](const MetricFamily& family) { return family.samples.empty(); });
  return families;
}

std::string render_prometheus(const std::vector<MetricFamily>& families) {
  std::string out;
  for (const auto& family : families) {
    out += "# HELP " + family.name + " " + escape(family.help, Escape::help) + "\n";
    out += "# TYPE " + family.name + " " + to_string(family.kind) + "\n";
    for (const auto& sample : family.samples) {
      out += family.name + "{tier=\"" + escape(sample.tier, Escape::label_value) + "\",type=\"" +
             escape(sample.type, Escape::label_value) + "\"";
      if (sample.label)
        out += "," + sample.label->first + "=\"" + escape(sample.label->second, Escape::label_value) + "\"";
      out += "} " + std::to_string(sample.value) + "\n";
    }
  }
  return out;
}

MetricsTextfile::MetricsTextfile(std::shared_ptr<ShardCacheHierarchy> cache, std::string path,
                                 std::chrono::milliseconds interval)
    : cache_(std::move(cache)), path_(std::move(path)), interval_(interval) {}

Result<std::unique_ptr<MetricsTextfile>> MetricsTextfile::start(std::shared_ptr<ShardCacheHierarchy> cache,
                                                                std::string path, std::chrono::milliseconds interval) {
  std::unique_ptr<MetricsTextfile> file(new MetricsTextfile(std::move(cache), std::move(path), interval));
  DATAVO_TRY(file->write());
  file->thread_ = std::thread([raw = file.get()] { raw->run(); });
  return file;
}

MetricsTextfile::~MetricsTextfile() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  write_or_warn();  // the last figures
}

void MetricsTextfile::write_or_warn() {
  auto written = write();
  std::lock_guard lock(write_mu_);
  // One WARNING per run of failures: a full disk must not flood the log every few seconds.
  if (!written && !warned_) LOG_WARNING(written.error().message);
  warned_ = !written;
}

void MetricsTextfile::run() {
  std::unique_lock lock(mu_);
  while (!stop_changed_.wait_for(lock, interval_, [this] { return stopping_; })) {
    lock.unlock();
    write_or_warn();
    lock.lock();
  }
}

Result<void> MetricsTextfile::write() {
  std::lock_guard lock(write_mu_);
  // No usage: measuring a folder tier scans its directories, too much every few seconds.
  const std::string text = render_prometheus(tier_metrics(cache_->cache_info(ShardCacheHierarchy::MeasureUsage::no)));
  auto written = util::write_file_atomic(path_, text, S_IRUSR | S_IWUSR | S_IRGRP | S_IROTH, util::Sync::no);
  if (!written) {
    return Error{written.error().code, "cannot write the metrics textfile " + path_ + ": " + written.error().message,
                 written.error().sys_errno};
  }
  return {};
}

}  // namespace datavo
