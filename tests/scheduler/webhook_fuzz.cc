// Fuzzes the /webhook handler with arbitrary bodies: it must answer, never crash or throw.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "device/config.h"
#include "scheduler/webhook.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const hami::device::Registry registry =
      hami::device::MakeRegistry(hami::device::DefaultDeviceConfig());
  std::string_view body(reinterpret_cast<const char*>(data), size);
  hami::scheduler::WebhookOptions options{"hami-scheduler", true};
  hami::scheduler::HttpReply r =
      hami::scheduler::HandleAdmissionReview(body, registry, options, nullptr);
  if (r.body.empty()) __builtin_trap();
  return 0;
}
