// A credential chain: an ordered list of links, each one place where a credential may be found (the shape of the
// AWS SDKs' default chain and of azure-identity's DefaultAzureCredential), behind the one cache and refresh rule of
// credential_provider.hpp.
//
//   - A fetch walks the links in order. A link that does not apply here (its settings are absent, its service
//     does not answer) says why and the walk goes on; a link that applies but fails ends the walk with its Error:
//     a misconfigured credential is reported, never silently replaced by another identity.
//   - The first link that gives a credential is kept: refreshes ask it alone (as botocore and azure-identity do).
//     When it no longer applies, get() fails with permission_denied saying why.
//   - When no link applies: permission_denied, "<nothing_found>; tried: <link>: <why>; <link>: <why>; ...".
//
// Thread safety: the chain is a CachingProvider (thread-safe); links are fetched by one thread at a time, and
// describe() may be called from any thread.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tier/cloud/credential_provider.hpp"

namespace datavo::cloud {

template <typename Credential>
class CredentialLink {
 public:
  virtual ~CredentialLink() = default;
  // What the link is, for messages and logs ("environment", "managed identity (IMDS at ...)"). No secret.
  virtual std::string name() const = 0;
  // A credential; nullopt when the link does not apply here, with the reason in `why`; or an Error that ends the
  // chain.
  virtual Result<std::optional<Credential>> fetch(std::string& why) = 0;
};

// The permission_denied Error of a chain where no link applied.
Error no_credentials_found(std::string_view nothing_found, const std::vector<std::string>& tried);
// The INFO line of a chain that keeps `link`.
void log_chosen_link(std::string_view chain, std::string_view link);

template <typename Credential>
class ChainProvider : public CachingProvider<Credential> {
 public:
  using Link = CredentialLink<Credential>;

  // `label` names the chain until a link is kept ("the DefaultAzureCredential chain"); `nothing_found` starts the
  // message when no link applies. Does no I/O.
  ChainProvider(CredentialEnv env, std::string label, std::vector<std::unique_ptr<Link>> links,
                std::string nothing_found)
      : CachingProvider<Credential>(std::move(env)),
        label_(std::move(label)),
        links_(std::move(links)),
        nothing_found_(std::move(nothing_found)) {}

  // The kept link's name, else the chain's label.
  std::string describe() const override {
    std::lock_guard lock(chosen_mutex_);
    return chosen_ != nullptr ? chosen_->name() : label_;
  }

 protected:
  Result<Credential> fetch() override;

 private:
  const std::string label_;
  const std::vector<std::unique_ptr<Link>> links_;
  const std::string nothing_found_;
  mutable std::mutex chosen_mutex_;
  Link* chosen_ = nullptr;  // guarded by chosen_mutex_; points into links_
};

template <typename Credential>
Result<Credential> ChainProvider<Credential>::fetch() {
  Link* chosen = nullptr;
  {
    std::lock_guard lock(chosen_mutex_);
    chosen = chosen_;
  }
  std::string why;
  if (chosen != nullptr) {
    auto found = chosen->fetch(why);
    if (!found) return std::move(found).error();
    if (!*found) return Error{ErrorCode::permission_denied, chosen->name() + " no longer gives credentials: " + why};
    return std::move(**found);
  }
  std::vector<std::string> tried;
  for (const auto& link : links_) {
    why.clear();
    auto found = link->fetch(why);
    if (!found) return std::move(found).error();
    if (*found) {
      log_chosen_link(label_, link->name());
      std::lock_guard lock(chosen_mutex_);
      chosen_ = link.get();
      return std::move(**found);
    }
    tried.push_back(link->name() + ": " + why);
  }
  return no_credentials_found(nothing_found_, tried);
}

}  // namespace datavo::cloud
