#include "tier/cloud/credential_chain.hpp"

#include "util/log.hpp"

namespace datavo::cloud {

Error no_credentials_found(std::string_view nothing_found, const std::vector<std::string>& tried) {
  std::string message(nothing_found);
  message += "; tried: ";
  for (std::size_t i = 0; i < tried.size(); ++i) message += (i == 0 ? "" : "; ") + tried[i];
  return Error{ErrorCode::permission_denied, std::move(message)};
}

void log_chosen_link(std::string_view chain, std::string_view link) { LOG_INFO(chain << ": using " << link); }

}  // namespace datavo::cloud
