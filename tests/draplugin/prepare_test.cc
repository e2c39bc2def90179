#include "draplugin/prepare.h"

#include <gtest/gtest.h>

namespace hami::draplugin {
namespace {

GpuFacts Gpu(int minor, int64_t memory_mib = 81920) {
  GpuFacts g;
  g.gpu.uuid = "GPU-" + std::to_string(minor);
  g.gpu.model = "NVIDIA A100-SXM4-80GB";
  g.gpu.memory_mib = memory_mib;
  g.attributes.minor = minor;
  return g;
}

// A claim as kube-scheduler leaves it after allocating shares of our devices.
Json Claim(const Json& results) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", "pod-gpu"}, {"namespace", "ml"}, {"uid", "c1a1"}}},
          {"status", {{"allocation", {{"devices", {{"results", results}}}}}}}};
}

Json Result(const std::string& device, const std::string& share, const Json& consumed,
            const std::string& request = "gpu") {
  Json r = {{"request", request},
            {"driver", "hami-core-gpu.project-hami.io"},
            {"pool", "node-a"},
            {"device", device}};
  if (!share.empty()) r["shareID"] = share;
  if (!consumed.is_null()) r["consumedCapacity"] = consumed;
  return r;
}

TEST(ReadClaimAllocation, OurResultsWithTheirConsumedCapacity) {
  Json results = Json::array({Result("hami-gpu-0", "s1", {{"memory", "3000Mi"}, {"cores", "30"}}),
                              {{"request", "nic"},
                               {"driver", "sriov.example.com"},
                               {"pool", "node-a"},
                               {"device", "vf-0"}},
                              Result("hami-gpu-1", "", nullptr)});
  auto c = ReadClaimAllocation(Claim(results));
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->uid, "c1a1");
  EXPECT_EQ(c->ns, "ml");
  EXPECT_EQ(c->name, "pod-gpu");
  ASSERT_EQ(c->results.size(), 2u);
  EXPECT_EQ(c->results[0],
            (AllocationResult{"gpu", "node-a", "hami-gpu-0", "s1", 3000LL << 20, 30}));
  EXPECT_EQ(c->results[1], (AllocationResult{"gpu", "node-a", "hami-gpu-1", "", -1, -1}));

  auto bad =
      ReadClaimAllocation(Claim(Json::array({Result("hami-gpu-0", "s1", {{"memory", "3 GiB"}})})));
  ASSERT_FALSE(bad);
  EXPECT_EQ(
      bad.error(),
      R"(status.allocation.devices.results[0].consumedCapacity.memory: want a quantity, got "3 GiB")");
  Json unallocated = Claim(Json::array());
  unallocated.erase("status");
  auto none = ReadClaimAllocation(unallocated);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error(),
            "ResourceClaim ml/pod-gpu: status.allocation.devices.results: not allocated");
}

