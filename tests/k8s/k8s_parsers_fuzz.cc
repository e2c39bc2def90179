// Fuzzes the k8s parsers fed from outside the process: label/field selectors (user flags and
// query strings), kubeconfig YAML, base64 and Go durations. Never crashes; a label selector that
// parses matches consistently.
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "k8s/base64.h"
#include "k8s/client_flags.h"
#include "k8s/kubeconfig.h"
#include "k8s/selector.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  if (auto sel = hami::k8s::LabelSelector::Parse(in); sel) {
    hami::k8s::StringMap labels = {{"app", "web"}, {"tier", "gpu"}};
    if (sel->Matches(labels) != sel->Matches(labels)) std::abort();
    if (sel->empty() && !sel->Matches(labels)) std::abort();
  }
  if (auto sel = hami::k8s::FieldSelector::Parse(in); sel) {
    (void)sel->Matches(nlohmann::json::parse(R"({"metadata":{"name":"p"}})"));
  }
  (void)hami::k8s::ParseKubeconfig(in, "");
  (void)hami::k8s::ParseGoDuration(in);
  if (auto decoded = hami::k8s::Base64Decode(in); decoded) {
    if (hami::k8s::Base64Decode(hami::k8s::Base64Encode(*decoded)) != decoded) std::abort();
  }
  return 0;
}
