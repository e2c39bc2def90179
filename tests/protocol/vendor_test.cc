#include "protocol/vendor.h"

#include <gtest/gtest.h>

#include <set>

namespace hami::protocol {
namespace {

// One row per vendor, every key spelled out (docs/protocol.md#resource-names-and-vendor-keys;
// Hygon writes hami.io/hcu-devices-to-allocate).
struct Row {
  const char* key;
  std::vector<std::string> resources;
  const char* register_key;
  RegisterFormat format;
  const char* handshake;
  const char* to_allocate;
  std::vector<std::string> to_allocate_read;
  const char* allocated;
  const char* use_type;
  const char* nouse_type;
  const char* use_uuid;
  const char* nouse_uuid;
};

void ExpectRow(const VendorInfo& v, const Row& r) {
  SCOPED_TRACE(r.key);
  EXPECT_EQ(v.vendor_key, r.key);
  EXPECT_EQ(v.ResourceNames(), r.resources);
  EXPECT_EQ(v.register_key, r.register_key);
  EXPECT_EQ(v.register_format, r.format);
  EXPECT_EQ(v.handshake_key, r.handshake);
  EXPECT_EQ(v.to_allocate_key, r.to_allocate);
  EXPECT_EQ(v.to_allocate_read_keys, r.to_allocate_read);
  EXPECT_EQ(v.allocated_key, r.allocated);
  EXPECT_EQ(v.use_type_key, r.use_type);
  EXPECT_EQ(v.nouse_type_key, r.nouse_type);
  EXPECT_EQ(v.use_uuid_key, r.use_uuid);
  EXPECT_EQ(v.nouse_uuid_key, r.nouse_uuid);
}

const RegisterFormat kJson = RegisterFormat::kJson;
const RegisterFormat kColon = RegisterFormat::kLegacyColon;
const RegisterFormat kCap = RegisterFormat::kCapacity;
const RegisterFormat kOwn = RegisterFormat::kVendorSpecific;

TEST(Vendor, BuiltinTablePinsEveryKey) {
  const std::vector<Row> rows = {
      {"NVIDIA",
       {"nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage",
        "nvidia.com/gpucores", "nvidia.com/priority"},
       "hami.io/node-nvidia-register",
       kJson,
       "hami.io/node-handshake",
       "hami.io/vgpu-devices-to-allocate",
       {},
       "hami.io/vgpu-devices-allocated",
       "nvidia.com/use-gputype",
       "nvidia.com/nouse-gputype",
       "nvidia.com/use-gpuuuid",
       "nvidia.com/nouse-gpuuuid"},
      {"MLU",
       {"cambricon.com/vmlu", "cambricon.com/mlu.smlu.vmemory", "cambricon.com/mlu.smlu.vcore"},
       "",
       kCap,
       "",
       "hami.io/cambricon-mlu-devices-to-allocate",
       {},
       "hami.io/cambricon-mlu-devices-allocated",
       "cambricon.com/use-mlutype",
       "cambricon.com/nouse-mlutype",
       "cambricon.com/use-gpuuuid",
       "cambricon.com/nouse-gpuuuid"},
      {"DCU",
       {"hygon.com/dcunum", "hygon.com/dcumem", "hygon.com/dcucores"},
       "hami.io/node-dcu-register",
       kColon,
       "hami.io/node-handshake-dcu",
       "hami.io/hcu-devices-to-allocate",
       {"hami.io/dcu-devices-to-allocate"},
       "hami.io/dcu-devices-allocated",
       "hygon.com/use-dcutype",
       "hygon.com/nouse-dcutype",
       "hygon.com/use-gpuuuid",
       "hygon.com/nouse-gpuuuid"},
      {"Metax-GPU",
       {"metax-tech.com/gpu"},
       "",
       kCap,
       "",
       "hami.io/metax-gpu-devices-to-allocate",
       {},
       "hami.io/metax-gpu-devices-allocated",
       "",
       "",
       "",
       ""},
      {"Metax-SGPU",
       {"metax-tech.com/sgpu", "metax-tech.com/vmemory", "metax-tech.com/vcore"},
       "metax-tech.com/node-gpu-devices",
       kOwn,
       "",
       "hami.io/metax-sgpu-devices-to-allocate",
       {},
       "hami.io/metax-sgpu-devices-allocated",
       "",
       "",
       "metax-tech.com/use-gpuuuid",
       "metax-tech.com/nouse-gpuuuid"},
      {"Mthreads",
       {"mthreads.com/vgpu", "mthreads.com/sgpu-memory", "mthreads.com/sgpu-core"},
       "",
       kCap,
       "",
       "hami.io/mthreads-vgpu-devices-to-allocate",
       {},
       "hami.io/mthreads-vgpu-devices-allocated",
       "",
       "",
       "mthreads.ai/use-gpuuuid",
       "mthreads.ai/nouse-gpuuuid"},
      {"GCU",
       {"enflame.com/gcu"},
       "",
       kCap,
       "",
       "hami.io/enflame-gcu-devices-to-allocate",
       {},
       "hami.io/enflame-gcu-devices-allocated",
       "",
       "",
       "enflame.com/use-gpuuuid",
       "enflame.com/nouse-gpuuuid"},
      {"Enflame",
       {"enflame.com/drs-gcu", "enflame.com/gcu-memory", "enflame.com/gcu-core"},
       "enflame.com/gcu-drs-capacity",
       kOwn,
       "",
       "",
       {},
       "hami.io/enflame-vgpu-devices-allocated",
       "",
       "",
       "enflame.com/use-gpuuuid",
       "enflame.com/nouse-gpuuuid"},
      {"kunlun",
       {"kunlunxin.com/xpu"},
       "",
       kCap,
       "",
       "",
       {},
       "hami.io/kunlun-allocated",
       "",
       "",
       "baidu.com/use-gpuuuid",
       "baidu.com/nouse-gpuuuid"},
      {"XPU",
       {"kunlunxin.com/vxpu", "kunlunxin.com/vxpu-memory"},
       "hami.io/node-register-xpu",
       kJson,
       "hami.io/node-handshake-xpu",
       "hami.io/xpu-devices-to-allocate",
       {},
       "hami.io/xpu-devices-allocated",
       "",
       "",
       "hami.io/use-xpu-uuid",
       "hami.io/no-use-xpu-uuid"},
      {"AWSNeuron",
       {"aws.amazon.com/neuron", "aws.amazon.com/neuroncore"},
       "",
       kCap,
       "",
       "",
       {},
       "hami.io/aws-neuron-devices-allocated",
       "",
       "",
       "aws.amazon.com/use-neuron-uuid",
       "aws.amazon.com/nouse-neuron-uuid"},
      {"AMD",
       {"amd.com/gpu", "amd.com/gpumem", "amd.com/gpucores"},
       "hami.io/node-amd-register",
       kJson,
       "",
       "hami.io/amd-devices-to-allocate",
       {},
       "hami.io/amd-devices-allocated",
       "amd.com/use-gputype",
       "amd.com/nouse-gputype",
       "amd.com/use-gpu-uuid",
       "amd.com/nouse-gpu-uuid"},
      {"Vastai",
       {"vastaitech.com/va"},
       "hami.io/node-va-register",
       kJson,
       "hami.io/node-handshake-va",
       "hami.io/Vastai-devices-to-allocate",
       {},
       "hami.io/Vastai-devices-allocated",
       "vastaitech.com/use-va",
       "vastaitech.com/nouse-va",
       "vastaitech.com/use-gpuuuid",
       "vastaitech.com/nouse-gpuuuid"},
      {"Biren",
       {"birentech.com/gpu"},
       "hami.io/node-biren-register",
       kJson,
       "hami.io/node-handshake-biren",
       "hami.io/Biren-devices-to-allocate",
       {},
       "hami.io/Biren-devices-allocated",
       "birentech.com/use-biren",
       "birentech.com/nouse-biren",
       "birentech.com/use-gpuuuid",
       "birentech.com/nouse-gpuuuid"},
  };
  const auto& vendors = BuiltinVendors();
  ASSERT_EQ(vendors.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) ExpectRow(vendors[i], rows[i]);
}

TEST(Vendor, ExtraKeys) {
  auto nvidia = FindVendor("NVIDIA");
  ASSERT_TRUE(nvidia);
  EXPECT_EQ(nvidia->extra_node_keys, std::vector<std::string>{"hami.io/node-nvidia-score"});
  EXPECT_EQ(nvidia->extra_pod_keys, std::vector<std::string>{"hami.io/vgpu-mig-allocations"});
  auto metax = FindVendor("Metax-GPU");
  ASSERT_TRUE(metax);
  EXPECT_EQ(metax->extra_node_keys,
            (std::vector<std::string>{"metax-tech.com/gpu.topology.losses",
                                      "metax-tech.com/gpu.topology.scores"}));
}

// The pending-allocation keys HAMi documents for these backends, verbatim.
TEST(Vendor, SeedToAllocateKeys) {
  EXPECT_EQ(FindVendor("NVIDIA")->to_allocate_key, "hami.io/vgpu-devices-to-allocate");
  EXPECT_EQ(FindVendor("MLU")->to_allocate_key, "hami.io/cambricon-mlu-devices-to-allocate");
  EXPECT_EQ(FindVendor("Mthreads")->to_allocate_key, "hami.io/mthreads-vgpu-devices-to-allocate");
  EXPECT_EQ(FindVendor("DCU")->to_allocate_key, "hami.io/hcu-devices-to-allocate");
}

TEST(Vendor, TemplatedVendors) {
  ExpectRow(IluvatarVendor("BI-V100"),
            {"BI-V100",
             {"iluvatar.ai/BI-V100-vgpu", "iluvatar.ai/BI-V100.vMem", "iluvatar.ai/BI-V100.vCore"},
             "hami.io/node-BI-V100-register",
             kColon,
             "hami.io/node-handshake-BI-V100",
             "hami.io/BI-V100-devices-to-allocate",
             {},
             "hami.io/BI-V100-devices-allocated",
             "",
             "",
             "hami.io/use-BI-V100-uuid",
             "hami.io/no-use-BI-V100-uuid"});
  ExpectRow(
      AscendVendor("Ascend910B3"),
      {"Ascend910B3",
       {"huawei.com/Ascend910B3", "huawei.com/Ascend910B3-memory", "huawei.com/Ascend910B3-core"},
       "hami.io/node-register-Ascend910B3",
       kJson,
       "hami.io/node-handshake-Ascend910B3",
       "hami.io/Ascend910B3-devices-to-allocate",
       {},
       "hami.io/Ascend910B3-devices-allocated",
       "",
       "",
       "hami.io/use-Ascend910B3-uuid",
       "hami.io/no-use-Ascend910B3-uuid"});
}

TEST(Vendor, LookupAndListing) {
  EXPECT_FALSE(FindVendor("nvidia"));  // case-sensitive
  EXPECT_FALSE(FindVendor("BI-V100"));
  auto all = AllVendors({"BI-V100"}, {"Ascend910B3", "Ascend310P"});
  ASSERT_EQ(all.size(), BuiltinVendors().size() + 3);
  auto ascend = FindVendor("Ascend310P", all);
  ASSERT_TRUE(ascend);
  EXPECT_EQ(ascend->register_key, "hami.io/node-register-Ascend310P");
  // Vendor keys and every annotation key a vendor writes are unique across the table.
  std::set<std::string> keys, annotations;
  for (const auto& v : all) {
    EXPECT_TRUE(keys.insert(v.vendor_key).second) << v.vendor_key;
    for (const std::string* k :
         {&v.register_key, &v.handshake_key, &v.to_allocate_key, &v.allocated_key}) {
      if (!k->empty()) {
        EXPECT_TRUE(annotations.insert(*k).second) << *k;
      }
    }
  }
  EXPECT_EQ(RegisterFormatName(RegisterFormat::kLegacyColon), "legacy-colon");
}

}  // namespace
}  // namespace hami::protocol
