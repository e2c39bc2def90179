// Fuzzes /filter with whole HTTP requests (head + chunked or sized body): the parser, then the
// extender args decoder and the side-effect-free simulation filter (the `Nodes` form).
#include <cstddef>
#include <cstdint>

#include "device/config.h"
#include "http_request_support.h"
#include "scheduler/extender.h"
#include "scheduler/extender_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const hami::device::Registry registry =
      hami::device::MakeRegistry(hami::device::DefaultDeviceConfig());
  auto req = hami::scheduler::testing::ParseWholeRequest(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (!req) return 0;
  auto args = hami::scheduler::ParseExtenderArgs(req->body);
  if (args.ok() && args->nodes && !args->pod.is_null()) {
    (void)hami::scheduler::SimulateFilter(registry, *args, hami::device::ScheduleOptions{});
  }
  return 0;
}
