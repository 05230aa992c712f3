// Tests of the Prometheus renderer and the metrics textfile (src/ops/metrics.cpp): valid text exposition format
// 0.0.4 (checked by a small parser of the format, below), the names and units, the counters a tier cannot keep
// left out, label escaping, and a textfile rewritten atomically.
#include <dirent.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "datavo/metrics.hpp"
#include "support/temp_dir.hpp"
#include "unit/ops/ops_fixtures.hpp"
#include "util/fs.hpp"

namespace datavo {
namespace {

using shardtest::TempDir;

// One sample line, parsed.
struct Parsed {
  std::string name;
  std::map<std::string, std::string> labels;  // unescaped
  std::uint64_t value = 0;
};

struct Exposition {
  std::map<std::string, std::string> help;  // unescaped
  std::map<std::string, std::string> type;
  std::vector<Parsed> samples;
};

// A parser of the text format 0.0.4 as strict as Prometheus's: every line a HELP, a TYPE or a sample; HELP and TYPE
// once per family and before its samples; names and label names as the format allows them; label values quoted,
// with only \\, \" and \n escapes; the text ends with a newline. Fails the test (and returns what it read) otherwise.
Exposition parse(const std::string& text) {
  Exposition out;
  EXPECT_TRUE(!text.empty() && text.back() == '\n') << "the exposition must end with a newline";
  static const std::regex name_re("[a-zA-Z_:][a-zA-Z0-9_:]*");
  static const std::regex label_name_re("[a-zA-Z_][a-zA-Z0-9_]*");
  std::istringstream lines(text);
  std::string line;
  std::set<std::string> seen_samples_of;
  while (std::getline(lines, line)) {
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      const bool help = line[2] == 'H';
      const std::string rest = line.substr(7);
      const auto space = rest.find(' ');
      EXPECT_NE(space, std::string::npos) << line;
      if (space == std::string::npos) continue;
      const std::string name = rest.substr(0, space);
      EXPECT_TRUE(std::regex_match(name, name_re)) << line;
      EXPECT_EQ(seen_samples_of.count(name), 0u) << "HELP/TYPE after the samples of " << name;
      auto& table = help ? out.help : out.type;
      EXPECT_EQ(table.count(name), 0u) << "a second " << (help ? "HELP" : "TYPE") << " for " << name;
      std::string body = rest.substr(space + 1);
      if (help) {
        std::string unescaped;
        for (std::size_t i = 0; i < body.size(); ++i) {
          if (body[i] != '\\') {
            unescaped += body[i];
            continue;
          }
          EXPECT_LT(i + 1, body.size()) << line;
          const char c = body[++i];
          EXPECT_TRUE(c == '\\' || c == 'n') << "bad escape in HELP: " << line;
          unescaped += c == 'n' ? '\n' : c;
        }
        body = unescaped;
      } else {
        EXPECT_TRUE(body == "counter" || body == "gauge" || body == "untyped") << line;
      }
      table[name] = body;
      continue;
    }
    EXPECT_NE(line[0], '#') << "a comment the format does not know: " << line;
    Parsed sample;
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    sample.name = line.substr(0, i);
    EXPECT_TRUE(std::regex_match(sample.name, name_re)) << line;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const auto eq = line.find('=', i);
        EXPECT_NE(eq, std::string::npos) << line;
        if (eq == std::string::npos) return out;
        const std::string label = line.substr(i, eq - i);
        EXPECT_TRUE(std::regex_match(label, label_name_re)) << line;
        EXPECT_EQ(line[eq + 1], '"') << line;
        std::string value;
        std::size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] != '\\') {
            value += line[j];
            continue;
          }
          const char c = line[++j];
          EXPECT_TRUE(c == '\\' || c == '"' || c == 'n') << "bad escape in a label value: " << line;
          value += c == 'n' ? '\n' : c;
        }
        EXPECT_LT(j, line.size()) << "unterminated label value: " << line;
        EXPECT_EQ(sample.labels.count(label), 0u) << line;
        sample.labels[label] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      EXPECT_LT(i, line.size()) << line;
      ++i;  // '}'
    }
    EXPECT_EQ(line[i], ' ') << line;
    const std::string value = line.substr(i + 1);
    EXPECT_TRUE(std::regex_match(value, std::regex("[0-9]+"))) << line;
    sample.value = std::stoull(value);
    EXPECT_EQ(out.type.count(sample.name), 1u) << "a sample before its TYPE: " << line;
    seen_samples_of.insert(sample.name);
    out.samples.push_back(std::move(sample));
  }
  return out;
}

