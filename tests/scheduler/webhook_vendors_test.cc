// The webhook over every vendor (issue 15 item 1): it loops over the registered backends and
// knows none of them, so with every vendor active (the chart's default device-config.yaml) a
// pod that asks only for NVIDIA gets the very reply it gets with NVIDIA alone, and a pod that
// asks for nothing is left untouched.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "device/config.h"
#include "device/device.h"
#include "scheduler/webhook.h"

namespace hami::scheduler {
namespace {

using nlohmann::json;

std::string Review(const json& pod) {
  return json{{"apiVersion", "admission.k8s.io/v1"},
              {"kind", "AdmissionReview"},
              {"request", {{"uid", "u-1"}, {"namespace", "default"}, {"object", pod}}}}
      .dump();
}

json Pod(const json& limits) {
  json ctr = {{"name", "main"}, {"image", "busybox"}};
  if (!limits.is_null()) ctr["resources"]["limits"] = limits;
  json pod = {{"metadata", {{"name", "p"}, {"namespace", "default"}}}};
  pod["spec"]["containers"] = json::array({ctr});
  return pod;
}

// Every registered section present with its defaults (iluvatars is a list: one chip).
device::DeviceConfig AllVendors() {
  std::string yaml;
  for (const std::string& section : device::RegisteredVendorSections()) {
    yaml += section +
            (section == "iluvatars" ? ": [{chipName: MR-V100, commonWord: MR-V100}]\n" : ": {}\n");
  }
  auto config = device::LoadDeviceConfig(yaml);
  EXPECT_TRUE(config) << config.error() << "\n" << yaml;
  return config ? *config : device::DefaultDeviceConfig();
}

TEST(WebhookVendorsTest, AnNvidiaPodGetsTheSameReplyWithEveryVendorActive) {
  const device::Registry nvidia_only =
      device::MakeRegistry(*device::LoadDeviceConfig("nvidia: {}\n"));
  const device::Registry all = device::MakeRegistry(AllVendors());
  ASSERT_GT(all.All().size(), 10u);
  const WebhookOptions options{"hami-scheduler", true};
  for (const json& limits :
       {json(nullptr), json{{"nvidia.com/gpu", "1"}},
        json{{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "3000"}},
        json{{"nvidia.com/gpumem-percentage", "50"}}, json{{"nvidia.com/gpucores", "30"}},
        json{{"nvidia.com/gpumem-percentage", "150"}}, json{{"cpu", "1"}}}) {
    const std::string review = Review(Pod(limits));
    HttpReply a = HandleAdmissionReview(review, nvidia_only, options, nullptr);
    HttpReply b = HandleAdmissionReview(review, all, options, nullptr);
    EXPECT_EQ(a.status, b.status) << limits;
    EXPECT_EQ(a.body, b.body) << limits;
  }
}

}  // namespace
}  // namespace hami::scheduler
