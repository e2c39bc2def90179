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

// The body of GET /openapi/v2, which clients request in protobuf only
// (they ask for ...spec.v2@v1.0+protobuf; the reply names it without the "@", which Go's mime
// parser rejects): a document with no definitions. kubectl validates a `kind: List`
// against it (each item's kind has no schema there, so it leaves validation to the server);
// without it `kubectl create -f` of a List fails unless --validate=false.
inline constexpr std::string_view kOpenApiV2ContentType =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
std::string OpenApiV2Protobuf();

}  // namespace hami::sim

#endif  // HAMI_SIM_DISCOVERY_H_
