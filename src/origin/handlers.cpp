// The JSON routes of the server: GET /v1/instance, GET /v1/datasets/<dataset>/<split>/manifest,
// POST /v1/stream-tickets and GET /v1/metrics.
#include <algorithm>

#include "datavo/protocol.hpp"
#include "origin/ranges.hpp"
#include "origin/responses.hpp"
#include "origin/server_impl.hpp"

namespace datavo::origin {
namespace {

// What a 202 "preparing" answer asks the client to wait before it asks again.
constexpr Seconds k_preparing_retry_after{1};
constexpr const char* k_immutable = "public, max-age=31536000, immutable";

// The refusal of a ticket request for a shard or key its revision lacks, or nullopt when it has both.
std::optional<Refusal> unknown_shard_or_key(const Revision& rev, const TicketRequest& request) {
  if (request.shard_index >= rev.shards.size()) {
    return Refusal{404, "no shard " + std::to_string(request.shard_index) + " in revision " +
                            std::to_string(rev.revision) + " (it has " + std::to_string(rev.shards.size()) + ")"};
  }
  for (const auto& key : request.keys) {
    if (!std::binary_search(rev.keys.begin(), rev.keys.end(), key))
      return Refusal{404, "unknown key \"" + key + "\" (the dataset has " + std::to_string(rev.keys.size()) + ")"};
  }
  return std::nullopt;
}

}  // namespace

void ServerImpl::handle_instance(const httplib::Request&, httplib::Response& res) {
  send_json(res, InstanceInfo{store_.instance_id(), protocol::k_version, k_server_name}.to_json());
}

void ServerImpl::handle_manifest(const httplib::Request& req, httplib::Response& res) {
  std::string_view rest = std::string_view(req.path).substr(std::string_view("/v1/datasets/").size());
  constexpr std::string_view suffix = "/manifest";
  if (!rest.ends_with(suffix))
    return send_error(res, 404, "no such resource; expected /v1/datasets/<dataset>/<split>/manifest");
  rest.remove_suffix(suffix.size());
  const auto slash = rest.find('/');
  if (slash == std::string_view::npos || rest.find('/', slash + 1) != std::string_view::npos) {
    return send_error(
        res, 400,
        "invalid dataset path " + protocol::quote(rest) + "; expected /v1/datasets/<dataset>/<split>/manifest");
  }
  const std::string dataset(rest.substr(0, slash));
  const std::string split(rest.substr(slash + 1));
  for (auto [what, name] : {std::pair{"dataset", &dataset}, std::pair{"split", &split}}) {
    if (auto valid = protocol::validate_name(what, *name); !valid) return send_error(res, 400, valid.error().message);
  }
  std::optional<std::uint64_t> pinned;
  if (req.has_param("revision")) {
    pinned = protocol::parse_number(req.get_param_value("revision"), 1);
    if (!pinned) return send_error(res, 400, "revision must be a positive decimal integer");
  }
  auto found = revisions_.find(dataset, split, pinned);
  if (const auto* refusal = std::get_if<Refusal>(&found)) return send_refusal(res, *refusal);
  const CachedRevision& cached = *std::get<0>(found);
  res.set_header("ETag", cached.etag);
  res.set_header("Cache-Control", pinned ? k_immutable : "no-cache");
  if (req.has_header("If-None-Match") && etag_matches(req.get_header_value("If-None-Match"), cached.etag)) {
    res.status = 304;
    return;
  }
  send_json(res, cached.manifest_json);
}

void ServerImpl::handle_ticket(const httplib::Request& req, httplib::Response& res) {
  auto request = TicketRequest::parse(req.body);
  if (!request) return send_error(res, 400, request.error().message);
  auto found = revisions_.find(request->name.dataset, request->name.split, request->revision);
  if (const auto* refusal = std::get_if<Refusal>(&found)) return send_refusal(res, *refusal);
  const Revision& rev = std::get<0>(found)->revision;
  if (auto refusal = unknown_shard_or_key(rev, *request)) return send_refusal(res, *refusal);
  const ContentHash hash = key_group_hash(rev, request->shard_index, request->keys).value();
  TicketFields fields{
      hash.hex(), request->name.dataset, request->name.split, request->revision, request->shard_index, request->keys,
      0};
  const auto outcome = key_group_for_ticket(fields);
  if (const auto* refusal = std::get_if<Refusal>(&outcome)) return send_refusal(res, *refusal);
  if (std::holds_alternative<BuilderPool::Pending>(outcome)) {
    // A tar of many GiB takes longer to build than a client waits for a response; the client comes back instead.
    res.set_header("Retry-After", std::to_string(k_preparing_retry_after.count()));
    return send_json(res, TicketPreparing{hash}.to_json(), 202);
  }
  const KeyGroupTar& group = std::get<KeyGroupTar>(outcome);
  fields.expires_at = std::chrono::duration_cast<std::chrono::seconds>(
                          (std::chrono::system_clock::now() + options_.ticket_ttl).time_since_epoch())
                          .count();
  const std::string signature = sign_ticket(store_.secret(), fields);
  send_json(res,
            StreamTicket{hash, group.size, group.sha256, ticket_url(fields, signature), fields.expires_at, group.chunks}
                .to_json());
}

BuilderPool::Outcome ServerImpl::key_group_for_ticket(const TicketFields& fields) {
  const auto hash = ContentHash::parse(fields.content_hash).value();
  if (auto existing = store_.find_key_group(hash, key_groups_.chunk_size()); existing && *existing)
    return std::move(**existing);
  return builders_.request(fields, options_.ticket_wait);
}

void ServerImpl::handle_metrics(const httplib::Request&, httplib::Response& res) {
  res.status = 200;
  res.set_content(metrics_.snapshot().to_text(), "text/plain; version=0.0.4");
}

}  // namespace datavo::origin
