#include "tier/s3/sigv4.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <map>

#include "datavo/content_hash.hpp"
#include "tier/cloud/xml.hpp"
#include "util/log.hpp"
#include "util/percent.hpp"
#include "util/text.hpp"

namespace datavo::s3 {
namespace {

constexpr std::string_view k_algorithm = "AWS4-HMAC-SHA256";
constexpr std::string_view k_terminator = "aws4_request";
constexpr char k_hex_lower[] = "0123456789abcdef";

// Headers signed besides host and x-amz-*: those that change what S3 does with the request.
constexpr std::string_view k_signed_plain_headers[] = {
    "content-type",      "content-md5",         "date", "range", "if-range", "if-match", "if-none-match",
    "if-modified-since", "if-unmodified-since",
};

using Digest = std::array<unsigned char, 32>;

// `text` percent-decoded once; text that is not well-formed percent-encoding is taken literally (and its '%'
// then encoded as %25).
std::string decoded(std::string_view text, util::Plus plus) {
  return util::percent_decode(text, plus).value_or(std::string(text));
}

std::string hex_lower(const unsigned char* bytes, std::size_t size) {
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    out += k_hex_lower[bytes[i] >> 4];
    out += k_hex_lower[bytes[i] & 0xf];
  }
  return out;
}

Digest hmac(std::string_view key, std::string_view data) {
  Digest out{};
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), int(key.size()), reinterpret_cast<const unsigned char*>(data.data()), data.size(),
       out.data(), &length);
  return out;
}

std::string_view as_view(const Digest& digest) { return {reinterpret_cast<const char*>(digest.data()), digest.size()}; }

// The signing key chain. Intermediate keys are wiped: they are as good as the secret for a day.
std::string signature_of(std::string_view secret, const SigningScope& scope, std::string_view date,
                         std::string_view string_to_sign) {
  std::string seed = "AWS4";
  seed += secret;
  Digest k_date = hmac(seed, date);
  Digest k_region = hmac(as_view(k_date), scope.region);
  Digest k_service = hmac(as_view(k_region), scope.service);
  Digest k_signing = hmac(as_view(k_service), k_terminator);
  const Digest signature = hmac(as_view(k_signing), string_to_sign);
  OPENSSL_cleanse(seed.data(), seed.size());
  for (Digest* key : {&k_date, &k_region, &k_service, &k_signing}) OPENSSL_cleanse(key->data(), key->size());
  return hex_lower(signature.data(), signature.size());
}

struct UrlParts {
  std::string host;   // with ":port" unless it is the scheme's default
  std::string path;   // raw, as in the URL
  std::string query;  // raw, without '?'
};

Result<UrlParts> split_url(std::string_view url) {
  const auto invalid = [&](const char* why) {
    return Error{ErrorCode::invalid_argument, "cannot sign " + log::redact_url(url) + ": " + why};
  };
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return invalid("not an http(s) URL");
  const std::string scheme = util::to_lower(url.substr(0, scheme_end));
  if (scheme != "http" && scheme != "https") return invalid("not an http(s) URL");
  std::string_view rest = url.substr(scheme_end + 3);
  if (auto hash = rest.find('#'); hash != std::string_view::npos) rest = rest.substr(0, hash);
  const auto authority_end = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, authority_end);
  rest = authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);
  if (auto at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);
  if (authority.empty()) return invalid("no host");

  // "[::1]:9000", "host:9000", "host": curl leaves the scheme's default port out of its Host header.
  std::string_view port;
  std::string_view host = authority;
  const auto bracket = authority.rfind(']');
  const auto colon = authority.rfind(':');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return invalid("no host");
  const bool default_port = port.empty() || (scheme == "http" && port == "80") || (scheme == "https" && port == "443");
  UrlParts parts;
  parts.host = default_port ? std::string(host) : std::string(host) + ":" + std::string(port);
  const auto question = rest.find('?');
  parts.path = std::string(rest.substr(0, question));
  if (question != std::string_view::npos) parts.query = std::string(rest.substr(question + 1));
  return parts;
}

