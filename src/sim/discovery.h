// Discovery and OpenAPI documents of the sim apiserver: what kubectl reads before any verb.
#ifndef HAMI_SIM_DISCOVERY_H_
#define HAMI_SIM_DISCOVERY_H_

#include <optional>
#include <string>
#include <string_view>

namespace hami::sim {

// The Kubernetes version /version reports; the kubectl dispatcher picks its kubectl by it.
inline constexpr std::string_view kServedMinorVersion = "30";

// The JSON body for a discovery path (/version, /api, /apis, /api/v1, /apis/<g>,
// /apis/<g>/<v>, /openapi/v3, /openapi/v3/<gv path>), or nullopt when `path` is none of them.
// `server_address` is host:port, for /api's serverAddressByClientCIDRs.
std::optional<std::string> DiscoveryDocument(std::string_view path,
                                             std::string_view server_address);

}  // namespace hami::sim

#endif  // HAMI_SIM_DISCOVERY_H_
