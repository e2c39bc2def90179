// Standard base64 (RFC 4648, with padding), as kubeconfig *-data fields use it.
#ifndef HAMI_K8S_BASE64_H_
#define HAMI_K8S_BASE64_H_

#include <optional>
#include <string>
#include <string_view>

namespace hami::k8s {

std::string Base64Encode(std::string_view data);
// nullopt on a character outside the alphabet or bad padding; white space is skipped.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace hami::k8s

#endif  // HAMI_K8S_BASE64_H_
