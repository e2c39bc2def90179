// What the tests of hami-sim's two kube-scheduler loops (kube_scheduler_test.cc,
// dra_scheduler_test.cc) share.
#ifndef HAMI_TESTS_SIM_SCHEDULING_TEST_UTIL_H_
#define HAMI_TESTS_SIM_SCHEDULING_TEST_UTIL_H_

#include <chrono>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "support/wait_for.h"

namespace hami::sim::testutil {

// Polls `done` until it holds or 10 s pass.
inline bool Eventually(const std::function<bool()>& done) {
  return test_support::WaitFor(done, std::chrono::seconds(10));
}

// A Node whose Ready condition is True, nothing else.
inline nlohmann::json ReadyNode(const std::string& name) {
  nlohmann::json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}};
  node["status"]["conditions"] = nlohmann::json::array({{{"type", "Ready"}, {"status", "True"}}});
  return node;
}

}  // namespace hami::sim::testutil

#endif  // HAMI_TESTS_SIM_SCHEDULING_TEST_UTIL_H_
