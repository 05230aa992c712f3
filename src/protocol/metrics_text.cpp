// The origin's metrics in the Prometheus text format (docs/protocol.md, "GET /v1/metrics").
#include <cstdlib>

#include "datavo/protocol.hpp"
#include "util/text.hpp"

namespace datavo {
namespace {

constexpr std::string_view k_requests = "datavo_requests_total";
constexpr std::string_view k_bytes = "datavo_response_bytes_total";

struct MetricSample {
  std::string route;
  std::string status;
  std::uint64_t value = 0;
};

Error bad_line(std::size_t line_number, const std::string& what) {
  return Error{ErrorCode::remote, "metrics line " + std::to_string(line_number) + ": " + what};
}

// The route and status labels of `labels` (the text between the braces); other labels are ignored.
void read_labels(std::string_view labels, MetricSample& sample) {
  while (!labels.empty()) {
    const auto eq = labels.find("=\"");
    if (eq == std::string_view::npos) break;
    const auto quote = labels.find('"', eq + 2);
    if (quote == std::string_view::npos) break;
    const std::string_view label = labels.substr(0, eq);
    const std::string_view value = labels.substr(eq + 2, quote - eq - 2);
    if (label == "route") sample.route = value;
    if (label == "status") sample.status = value;
    labels.remove_prefix(quote + 1);
    if (labels.starts_with(',')) labels.remove_prefix(1);
  }
}

// One sample line of either metric, after its name: {labels} value [timestamp]. REQUIRES: `rest` starts with '{'.
Result<MetricSample> read_sample(std::string_view rest, std::size_t line_number) {
  const auto close = rest.find('}');
  if (close == std::string_view::npos) return bad_line(line_number, "no closing brace");
  MetricSample sample;
  read_labels(rest.substr(1, close - 1), sample);
  std::string_view number = util::trim_left(rest.substr(close + 1));
  number = number.substr(0, number.find(' '));
  // Prometheus counters may be written as floats ("12" or "12.0" or "1.2e+01").
  const std::string number_text(number);
  char* parsed_end = nullptr;
  const double value = std::strtod(number_text.c_str(), &parsed_end);
  if (number_text.empty() || parsed_end != number_text.c_str() + number_text.size() || value < 0)
    return bad_line(line_number, "bad value '" + number_text + "'");
  sample.value = static_cast<std::uint64_t>(value);
  return sample;
}

}  // namespace

std::uint64_t OriginMetrics::requests_for(std::string_view route) const {
  std::uint64_t total = 0;
  for (const auto& [labels, count] : requests)
    if (labels.first == route) total += count;
  return total;
}

std::uint64_t OriginMetrics::requests_for(std::string_view route, std::string_view status) const {
  auto it = requests.find({std::string(route), std::string(status)});
  return it == requests.end() ? 0 : it->second;
}

Result<OriginMetrics> OriginMetrics::parse(std::string_view text) {
  OriginMetrics metrics;
  for (std::size_t line_number = 1; !text.empty(); ++line_number) {
    const auto end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    const bool requests_line = line.starts_with(k_requests) && line.substr(k_requests.size()).starts_with('{');
    const bool bytes_line = line.starts_with(k_bytes) && line.substr(k_bytes.size()).starts_with('{');
    if (!requests_line && !bytes_line) continue;
    auto sample = read_sample(line.substr(requests_line ? k_requests.size() : k_bytes.size()), line_number);
    if (!sample) return std::move(sample).error();
    if (requests_line)
      metrics.requests[{sample->route, sample->status}] += sample->value;
    else
      metrics.response_bytes[sample->route] += sample->value;
  }
  return metrics;
}

std::string OriginMetrics::to_text() const {
  std::string out;
  out += "# HELP datavo_requests_total Requests answered, by route and HTTP status.\n";
  out += "# TYPE datavo_requests_total counter\n";
  for (const auto& [labels, count] : requests) {
    out += std::string(k_requests) + "{route=\"" + labels.first + "\",status=\"" + labels.second + "\"} " +
           std::to_string(count) + "\n";
  }
  out += "# HELP datavo_response_bytes_total Response body bytes sent, by route.\n";
  out += "# TYPE datavo_response_bytes_total counter\n";
  for (const auto& [route, bytes] : response_bytes)
    out += std::string(k_bytes) + "{route=\"" + route + "\"} " + std::to_string(bytes) + "\n";
  return out;
}

}  // namespace datavo
