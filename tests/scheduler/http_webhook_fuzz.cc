// Fuzzes /webhook with whole HTTP requests (head + chunked or sized body): the parser, then the
// admission handler, which must always answer.
#include <cstddef>
#include <cstdint>

#include "device/config.h"
#include "http_request_support.h"
#include "scheduler/webhook.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const hami::device::Registry registry =
      hami::device::MakeRegistry(hami::device::DefaultDeviceConfig());
  auto req = hami::scheduler::testing::ParseWholeRequest(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (!req) return 0;
  hami::scheduler::WebhookOptions options{"hami-scheduler", true};
  hami::scheduler::HttpReply r =
      hami::scheduler::HandleAdmissionReview(req->body, registry, options, nullptr);
  if (r.body.empty()) __builtin_trap();
  return 0;
}