std::optional<std::uint64_t> value_of(const Exposition& e, const std::string& name, const std::string& tier,
                                      const std::string& outcome = {}) {
  for (const auto& s : e.samples) {
    if (s.name != name || s.labels.at("tier") != tier) continue;
    if (!outcome.empty() && s.labels.at("outcome") != outcome) continue;
    return s.value;
  }
  return std::nullopt;
}

TierInfo folder_row() {
  TierInfo t;
  t.name = "local";
  t.type = "folder";
  t.kept = TierStatSet::all()
               .without(TierStat::uploads)
               .without(TierStat::upload_failures)
               .without(TierStat::uploads_present)
               .without(TierStat::upload_skips)
               .without(TierStat::lease_waits);
  t.scope = StatsScope::every_process;
  t.stats.hits = 8;
  t.stats.misses = 3;
  t.stats.evictions = 2;
  t.stats.bytes_served = Bytes{4096};
  t.max_bytes = Bytes{1 << 20};
  t.usage = TierUsage{Bytes{5000}, 4};
  return t;
}

TierInfo bucket_row() {
  TierInfo t;
  t.name = "region-moto";
  t.type = "s3";
  t.kept = TierStatSet::all().without(TierStat::evictions);
  t.scope = StatsScope::this_machine;
  t.kept_in = "local";
  t.stats.misses = 8;
  t.stats.uploads = 6;
  t.stats.uploads_present = 1;
  t.stats.upload_failures = 1;
  t.stats.upload_skips = 0;
  t.stats.lease_waits = 2;
  t.stats.bytes_installed = Bytes{123456};
  t.breaker_open = true;
  return t;
}

TEST(Metrics, RendersValidExpositionFormatWithUnitsAndTotals) {
  const std::string text = render_prometheus(tier_metrics({folder_row(), bucket_row()}));
  const Exposition e = parse(text);
  ASSERT_FALSE(e.samples.empty()) << text;
  for (const auto& [name, type] : e.type) {
    EXPECT_EQ(name.rfind("datavo_tier_", 0), 0u) << name;
    // Counters end in _total, gauges never do (Prometheus's naming conventions).
    const bool total = name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0;
    EXPECT_EQ(total, type == "counter") << name << " is a " << type;
    EXPECT_EQ(e.help.count(name), 1u) << name << " has no HELP";
  }
  for (const auto& s : e.samples) {
    EXPECT_EQ(s.labels.count("tier"), 1u);
    EXPECT_EQ(s.labels.count("type"), 1u);
  }
  EXPECT_EQ(value_of(e, "datavo_tier_hits_total", "local"), 8u);
  EXPECT_EQ(value_of(e, "datavo_tier_misses_total", "region-moto"), 8u);
  EXPECT_EQ(value_of(e, "datavo_tier_served_bytes_total", "local"), 4096u);
  EXPECT_EQ(value_of(e, "datavo_tier_installed_bytes_total", "region-moto"), 123456u);
  EXPECT_EQ(value_of(e, "datavo_tier_uploads_total", "region-moto", "uploaded"), 6u);
  EXPECT_EQ(value_of(e, "datavo_tier_uploads_total", "region-moto", "already_present"), 1u);
  EXPECT_EQ(value_of(e, "datavo_tier_uploads_total", "region-moto", "failed"), 1u);
  EXPECT_EQ(value_of(e, "datavo_tier_uploads_total", "region-moto", "skipped"), 0u);
  EXPECT_EQ(value_of(e, "datavo_tier_lease_waits_total", "region-moto"), 2u);
  EXPECT_EQ(value_of(e, "datavo_tier_breaker_open", "region-moto"), 1u);
  EXPECT_EQ(value_of(e, "datavo_tier_breaker_open", "local"), 0u);
  EXPECT_EQ(value_of(e, "datavo_tier_used_bytes", "local"), 5000u);
  EXPECT_EQ(value_of(e, "datavo_tier_entries", "local"), 4u);
  EXPECT_EQ(value_of(e, "datavo_tier_max_bytes", "local"), 1u << 20);
  EXPECT_EQ(e.type.at("datavo_tier_uploads_total"), "counter");
  EXPECT_EQ(e.type.at("datavo_tier_breaker_open"), "gauge");
}