// Trims and collapses runs of spaces and tabs to one space.
std::string canonical_header_value(std::string_view value) {
  std::string out;
  bool pending_space = false;
  for (char c : value) {
    if (c == ' ' || c == '\t') {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

struct CanonicalHeaders {
  std::string lines;  // "name:value\n" each
  std::string names;  // "name;name"
};

// The signed headers of `headers` plus host (from `url_host` unless a Host header is sent).
CanonicalHeaders canonical_headers(const net::HttpHeaders& headers, const std::string& url_host) {
  std::map<std::string, std::string> signed_headers;
  for (const auto& header : headers) {
    std::string name = util::to_lower(header.name);
    if (!is_signed_header(name)) continue;
    std::string value = canonical_header_value(header.value);
    auto [it, inserted] = signed_headers.emplace(std::move(name), value);
    if (!inserted) it->second += "," + value;
  }
  signed_headers.emplace("host", url_host);
  CanonicalHeaders out;
  for (const auto& [name, value] : signed_headers) {
    out.lines += name + ":" + value + "\n";
    if (!out.names.empty()) out.names += ';';
    out.names += name;
  }
  return out;
}

std::string credential_scope(const SigningScope& scope, std::string_view date) {
  std::string out(date);
  out += '/';
  out += scope.region;
  out += '/';
  out += scope.service;
  out += '/';
  out += k_terminator;
  return out;
}

Result<void> check_scope(const SigningScope& scope, const AwsCredentials& credentials) {
  if (scope.region.empty()) return Error{ErrorCode::invalid_argument, "SigV4: no region to sign for"};
  if (scope.service.empty()) return Error{ErrorCode::invalid_argument, "SigV4: no service to sign for"};
  if (credentials.access_key_id.empty() || credentials.secret_access_key.empty())
    return Error{ErrorCode::permission_denied, "SigV4: the credentials from " +
                                                   (credentials.source.empty() ? "the provider" : credentials.source) +
                                                   " have no access key id or no secret key"};
  return datavo::ok();
}

// Fills every stage of `out` from the canonical request's parts.
void finish_signature(SignatureV4& out, net::HttpMethod method, const UrlParts& url, const std::string& query,
                      const CanonicalHeaders& headers, std::string_view payload_hash, const AwsCredentials& credentials,
                      const SigningScope& scope) {
  const std::string timestamp = amz_date(scope.when);
  const std::string date = timestamp.substr(0, 8);
  out.canonical_request = std::string(net::to_string(method)) + "\n" + canonical_uri(url.path) + "\n" + query + "\n" +
                          headers.lines + "\n" + headers.names + "\n" + std::string(payload_hash);
  out.credential_scope = credential_scope(scope, date);
  out.string_to_sign = std::string(k_algorithm) + "\n" + timestamp + "\n" + out.credential_scope + "\n" +
                       sha256_hex(out.canonical_request);
  out.signed_headers = headers.names;
  out.signature = signature_of(credentials.secret_access_key, scope, date, out.string_to_sign);
}

}  // namespace

std::string canonical_uri(std::string_view path) {
  if (path.empty()) return "/";
  // Decoded first, so that a path the caller already encoded is not encoded twice; a %2F in it becomes a '/' of
  // the key, which S3 does not encode either.
  std::string out = util::percent_encode(decoded(path, util::Plus::literal), util::Slash::keep);
  if (out.front() != '/') out.insert(out.begin(), '/');
  return out;
}

std::string encode_endpoint_path(std::string_view endpoint) {
  const auto scheme_end = endpoint.find("://");
  const auto path_start = scheme_end == std::string_view::npos ? scheme_end : endpoint.find('/', scheme_end + 3);
  if (path_start == std::string_view::npos) return std::string(endpoint);
  return std::string(endpoint.substr(0, path_start)) + canonical_uri(endpoint.substr(path_start));
}

std::string canonical_query_string(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> params;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    if (!param.empty()) {
      const auto equals = param.find('=');
      const std::string_view name = param.substr(0, equals);
      const std::string_view value = equals == std::string_view::npos ? std::string_view() : param.substr(equals + 1);
      params.emplace_back(util::percent_encode(decoded(name, util::Plus::space)),
                          util::percent_encode(decoded(value, util::Plus::space)));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [name, value] : params) {
    if (!out.empty()) out += '&';
    out += name + "=" + value;
  }
  return out;
}

std::string encode_query(const std::vector<std::pair<std::string, std::string>>& params) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(params.size());
  for (const auto& [name, value] : params)
    encoded.emplace_back(util::percent_encode(name), util::percent_encode(value));
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out += '&';
    out += name + "=" + value;
  }
  return out;
}

