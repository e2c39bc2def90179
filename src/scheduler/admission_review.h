// The AdmissionReview envelope both webhooks (device-plugin mode, webhook.h; DRA mode,
// dra_webhook.h) read and answer (docs/protocol.md#webhook). A review that cannot be
// read is answered as webhook servers (controller-runtime) do: HTTP 200 with an AdmissionReview
// whose status carries code 400, so kube-apiserver logs the reason. Without a readable
// request.uid the reply's uid is "": kube-apiserver rejects a uid that does not match its
// request and applies the webhook's failurePolicy (docs/INPUT_LIMITS.md). No field of the
// envelope, whatever its type, makes reading it throw.
#ifndef HAMI_SCHEDULER_ADMISSION_REVIEW_H_
#define HAMI_SCHEDULER_ADMISSION_REVIEW_H_

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "scheduler/http_reply.h"

namespace hami::scheduler {

struct AdmissionEnvelope {
  std::string api_version;  // "" when absent or not a string
  std::string uid;          // request.uid; "" when absent or not a string
  std::string ns;           // request.namespace; "" when absent or not a string
  nlohmann::json object;    // request.object (an object) when `error` is empty
  std::string error;        // non-empty: answer AdmissionErrored(400, error)
};

AdmissionEnvelope ReadAdmissionReview(std::string_view body);

// The reply: an AdmissionReview in the request's version (v1 when unknown) whose response is
// {uid} plus `response_fields`, over HTTP 200.
HttpReply AdmissionReply(const AdmissionEnvelope& review, nlohmann::json response_fields);

// response fields: allowed false with status code 403, reason Forbidden.
nlohmann::json AdmissionDenied(const std::string& message);
// allowed true, status code 200 (and the message when non-empty).
nlohmann::json AdmissionAllowed(const std::string& message);
// allowed false with status `code` and the message (no reason): the request is in error.
nlohmann::json AdmissionErrored(int code, const std::string& message);

}  // namespace hami::scheduler

#endif  // HAMI_SCHEDULER_ADMISSION_REVIEW_H_