// gpumem 3000 and gpucores 30 as a claim share: exactly what a device-plugin vGPU container
// gets (docs/vgpu.md), for every container that uses the claim.
TEST(PlanClaim, AShareGetsItsLimitsThroughLibvgpu) {
  auto claim = ReadClaimAllocation(
      Claim(Json::array({Result("hami-gpu-2", "s1", {{"memory", "3000Mi"}, {"cores", "30"}})})));
  ASSERT_TRUE(claim);
  PrepareEnv env;
  auto plan = PlanClaim(*claim, {Gpu(0), Gpu(2)}, env);
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_EQ(plan->claim_dir, "/usr/local/vgpu/claims/c1a1");
  ASSERT_EQ(plan->files.size(), 4u);
  EXPECT_EQ(plan->files[0],
            (PlannedFile{"/usr/local/vgpu/claim-limits/c1a1.limits",
                         "# libvgpu limits, written by hami-dra-plugin (docs/vgpu.md)\n"
                         "CUDA_DEVICE_MEMORY_LIMIT_0=3000m\n"
                         "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/c1a1.cache\n"
                         "CUDA_DEVICE_SM_LIMIT_0=30\n"
                         "GPU_CORE_UTILIZATION_POLICY=default\n",
                         0644, false}));
  EXPECT_EQ(plan->files[1],
            (PlannedFile{"/usr/local/vgpu/claims/c1a1/c1a1.cache", "", 0666, true}));
  EXPECT_EQ(plan->files[2],
            (PlannedFile{"/usr/local/vgpu/claims/c1a1/c1a1.cache.limiter", "", 0666, true}));
  EXPECT_EQ(plan->files[3].host_path, "/var/run/cdi/hami-core-gpu.project-hami.io-claim_c1a1.json");
  EXPECT_EQ(Json::parse(plan->files[3].content), plan->cdi_spec);
  const Json& spec = plan->cdi_spec;
  EXPECT_EQ(spec["cdiVersion"], "0.6.0");
  EXPECT_EQ(spec["kind"], "hami-core-gpu.project-hami.io/claim");
  EXPECT_EQ(spec["devices"], Json::parse(R"([{"name":"c1a1-s1","containerEdits":{
      "deviceNodes":[{"path":"/dev/nvidia2"}]}}])"));
  EXPECT_EQ(spec["containerEdits"]["env"],
            Json::parse(R"(["NVIDIA_VISIBLE_DEVICES=GPU-2","CUDA_DEVICE_MEMORY_LIMIT_0=3000m",
      "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/c1a1.cache","CUDA_DEVICE_SM_LIMIT_0=30"])"));
  EXPECT_EQ(spec["containerEdits"]["deviceNodes"],
            Json::parse(R"([{"path":"/dev/nvidiactl"},{"path":"/dev/nvidia-uvm"},
      {"path":"/dev/nvidia-uvm-tools"}])"));
  std::vector<std::string> mounts;
  for (const Json& m : spec["containerEdits"]["mounts"]) {
    mounts.push_back(m["containerPath"].get<std::string>() + " <- " +
                     m["hostPath"].get<std::string>() + " " + m["options"][0].get<std::string>());
  }
  EXPECT_EQ(mounts,
            (std::vector<std::string>{
                "/usr/local/vgpu <- /usr/local/vgpu/claims/c1a1 rw",
                "/usr/local/vgpu/libvgpu.so <- /usr/local/vgpu/libvgpu.so ro",
                "/usr/local/vgpu/vgpu.limits <- /usr/local/vgpu/claim-limits/c1a1.limits ro",
                "/usr/local/vgpu/c1a1.cache <- /usr/local/vgpu/claims/c1a1/c1a1.cache rw",
                "/usr/local/vgpu/c1a1.cache.limiter <- "
                "/usr/local/vgpu/claims/c1a1/c1a1.cache.limiter rw",
                "/etc/ld.so.preload <- /usr/local/vgpu/ld.so.preload ro",
                "/tmp/vgpulock <- /tmp/vgpulock rw"}));
  ASSERT_EQ(plan->devices.size(), 1u);
  EXPECT_EQ(
      plan->devices[0],
      (PreparedDevice{{"gpu"},
                      "node-a",
                      "hami-gpu-2",
                      "s1",
                      {"hami-core-gpu.project-hami.io/claim=c1a1-s1", "nvidia.com/gpu=GPU-2"}}));
}

// Two shares of one GPU in one claim (HAMi's driver keyed capacity by device name and lost one):
// one CUDA device with both shares' memory and cores; each share its own CDI device.
TEST(PlanClaim, TwoSharesOfOneGpuAddUp) {
  auto claim = ReadClaimAllocation(Claim(
      Json::array({Result("hami-gpu-1", "s1", {{"memory", "2Gi"}, {"cores", "20"}}, "a"),
                   Result("hami-gpu-1", "s2", {{"memory", "1Gi"}, {"cores", "90"}}, "b"),
                   Result("hami-gpu-0", "s3", {{"memory", "1024Mi"}, {"cores", "10"}}, "c")})));
  ASSERT_TRUE(claim);
  auto plan = PlanClaim(*claim, {Gpu(0), Gpu(1)}, PrepareEnv{});
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_EQ(plan->cdi_spec["containerEdits"]["env"],
            Json::parse(R"(["NVIDIA_VISIBLE_DEVICES=GPU-0,GPU-1",
      "CUDA_DEVICE_MEMORY_LIMIT_0=1024m","CUDA_DEVICE_MEMORY_LIMIT_1=3072m",
      "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/c1a1.cache",
      "CUDA_DEVICE_SM_LIMIT_0=10","CUDA_DEVICE_SM_LIMIT_1=100"])"));
  ASSERT_EQ(plan->cdi_spec["devices"].size(), 3u);
  EXPECT_EQ(plan->cdi_spec["devices"][1]["name"], "c1a1-s2");
  EXPECT_EQ(plan->devices[1].requests, std::vector<std::string>{"b"});
}