std::string amz_date(std::chrono::system_clock::time_point when) {
  const time_t seconds = std::chrono::system_clock::to_time_t(when);
  struct tm utc {};
  gmtime_r(&seconds, &utc);
  char buffer[32];
  const std::size_t length = std::strftime(buffer, sizeof buffer, "%Y%m%dT%H%M%SZ", &utc);
  return std::string(buffer, length);
}

std::string sha256_hex(std::string_view bytes) {
  Sha256Hasher hasher;
  hasher.update(bytes.data(), bytes.size());
  return hasher.finish().hex();
}

bool is_signed_header(std::string_view name) {
  const std::string lowered = util::to_lower(name);
  if (lowered == "host" || lowered.starts_with("x-amz-")) return true;
  return std::find(std::begin(k_signed_plain_headers), std::end(k_signed_plain_headers), lowered) !=
         std::end(k_signed_plain_headers);
}

Result<SignatureV4> sign_request(net::HttpMethod method, std::string_view url, const net::HttpHeaders& headers,
                                 std::string_view payload_hash, const AwsCredentials& credentials,
                                 const SigningScope& scope) {
  DATAVO_TRY(check_scope(scope, credentials));
  auto parts = split_url(url);
  if (!parts) return std::move(parts).error();
  const auto host_header = net::find_header(headers, "Host");
  const CanonicalHeaders canonical =
      canonical_headers(headers, host_header ? canonical_header_value(*host_header) : parts->host);
  SignatureV4 out;
  finish_signature(out, method, *parts, canonical_query_string(parts->query), canonical, payload_hash, credentials,
                   scope);
  out.authorization = std::string(k_algorithm) + " Credential=" + credentials.access_key_id + "/" +
                      out.credential_scope + ", SignedHeaders=" + out.signed_headers + ", Signature=" + out.signature;
  return out;
}

Result<PresignedUrl> presign_url(net::HttpMethod method, std::string_view url, const net::HttpHeaders& headers,
                                 Seconds expires, const AwsCredentials& credentials, const SigningScope& scope) {
  DATAVO_TRY(check_scope(scope, credentials));
  if (expires < Seconds{1} || expires > k_max_presign_expiry)
    return Error{ErrorCode::invalid_argument,
                 "presigned URL expiry of " + std::to_string(expires.count()) + " s is outside 1 s to 7 days"};
  auto parts = split_url(url);
  if (!parts) return std::move(parts).error();
  const auto host_header = net::find_header(headers, "Host");
  const CanonicalHeaders canonical =
      canonical_headers(headers, host_header ? canonical_header_value(*host_header) : parts->host);

  const std::string timestamp = amz_date(scope.when);
  std::vector<std::pair<std::string, std::string>> auth_params = {
      {"X-Amz-Algorithm", std::string(k_algorithm)},
      {"X-Amz-Credential", credentials.access_key_id + "/" + credential_scope(scope, timestamp.substr(0, 8))},
      {"X-Amz-Date", timestamp},
      {"X-Amz-Expires", std::to_string(expires.count())},
      {"X-Amz-SignedHeaders", canonical.names},
  };
  if (!credentials.session_token.empty()) auth_params.push_back({"X-Amz-Security-Token", credentials.session_token});
  const std::string added = encode_query(auth_params);
  std::string query = parts->query;
  query += (query.empty() ? "" : "&") + added;

  PresignedUrl out;
  finish_signature(out.signature, method, *parts, canonical_query_string(query), canonical, k_unsigned_payload,
                   credentials, scope);
  std::string base(url.substr(0, url.find('#')));
  base += (parts->query.empty() ? (base.find('?') == std::string::npos ? "?" : "") : "&");
  out.url = base + added + "&X-Amz-Signature=" + out.signature.signature;
  return out;
}

