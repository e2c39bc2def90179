// Shared by the tests that run a scenario in-process to its report (tests/sim/*_run_test.cc):
// where the examples are, and the run itself with containers that start at once.
#ifndef HAMI_TESTS_SIM_EXAMPLE_RUN_H_
#define HAMI_TESTS_SIM_EXAMPLE_RUN_H_

#include <chrono>
#include <string>
#include <utility>

#include "common/result.h"
#include "sim/runner.h"
#include "sim/scenario.h"

namespace hami::sim {

// examples/<name> of the source tree (HAMI_EXAMPLES_DIR, sim_test's compile definition).
inline std::string ExamplePath(const std::string& name) {
  return std::string(HAMI_EXAMPLES_DIR) + "/" + name;
}

// Runs `scenario` to its report with the kubelets' latency `kubelet_latency` (not the
// scenario's timing.kubeletLatency) and stops the cluster. Errors are Runner::Run's.
inline Result<Report> RunToReport(
    Scenario scenario, std::chrono::milliseconds kubelet_latency = std::chrono::milliseconds(0)) {
  RunOptions options;
  options.kubelet_latency = kubelet_latency;
  Runner runner(std::move(scenario), options);
  auto report = runner.Run();
  runner.Stop();
  return report;
}

}  // namespace hami::sim

#endif  // HAMI_TESTS_SIM_EXAMPLE_RUN_H_
