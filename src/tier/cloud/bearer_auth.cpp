#include "tier/cloud/bearer_auth.hpp"

namespace datavo::cloud {

std::shared_ptr<net::RequestAuth> make_bearer_auth(std::shared_ptr<TokenProvider> provider, BearerOptions options) {
  net::BearerSource source;
  source.token = [provider]() -> Result<std::string> {
    auto token = provider->get();
    if (!token) return std::move(token).error();
    return std::move(token->token);
  };
  source.issuer = [provider] { return provider->describe(); };
  source.drop_if_stale = [provider, stale = std::move(options.stale)](long status, const net::HttpHeaders& headers,
                                                                      std::string_view body) {
    const bool is_stale = stale ? stale(status, headers, body) : status == 401;
    if (is_stale) provider->invalidate();
    return is_stale;
  };
  source.decorate = std::move(options.decorate);
  return net::bearer_auth(std::move(source));
}

}  // namespace datavo::cloud
