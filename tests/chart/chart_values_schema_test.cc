// charts/hami/values.schema.json through helm: a misspelt key under our sections, a wrong type
// or an unknown policy fails `helm template` (and so install/upgrade) with helm's message naming
// the key; our values and HAMi v2.10's values file (every key it has) validate.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "render.h"

namespace hami::chart_test {
namespace {

TEST_F(ChartTest, ValuesSchemaRejectsWhatWouldOnlyCrashLaterNamingTheKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--set devicePlugin.deviceMemoryScalng=2",
       "devicePlugin: Additional property deviceMemoryScalng is not allowed"},
      {"--set scheduler.defaultSchedulerPolicy.nodeSchedulerPolicy=spraed",
       "scheduler.defaultSchedulerPolicy.nodeSchedulerPolicy must be one of the following"},
      {"--set scheduler.defaultSchedulerPolicy.gpuSchedulerPolicy=binpak",
       "scheduler.defaultSchedulerPolicy.gpuSchedulerPolicy: Does not match pattern"},
      {"--set scheduler.leaderElect=yes", "scheduler.leaderElect: Invalid type. Expected: boolean"},
      {"--set devicePlugin.deviceSplitCount=ten",
       "devicePlugin.deviceSplitCount: Invalid type. Expected: integer"},
      {"--set devicePlugin.deviceSplitCount=0", "devicePlugin.deviceSplitCount: Must be greater"},
      {"--set devicePlugin.deviceMemoryScaling=lots",
       "devicePlugin.deviceMemoryScaling: Does not match pattern"},
      {"--set devicePlugin.migStrategy=half", "devicePlugin.migStrategy must be one of"},
      {"--set devices.nvidia.gpuCorePolicy=always", "devices.nvidia.gpuCorePolicy must be one of"},
      {"--set scheduler.admissionWebhook.failurePolicy=ignore",
       "scheduler.admissionWebhook.failurePolicy must be one of"},
      {"--set scheduler.nodeLockExpire=5min", "scheduler.nodeLockExpire: Does not match pattern"},
      {"--set global.gpuHookpath=/opt", "global: Additional property gpuHookpath is not allowed"},
      {"--set scheduler.kubeScheduler.image.pullPolicy=always",
       "scheduler.kubeScheduler.image.pullPolicy must be one of"},
  };
  for (const auto& [args, want] : cases) {
    const CommandResult r = RunCommand(ShellQuote(helm_) + " template hami " + kChart + " " + args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.err.find(want), std::string::npos) << args << ":\n" << r.err;
  }
  // Accepted: HAMi's values file, a GPU policy chain, a fractional scaling (--set leaves it a
  // string), HAMi v2.11's keys, a number-looking tag.
  RenderChecked(std::string("-f ") + kHamiValues +
                " --set scheduler.defaultSchedulerPolicy.gpuSchedulerPolicy=topology-aware"
                " --set devicePlugin.deviceMemoryScaling=1.5 --set devicePlugin.image.tag=1.0"
                " --set scheduler.podDisruptionBudget.minAvailable=1"
                " --set devicePlugin.reportNodeCapacity=true --set platform.openshift=false"
                " --set selinux.enabled=false");
}

}  // namespace
}  // namespace hami::chart_test
