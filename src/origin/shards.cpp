// GET <ticket url> (docs/protocol.md): the ticket's checks in the documented order, then the key-group tar
// streamed from disk, whole or one range.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "datavo/protocol.hpp"
#include "origin/ranges.hpp"
#include "origin/responses.hpp"
#include "origin/server_impl.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace datavo::origin {
namespace {

// Shard bytes are sent in pieces of this size, read with pread: memory per download is bounded by it.
constexpr std::size_t k_send_chunk = std::size_t{1} << 20;

// The range of a request for `size` bytes whose ETag is `etag`: whole unless a Range header applies.
RangeOutcome requested_range(const httplib::Request& req, const std::string& etag, std::uint64_t size,
                             ByteRange& range) {
  if (!req.has_header("Range")) return RangeOutcome::whole;
  // An If-Range naming other bytes means the client's partial copy is stale: send everything.
  if (req.has_header("If-Range") && req.get_header_value("If-Range") != etag) return RangeOutcome::whole;
  return parse_range(req.get_header_value("Range"), size, range);
}

}  // namespace

std::variant<ParsedTicket, Refusal> ServerImpl::checked_ticket(const httplib::Request& req) const {
  const std::string_view name = std::string_view(req.path).substr(std::string_view("/v1/shards/").size());
  if (!name.ends_with(".tar") || !ContentHash::parse(name.substr(0, name.size() - 4)))
    return Refusal{400, "invalid shard name " + protocol::quote(name) + "; expected <content_hash>.tar"};
  auto ticket = parse_ticket(name.substr(0, name.size() - 4), [&](std::string_view param) {
    const std::string key(param);
    return req.has_param(key) ? std::optional<std::string>(req.get_param_value(key)) : std::nullopt;
  });
  if (!ticket) return Refusal{400, ticket.error().message};
  if (!verify_ticket_signature(store_.secret(), ticket->fields, ticket->signature))
    return Refusal{403, "the ticket signature does not verify"};
  const auto now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  if (ticket->fields.expires_at < now.count()) {
    return Refusal{410, "the ticket expired at " + std::to_string(ticket->fields.expires_at) + "; ask for a new one"};
  }
  return std::move(*ticket);
}

void ServerImpl::handle_shard(const httplib::Request& req, httplib::Response& res) {
  auto ticket = checked_ticket(req);
  if (const auto* refusal = std::get_if<Refusal>(&ticket)) return send_refusal(res, *refusal);
  auto tar = key_groups_.get(std::get<ParsedTicket>(ticket).fields);
  if (const auto* refusal = std::get_if<Refusal>(&tar)) return send_refusal(res, *refusal);
  serve_tar(req, res, std::get<KeyGroupTar>(tar));
}

void ServerImpl::serve_tar(const httplib::Request& req, httplib::Response& res, const KeyGroupTar& group) {
  auto file = std::make_shared<util::UniqueFd>(::open(group.path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!file->valid() || ::fstat(file->get(), &st) != 0)
    return send_refusal(res, store_failure(Error::from_errno(errno, "cannot open " + group.path)));
  const auto size = static_cast<std::uint64_t>(st.st_size);
  const std::string etag = "\"" + group.sha256.hex() + "\"";
  res.set_header("ETag", etag);
  res.set_header("Accept-Ranges", "bytes");
  if (req.has_header("If-None-Match") && etag_matches(req.get_header_value("If-None-Match"), etag)) {
    res.status = 304;
    return;
  }
  ByteRange range{0, size - 1};
  const RangeOutcome outcome = requested_range(req, etag, size, range);
  if (outcome == RangeOutcome::unsatisfiable) {
    res.set_header("Content-Range", "bytes */" + std::to_string(size));
    return send_error(res, 416, "the range is outside the shard's " + std::to_string(size) + " bytes");
  }
  res.status = outcome == RangeOutcome::partial ? 206 : 200;
  if (outcome == RangeOutcome::partial) {
    res.set_header("Content-Range", "bytes " + std::to_string(range.first) + "-" + std::to_string(range.last) + "/" +
                                        std::to_string(size));
  }
  const std::uint64_t start = range.first;
  auto buffer = std::make_shared<std::vector<char>>();
  res.set_content_provider(static_cast<std::size_t>(range.last - range.first + 1), "application/x-tar",
                           [file, buffer, start, metrics = &metrics_, path = group.path](
                               std::size_t offset, std::size_t want, httplib::DataSink& sink) {
                             if (buffer->empty()) buffer->resize(k_send_chunk);
                             const std::size_t n = std::min(want, buffer->size());
                             auto read = util::pread_all(file->get(), buffer->data(), n,
                                                         static_cast<off_t>(start + offset), path);
                             if (!read) {
                               LOG_ERROR("origin: " << read.error().message);
                               return false;
                             }
                             // Counted before the write: once the client holds the bytes, /v1/metrics already shows
                             // them. A download cut during this write counts its last chunk.
                             metrics->add_bytes(Route::shard, n);
                             count_streamed_bytes(n);
                             return sink.write(buffer->data(), n);
                           });
}

}  // namespace datavo::origin
