// The bearer authorization of the cloud tiers (GCS, and Azure Blob when it authorizes with Azure AD tokens):
// net::bearer_auth over a TokenProvider, "Authorization: Bearer <token>" on every attempt, and one repeat with a
// fresh token after a refusal that says the token is stale.
//
// Thread safety: the RequestAuth is thread-safe; one serves every request of a tier.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include "net/http_client.hpp"
#include "tier/cloud/credential_provider.hpp"

namespace datavo::cloud {

struct BearerOptions {
  // Adds what every attempt needs besides the token (Azure: x-ms-date and x-ms-version). nullptr: nothing.
  std::function<void(net::PreparedRequest& request)> decorate;
  // Whether a refusal (status >= 400, its headers and body) says the token is stale. nullptr: a 401 does (a 403 is
  // a permission the identity lacks: a new token of the same identity would be refused alike).
  std::function<bool(long status, const net::HttpHeaders& headers, std::string_view body)> stale;
};

// prepare(): gets a token from `provider` (its Error ends the request; a token holding a line break is refused as
// remote, never sent), decorates the request, adds the Authorization header. refresh_after_refusal(): when the
// refusal is stale, invalidates the provider's token and returns true (the transport then repeats the request
// once). REQUIRES: provider != nullptr.
std::shared_ptr<net::RequestAuth> make_bearer_auth(std::shared_ptr<TokenProvider> provider, BearerOptions options = {});

}  // namespace datavo::cloud
