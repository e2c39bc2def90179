// Allocate latency including its API calls against the in-process sim apiserver over loopback
// HTTP. Each iteration creates a bound pod holding the node lock (untimed), then times one
// Allocator::Allocate. Then a breakdown: the same kinds of calls the Allocator makes, each
// timed alone (GET node, GET pod, merge PATCH pod, lock release by GET+merge PATCH and by one
// conditional JSON patch, the host cache dir), so a regression can be placed.
// Usage: deviceplugin_allocate_bench [iterations=500]. Target (issue 5): p99 <= 10 ms.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/log.h"
#include "deviceplugin/allocator.h"
#include "k8s/client.h"
#include "k8s/object.h"
#include "k8s/patches.h"
#include "nodelock/release.h"
#include "protocol/node_lock.h"
#include "sim/apiserver/apiserver.h"
#include "support/allocate_env.h"

namespace {

using hami::k8s::Json;
namespace res = hami::k8s::resources;
using hami::test_support::kLockKey;
using hami::test_support::kNode;
constexpr const char* kGpu = hami::test_support::kGpu1;

void Report(const char* what, std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) { return ms[static_cast<size_t>(p * (ms.size() - 1))]; };
  std::printf("%-28s n=%zu p50=%.3f ms p90=%.3f ms p99=%.3f ms max=%.3f ms\n", what, ms.size(),
              pct(0.50), pct(0.90), pct(0.99), ms.back());
}

// Times `op` `n` times; `setup` (untimed) runs before each.
std::vector<double> Time(int n, const std::function<bool()>& setup,
                         const std::function<bool()>& op) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    if (!setup()) return {};
    const auto start = std::chrono::steady_clock::now();
    if (!op()) return {};
    const auto end = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }
  return ms;
}

// A pod as the scheduler leaves it bound to kNode, holding the node lock.
bool CreateBoundPod(hami::k8s::Client& client, const std::string& name) {
  return hami::test_support::CreateBoundPod(client, name, std::string(kGpu) + ",NVIDIA,3000,0:;")
      .ok();
}

void Breakdown(hami::k8s::Client& client, const std::string& hook, int n) {
  auto none = [] { return true; };
  Report("GET node", Time(n, none, [&] { return client.Get(res::kNodes, "", kNode).ok(); }));
  Report("GET pod", Time(n, none, [&] { return client.Get(res::kPods, "default", "p0").ok(); }));
  int i = 0;
  Report(
      "merge PATCH pod", Time(n, none, [&] {
        auto patch = hami::k8s::AnnotationsMergePatch({{"x", std::to_string(i++)}});
        return client.Patch(res::kPods, "default", "p0", hami::k8s::PatchType::kMerge, patch).ok();
      }));
  std::string seen;  // the lock value as set (what the Allocator read from the node)
  auto lock = [&] {
    const std::string value =
        hami::protocol::NodeLockValue(hami::RealClock().Now(), hami::Zone::Utc(), "default", "p0");
    if (!hami::test_support::SetNodeLock(client, value)) return false;
    auto read = hami::test_support::NodeLock(client);
    seen = read && *read ? **read : "";
    return !seen.empty();
  };
  Report("release lock: GET+PATCH", Time(n, lock, [&] {
           return hami::nodelock::Release(client, kNode, "default", "p0").ok();
         }));
  const std::string path = "/metadata/annotations/" + hami::k8s::JsonPointerEscape(kLockKey);
  Report("release lock: JSON patch", Time(n, lock, [&] {
           Json ops = Json::array({{{"op", "test"}, {"path", path}, {"value", seen}},
                                   {{"op", "remove"}, {"path", path}}});
           return client.Patch(res::kNodes, "", kNode, hami::k8s::PatchType::kJsonPatch, ops).ok();
         }));
  // Allocate recreates <hook>/vgpu/containers/<uid>_<ctr>: new for a new pod (mkdir), present
  // when the same pod UID is allocated again (rmdir first: the slow one on ext4).
  auto make = [&](const std::string& dir) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    std::filesystem::create_directories(dir, ec);
    return !ec && ::chmod(dir.c_str(), 0777) == 0;
  };
  int d = 0;
  const std::string containers = hook + "/vgpu/containers/";
  Report("host cache dir (new)",
         Time(n, none, [&] { return make(containers + "uid" + std::to_string(d++) + "_c"); }));
  Report("host cache dir (present)", Time(n, none, [&] { return make(containers + "uid_c"); }));
}

int Bench(int iterations) {
  hami::sim::ApiServer server{hami::sim::ApiServerOptions{}};
  if (!server.Start()) return 1;
  auto owned_client = hami::test_support::NewClient(server.url());
  hami::k8s::Client& client = *owned_client;
  if (!client.Create(res::kNodes, "", hami::test_support::BareNode())) return 1;
  const std::string hook = std::filesystem::temp_directory_path() / "hami-allocate-bench";
  hami::deviceplugin::AllocateEnv env;
  env.hook_path = hook;
  hami::deviceplugin::Allocator allocator(&client, kNode, env);
  int i = 0;
  std::string error;
  auto ms = Time(
      iterations, [&] { return CreateBoundPod(client, "p" + std::to_string(i)); },
      [&] {
        auto r = allocator.Allocate({{std::string(kGpu) + "-0"}});
        ++i;
        if (!r) error = r.error();
        return r.ok();
      });
  if (ms.empty()) {
    std::fprintf(stderr, "allocate: %s\n", error.c_str());
    return 1;
  }
  Report("Allocate", ms);
  Breakdown(client, hook, std::max(iterations / 2, 1));
  std::filesystem::remove_all(hook);
  server.Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  hami::log::SetVerbosity(-1);
  return Bench(argc > 1 ? std::atoi(argv[1]) : 500);
}