TEST(Metrics, LeavesOutWhatATierCannotKeep) {
  const Exposition e = parse(render_prometheus(tier_metrics({folder_row(), bucket_row()})));
  // A bucket's evictions are its lifecycle rules': absent, not zero. A folder tier uploads nothing.
  EXPECT_EQ(value_of(e, "datavo_tier_evictions_total", "local"), 2u);
  EXPECT_FALSE(value_of(e, "datavo_tier_evictions_total", "region-moto"));
  EXPECT_FALSE(value_of(e, "datavo_tier_uploads_total", "local"));
  EXPECT_FALSE(value_of(e, "datavo_tier_lease_waits_total", "local"));
  // Unmeasured usage and an unbounded tier: no gauge.
  EXPECT_FALSE(value_of(e, "datavo_tier_used_bytes", "region-moto"));
  EXPECT_FALSE(value_of(e, "datavo_tier_max_bytes", "region-moto"));
  // A family no tier keeps is left out whole, HELP and TYPE included.
  const Exposition folder_only = parse(render_prometheus(tier_metrics({folder_row()})));
  EXPECT_EQ(folder_only.type.count("datavo_tier_uploads_total"), 0u);
  for (const auto& s : e.samples) {
    if (s.name != "datavo_tier_info") continue;
    EXPECT_EQ(s.labels.at("scope"), s.labels.at("tier") == "local" ? "every_process" : "this_machine");
  }
}

TEST(Metrics, EscapesLabelValues) {
  TierInfo odd = folder_row();
  odd.name = "we\"ird\\tier\nname";
  const std::string text = render_prometheus(tier_metrics({odd}));
  EXPECT_NE(text.find("tier=\"we\\\"ird\\\\tier\\nname\""), std::string::npos) << text;
  const Exposition e = parse(text);
  ASSERT_FALSE(e.samples.empty());
  EXPECT_EQ(e.samples.front().labels.at("tier"), odd.name);
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* entry = ::readdir(d)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") out.push_back(name);
    }
    ::closedir(d);
  }
  return out;
}

TEST(MetricsTextfile, IsWrittenAtStartRewrittenWhileRunningAndAtTheEnd) {
  TempDir dir;
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a")});
  const std::string out_dir = dir.sub("textfile");
  ASSERT_TRUE(util::make_dirs(out_dir, 0755));
  const std::string path = out_dir + "/datavo.prom";
  auto file = MetricsTextfile::start(cache, path, std::chrono::milliseconds(20));
  ASSERT_TRUE(file) << file.error().message;
  auto first = util::read_file(path);
  ASSERT_TRUE(first);
  EXPECT_EQ(value_of(parse(*first), "datavo_tier_installs_total", "a"), 0u);

  opstest::install(*cache, opstest::key_of('1'), "bytes");
  // The thread rewrites it: the install shows within a few intervals, and the file is whole at every look.
  bool seen = false;
  for (int i = 0; i < 500 && !seen; ++i) {
    auto text = util::read_file(path);
    ASSERT_TRUE(text);
    seen = value_of(parse(*text), "datavo_tier_installs_total", "a") == 1u;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(seen) << "the textfile was not rewritten";

  opstest::install(*cache, opstest::key_of('1'), "bytes");  // a hit, then the last write at destruction
  file->reset();
  auto last = util::read_file(path);
  ASSERT_TRUE(last);
  EXPECT_EQ(value_of(parse(*last), "datavo_tier_hits_total", "a"), 1u);
  EXPECT_EQ(files_in(out_dir), std::vector<std::string>{"datavo.prom"}) << "a temporary was left behind";
}

TEST(MetricsTextfile, APathThatCannotBeWrittenFailsAtStart) {
  TempDir dir;
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a")});
  auto file = MetricsTextfile::start(cache, dir.sub("missing") + "/no/such/dir/datavo.prom");
  ASSERT_FALSE(file);
  EXPECT_NE(file.error().message.find("metrics textfile"), std::string::npos) << file.error().message;
}

}  // namespace
}  // namespace datavo
