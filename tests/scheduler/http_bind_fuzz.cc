// Fuzzes /bind with whole HTTP requests (head + chunked or sized body): the parser, then the
// ExtenderBindingArgs decoder the handler starts with.
#include <cstddef>
#include <cstdint>

#include "http_request_support.h"
#include "scheduler/extender_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto req = hami::scheduler::testing::ParseWholeRequest(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (!req) return 0;
  (void)hami::scheduler::ParseBindingArgs(req->body);
  return 0;
}
