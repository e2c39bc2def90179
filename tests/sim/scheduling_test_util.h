// What the tests of hami-sim's two kube-scheduler loops (kube_scheduler_test.cc,
// dra_scheduler_test.cc) share.
#ifndef HAMI_TESTS_SIM_SCHEDULING_TEST_UTIL_H_
#define HAMI_TESTS_SIM_SCHEDULING_TEST_UTIL_H_

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace hami::sim::testutil {

// Polls `done` until it holds or 10 s pass.
inline bool Eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return done();
}

// A Node whose Ready condition is True, nothing else.
inline nlohmann::json ReadyNode(const std::string& name) {
  nlohmann::json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}};
  node["status"]["conditions"] = nlohmann::json::array({{{"type", "Ready"}, {"status", "True"}}});
  return node;
}

}  // namespace hami::sim::testutil

#endif  // HAMI_TESTS_SIM_SCHEDULING_TEST_UTIL_H_
