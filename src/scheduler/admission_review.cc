#include "scheduler/admission_review.h"

#include <utility>

#include "common/json.h"

namespace hami::scheduler {

using nlohmann::json;

namespace {

std::string StringField(const json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

AdmissionEnvelope ReadAdmissionReview(std::string_view body) {
  AdmissionEnvelope out;
  Result<json> parsed = ParseJson(body);
  if (!parsed) {
    out.error = "admission review: " + parsed.error();
    return out;
  }
  json& review = *parsed;
  out.api_version = StringField(review, "apiVersion");
  json* request = review.is_object() && review.contains("request") && review["request"].is_object()
                      ? &review["request"]
                      : nullptr;
  if (request) {
    out.uid = StringField(*request, "uid");
    out.ns = StringField(*request, "namespace");
  }
  if (!request || !request->contains("object") || !(*request)["object"].is_object()) {
    out.error = "admission review: want an object with request.object";
    return out;
  }
  out.object = std::move((*request)["object"]);
  return out;
}

HttpReply AdmissionReply(const AdmissionEnvelope& review, json response_fields) {
  json response = {{"uid", review.uid}};
  for (auto& [k, v] : response_fields.items()) response[k] = std::move(v);
  json out = {
      {"apiVersion", review.api_version.empty() ? "admission.k8s.io/v1" : review.api_version},
      {"kind", "AdmissionReview"},
      {"response", std::move(response)}};
  return HttpReply{200, out.dump()};
}

json AdmissionDenied(const std::string& message) {
  return {{"allowed", false},
          {"status", {{"code", 403}, {"reason", "Forbidden"}, {"message", message}}}};
}

json AdmissionAllowed(const std::string& message) {
  json status = {{"code", 200}};
  if (!message.empty()) status["message"] = message;
  return {{"allowed", true}, {"status", status}};
}

json AdmissionErrored(int code, const std::string& message) {
  return {{"allowed", false}, {"status", {{"code", code}, {"message", message}}}};
}

}  // namespace hami::scheduler
