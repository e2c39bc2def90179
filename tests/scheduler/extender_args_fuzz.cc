// Fuzzes the extender body decoders and the side-effect-free simulation filter.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "device/config.h"
#include "scheduler/extender.h"
#include "scheduler/extender_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const hami::device::Registry registry =
      hami::device::MakeRegistry(hami::device::DefaultDeviceConfig());
  std::string_view body(reinterpret_cast<const char*>(data), size);
  (void)hami::scheduler::ParseBindingArgs(body);
  auto args = hami::scheduler::ParseExtenderArgs(body);
  if (args.ok() && args->nodes && !args->pod.is_null()) {
    (void)hami::scheduler::SimulateFilter(registry, *args, hami::device::ScheduleOptions{});
  }
  return 0;
}
