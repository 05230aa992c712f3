#include "tier/cloud/bearer_auth.hpp"

namespace datavo::cloud {
namespace {

class BearerAuth final : public net::RequestAuth {
 public:
  BearerAuth(std::shared_ptr<TokenProvider> provider, BearerOptions options)
      : provider_(std::move(provider)), options_(std::move(options)) {}

  Result<void> prepare(net::PreparedRequest& request, int) override {
    auto token = provider_->get();
    if (!token) return std::move(token).error();
    // A header value must not be able to end the header: a token is the issuer's text, not ours.
    if (token->token.find_first_of("\r\n") != std::string::npos)
      return Error{ErrorCode::remote, provider_->describe() + ": the access token contains a line break"};
    if (options_.decorate) options_.decorate(request);
    request.headers.push_back({"Authorization", "Bearer " + token->token});
    return ok();
  }

  bool refresh_after_refusal(long status, const net::HttpHeaders& headers, std::string_view body) override {
    const bool stale = options_.stale ? options_.stale(status, headers, body) : status == 401;
    if (stale) provider_->invalidate();
    return stale;
  }

 private:
  const std::shared_ptr<TokenProvider> provider_;
  const BearerOptions options_;
};

}  // namespace

std::shared_ptr<net::RequestAuth> make_bearer_auth(std::shared_ptr<TokenProvider> provider, BearerOptions options) {
  return std::make_shared<BearerAuth>(std::move(provider), std::move(options));
}

}  // namespace datavo::cloud
