// Allocate latency including its API calls (GET node, GET pod, PATCH pod, GET pod, PATCH pod,
// GET node, PATCH node) against the in-process sim apiserver over loopback HTTP. Each iteration
// creates a bound pod holding the node lock (untimed), then times one Allocator::Allocate.
// Usage: deviceplugin_allocate_bench [iterations=500]. Target (issue 5): p99 <= 10 ms.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/log.h"
#include "deviceplugin/allocator.h"
#include "k8s/client.h"
#include "protocol/node_lock.h"
#include "sim/apiserver.h"

namespace {

using hami::k8s::Json;
namespace res = hami::k8s::resources;
constexpr const char* kGpu = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448";

int Bench(int iterations) {
  hami::sim::ApiServer server{hami::sim::ApiServerOptions{}};
  if (!server.Start()) return 1;
  hami::k8s::RestConfig cfg;
  cfg.server = server.url();
  cfg.qps = 0;
  hami::k8s::Client client(cfg);
  Json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}};
  if (!client.Create(res::kNodes, "", node)) return 1;
  const std::string hook = std::filesystem::temp_directory_path() / "hami-allocate-bench";
  hami::deviceplugin::AllocateEnv env;
  env.hook_path = hook;
  hami::deviceplugin::Allocator allocator(&client, "n1", env);
  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) {
    const std::string name = "p" + std::to_string(i);
    const std::string value = std::string(kGpu) + ",NVIDIA,3000,0:;";
    Json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata",
                 {{"name", name},
                  {"namespace", "default"},
                  {"annotations",
                   {{"hami.io/bind-phase", "allocating"},
                    {"hami.io/bind-time", "1716199325"},
                    {"hami.io/vgpu-node", "n1"},
                    {"hami.io/vgpu-devices-to-allocate", value}}}}},
                {"spec", {{"nodeName", "n1"}, {"containers", Json::array({{{"name", "c"}}})}}}};
    if (!client.Create(res::kPods, "default", pod)) return 1;
    Json lock;
    lock["metadata"]["annotations"]["hami.io/mutex.lock"] =
        hami::protocol::NodeLockValue(hami::RealClock().Now(), hami::Zone::Utc(), "default", name);
    if (!client.Patch(res::kNodes, "", "n1", hami::k8s::PatchType::kMerge, lock)) return 1;
    const auto start = std::chrono::steady_clock::now();
    auto r = allocator.Allocate({{std::string(kGpu) + "-0"}});
    const auto end = std::chrono::steady_clock::now();
    if (!r) {
      std::fprintf(stderr, "allocate: %s\n", r.error().c_str());
      return 1;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) { return ms[static_cast<size_t>(p * (ms.size() - 1))]; };
  std::printf("allocate iterations=%d p50=%.3f ms p90=%.3f ms p99=%.3f ms max=%.3f ms\n",
              iterations, pct(0.50), pct(0.90), pct(0.99), ms.back());
  std::filesystem::remove_all(hook);
  server.Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  hami::log::SetVerbosity(-1);
  return Bench(argc > 1 ? std::atoi(argv[1]) : 500);
}
