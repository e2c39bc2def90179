// The Kubernetes protobuf wire form, decoded for the few kinds clients send that way: helm's
// Secrets driver writes release Secrets (POST, PUT) as protobuf and deletes old revisions with a
// protobuf DeleteOptions body. docs/SIM_APISERVER.md lists the fields read; everything else in a
// message is skipped, as a protobuf reader of an older schema would.
#ifndef HAMI_SIM_PROTOBUF_H_
#define HAMI_SIM_PROTOBUF_H_

#include <string_view>

#include <nlohmann/json.hpp>

#include "k8s/api_error.h"

namespace hami::sim {

// "application/vnd.kubernetes.protobuf" (parameters ignored).
bool IsProtobufContentType(std::string_view content_type);

// Decodes `body` ("k8s\0" + runtime.Unknown{typeMeta, raw}) into the JSON form of the object:
// Secret, ConfigMap or DeleteOptions. Another kind is 415 UnsupportedMediaType; a truncated or
// malformed message, or a string that is not UTF-8, is 400 BadRequest naming the field.
k8s::ApiResult<nlohmann::json> DecodeProtobuf(std::string_view body);

}  // namespace hami::sim

#endif  // HAMI_SIM_PROTOBUF_H_