// No capacity below the GPU's (kube-scheduler writes the request policy's default, the whole
// GPU): the GPU without the limiter.
TEST(PlanClaim, AWholeGpuGetsNoLimiter) {
  auto claim = ReadClaimAllocation(
      Claim(Json::array({Result("hami-gpu-0", "s1", {{"memory", "80Gi"}, {"cores", "100"}}),
                         Result("hami-gpu-1", "", nullptr)})));
  ASSERT_TRUE(claim);
  PrepareEnv env;
  env.nvidia_cdi_kind = "";
  auto plan = PlanClaim(*claim, {Gpu(0), Gpu(1)}, env);
  ASSERT_TRUE(plan) << plan.error();
  ASSERT_EQ(plan->files.size(), 1u);  // the CDI spec only
  EXPECT_EQ(plan->cdi_spec["containerEdits"]["env"],
            Json::parse(R"(["NVIDIA_VISIBLE_DEVICES=GPU-0,GPU-1"])"));
  EXPECT_TRUE(plan->cdi_spec["containerEdits"]["mounts"].empty());
  EXPECT_EQ(plan->devices[1].cdi_device_ids,
            std::vector<std::string>{"hami-core-gpu.project-hami.io/claim=c1a1-hami-gpu-1"});
}

// A MIG device (its instance made by MigPreparer) is its MIG UUID, without libvgpu.
TEST(PlanClaim, AMigDeviceIsItsMigUuidWithoutLimits) {
  auto claim =
      ReadClaimAllocation(Claim(Json::array({Result("hami-gpu-1-mig-3g-40gb-4", "", nullptr)})));
  ASSERT_TRUE(claim);
  ClaimMig mig;
  mig.device = "hami-gpu-1-mig-3g-40gb-4";
  mig.gpu_index = 1;
  mig.mig_uuid = "MIG-abc";
  GpuFacts gpu1 = Gpu(1);
  gpu1.gpu.index = 1;
  auto plan = PlanClaim(*claim, {Gpu(0), gpu1}, PrepareEnv{}, {mig});
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_EQ(plan->cdi_spec["containerEdits"]["env"],
            Json::parse(R"(["NVIDIA_VISIBLE_DEVICES=MIG-abc"])"));
  EXPECT_TRUE(plan->cdi_spec["containerEdits"]["mounts"].empty());
  EXPECT_EQ(plan->cdi_spec["devices"][0]["containerEdits"]["deviceNodes"],
            Json::parse(R"([{"path": "/dev/nvidia1"}])"));
  ASSERT_EQ(plan->files.size(), 1u);  // the CDI spec only
  EXPECT_EQ(
      plan->devices[0].cdi_device_ids,
      (std::vector<std::string>{"hami-core-gpu.project-hami.io/claim=c1a1-hami-gpu-1-mig-3g-40gb-4",
                                "nvidia.com/gpu=MIG-abc"}));
}

TEST(PlanClaim, DevicesNotOnThisNodeAreErrors) {
  auto claim = ReadClaimAllocation(Claim(Json::array({Result("hami-gpu-7", "s1", nullptr)})));
  ASSERT_TRUE(claim);
  auto plan = PlanClaim(*claim, {Gpu(0)}, PrepareEnv{});
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error(),
            R"(ResourceClaim ml/pod-gpu: result 0 ("hami-gpu-7"): no such device on this node)");
  auto mig =
      ReadClaimAllocation(Claim(Json::array({Result("hami-gpu-0-mig-1g-10gb-0", "", nullptr)})));
  ASSERT_TRUE(mig);
  plan = PlanClaim(*mig, {Gpu(0)}, PrepareEnv{});
  ASSERT_FALSE(plan);
  EXPECT_EQ(
      plan.error(),
      R"(ResourceClaim ml/pod-gpu: result 0 ("hami-gpu-0-mig-1g-10gb-0"): no MIG instance of this device on this node)");
  ClaimAllocation empty{"u", "ml", "x", {}};
  EXPECT_FALSE(PlanClaim(empty, {Gpu(0)}, PrepareEnv{}));
}

}  // namespace
}  // namespace hami::draplugin