std::optional<std::string> s3_error_code(std::string_view body) {
  auto fields = cloud::xml_child_texts(body, "Error");
  if (!fields) return std::nullopt;
  auto code = fields->find("Code");
  if (code == fields->end()) return std::nullopt;
  std::string value(util::trim(code->second));
  if (value.empty()) return std::nullopt;
  return value;
}

bool is_stale_credentials_code(std::string_view code) {
  return code == "ExpiredToken" || code == "TokenRefreshRequired" || code == "InvalidToken" || code == "RequestExpired";
}

namespace {

class SigV4Auth final : public net::RequestAuth {
 public:
  SigV4Auth(std::shared_ptr<AwsCredentialProvider> provider, std::string region, std::string service,
            std::shared_ptr<net::Clock> clock)
      : provider_(std::move(provider)),
        region_(std::move(region)),
        service_(std::move(service)),
        clock_(clock ? std::move(clock) : net::system_clock()) {}

  Result<void> prepare(net::PreparedRequest& request, int attempt) override {
    (void)attempt;
    auto credentials = provider_->get();
    if (!credentials) return std::move(credentials).error();

    std::optional<std::string> payload_hash;
    if (auto given = net::find_header(request.headers, "x-amz-content-sha256")) payload_hash = std::string(*given);
    // What this signer sets is set afresh on every attempt; a stale copy must not be signed next to it.
    std::erase_if(request.headers, [](const net::HttpHeader& header) {
      const std::string name = util::to_lower(header.name);
      return name == "authorization" || name == "x-amz-date" || name == "x-amz-security-token" ||
             name == "x-amz-content-sha256";
    });
    if (!payload_hash) payload_hash = payload_hash_of(request.body);
    // Sent as signed: a server that builds its canonical request from the raw values (s3rver) then agrees with
    // one that trims and collapses them as the specification says (S3).
    for (auto& header : request.headers)
      if (is_signed_header(header.name)) header.value = canonical_header_value(header.value);

    SigningScope scope{region_, service_, clock_->wall_now()};
    request.headers.push_back({"x-amz-date", amz_date(scope.when)});
    request.headers.push_back({"x-amz-content-sha256", *payload_hash});
    if (!credentials->session_token.empty())
      request.headers.push_back({"x-amz-security-token", credentials->session_token});
    auto signature = sign_request(request.method, request.url, request.headers, *payload_hash, *credentials, scope);
    if (!signature) return std::move(signature).error();
    request.headers.push_back({"Authorization", std::move(signature->authorization)});
    return datavo::ok();
  }

  bool refresh_after_refusal(long status, const net::HttpHeaders&, std::string_view body) override {
    if (status != 400 && status != 403) return false;
    const auto code = s3_error_code(body);
    if (!code || !is_stale_credentials_code(*code)) return false;
    LOG_INFO("S3 refused the credentials (" << *code << "); fetching new ones");
    provider_->invalidate();
    return true;
  }

 private:
  static std::string payload_hash_of(const net::RequestBody* body) {
    if (body == nullptr || std::holds_alternative<std::monostate>(*body)) return std::string(k_empty_sha256);
    if (const auto* text = std::get_if<std::string>(body)) return sha256_hex(*text);
    // A file is not read twice to be hashed; TLS protects it in transit and S3 checks Content-Length.
    return std::string(k_unsigned_payload);
  }

  const std::shared_ptr<AwsCredentialProvider> provider_;
  const std::string region_;
  const std::string service_;
  const std::shared_ptr<net::Clock> clock_;
};

}  // namespace

std::shared_ptr<net::RequestAuth> make_sigv4_auth(std::shared_ptr<AwsCredentialProvider> provider, std::string region,
                                                  std::string service, std::shared_ptr<net::Clock> clock) {
  return std::make_shared<SigV4Auth>(std::move(provider), std::move(region), std::move(service), std::move(clock));
}

}  // namespace datavo::s3
