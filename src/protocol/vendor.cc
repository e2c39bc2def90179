#include "protocol/vendor.h"

namespace hami::protocol {
namespace {

// Designated initializers below must follow VendorInfo's member order.

VendorInfo Nvidia() {
  return VendorInfo{
      .vendor_key = std::string(kNvidiaVendorKey),
      .description = "NVIDIA GPU",
      .count_resource = std::string(kNvidiaCountResource),
      .memory_resource = std::string(kNvidiaMemoryResource),
      .memory_percentage_resource = std::string(kNvidiaMemoryPercentageResource),
      .core_resource = std::string(kNvidiaCoreResource),
      .priority_resource = std::string(kNvidiaPriorityResource),
      .register_key = std::string(kNvidiaRegisterKey),
      .register_format = RegisterFormat::kJson,
      .extra_node_keys = {"hami.io/node-nvidia-score"},
      .handshake_key = std::string(kNvidiaHandshakeKey),
      .to_allocate_key = std::string(kNvidiaToAllocateKey),
      .allocated_key = std::string(kNvidiaAllocatedKey),
      .extra_pod_keys = {"hami.io/vgpu-mig-allocations"},
      .use_type_key = "nvidia.com/use-gputype",
      .nouse_type_key = "nvidia.com/nouse-gputype",
      .use_uuid_key = "nvidia.com/use-gpuuuid",
      .nouse_uuid_key = "nvidia.com/nouse-gpuuuid",
  };
}

VendorInfo Cambricon() {
  return VendorInfo{
      .vendor_key = "MLU",
      .description = "Cambricon MLU",
      .count_resource = "cambricon.com/vmlu",
      .memory_resource = "cambricon.com/mlu.smlu.vmemory",
      .core_resource = "cambricon.com/mlu.smlu.vcore",
      .register_format = RegisterFormat::kCapacity,
      .to_allocate_key = "hami.io/cambricon-mlu-devices-to-allocate",
      .allocated_key = "hami.io/cambricon-mlu-devices-allocated",
      .use_type_key = "cambricon.com/use-mlutype",
      .nouse_type_key = "cambricon.com/nouse-mlutype",
      .use_uuid_key = "cambricon.com/use-gpuuuid",
      .nouse_uuid_key = "cambricon.com/nouse-gpuuuid",
  };
}

VendorInfo Hygon() {
  return VendorInfo{
      .vendor_key = "DCU",
      .description = "Hygon DCU/HCU",
      .count_resource = "hygon.com/dcunum",
      .memory_resource = "hygon.com/dcumem",
      .core_resource = "hygon.com/dcucores",
      .register_key = "hami.io/node-dcu-register",
      .register_format = RegisterFormat::kLegacyColon,
      .handshake_key = "hami.io/node-handshake-dcu",
      // The seed's key; older releases wrote the dcu name, which readers still accept.
      .to_allocate_key = "hami.io/hcu-devices-to-allocate",
      .to_allocate_read_keys = {"hami.io/dcu-devices-to-allocate"},
      .allocated_key = "hami.io/dcu-devices-allocated",
      .use_type_key = "hygon.com/use-dcutype",
      .nouse_type_key = "hygon.com/nouse-dcutype",
      .use_uuid_key = "hygon.com/use-gpuuuid",
      .nouse_uuid_key = "hygon.com/nouse-gpuuuid",
  };
}

VendorInfo MetaxGpu() {
  return VendorInfo{
      .vendor_key = "Metax-GPU",
      .description = "MetaX GPU (whole devices)",
      .count_resource = "metax-tech.com/gpu",
      .register_format = RegisterFormat::kCapacity,
      .extra_node_keys = {"metax-tech.com/gpu.topology.losses",
                          "metax-tech.com/gpu.topology.scores"},
      .to_allocate_key = "hami.io/metax-gpu-devices-to-allocate",
      .allocated_key = "hami.io/metax-gpu-devices-allocated",
  };
}

VendorInfo MetaxSgpu() {
  return VendorInfo{
      .vendor_key = "Metax-SGPU",
      .description = "MetaX shared GPU",
      .count_resource = "metax-tech.com/sgpu",
      .memory_resource = "metax-tech.com/vmemory",
      .core_resource = "metax-tech.com/vcore",
      .register_key = "metax-tech.com/node-gpu-devices",
      .register_format = RegisterFormat::kVendorSpecific,
      .to_allocate_key = "hami.io/metax-sgpu-devices-to-allocate",
      .allocated_key = "hami.io/metax-sgpu-devices-allocated",
      // The MetaX plugin's allocation list and the scheduler's timestamp (HAMi v2.10 sdevice.go),
      // then the pod's QoS, app-class and topology-aware choices.
      .extra_pod_keys = {"metax-tech.com/gpu-devices-allocated", "metax-tech.com/predicate-time",
                         "metax-tech.com/sgpu-qos-policy", "metax-tech.com/sgpu-app-class",
                         "metax-tech.com/sgpu-topology-aware"},
      .use_uuid_key = "metax-tech.com/use-gpuuuid",
      .nouse_uuid_key = "metax-tech.com/nouse-gpuuuid",
  };
}

VendorInfo Mthreads() {
  return VendorInfo{
      .vendor_key = "Mthreads",
      .description = "Moore Threads GPU",
      .count_resource = "mthreads.com/vgpu",
      .memory_resource = "mthreads.com/sgpu-memory",
      .core_resource = "mthreads.com/sgpu-core",
      .register_format = RegisterFormat::kCapacity,
      .to_allocate_key = "hami.io/mthreads-vgpu-devices-to-allocate",
      .allocated_key = "hami.io/mthreads-vgpu-devices-allocated",
      .use_uuid_key = "mthreads.ai/use-gpuuuid",
      .nouse_uuid_key = "mthreads.ai/nouse-gpuuuid",
  };
}

VendorInfo EnflameGcu() {
  return VendorInfo{
      .vendor_key = "GCU",
      .description = "Enflame GCU (whole devices)",
      .count_resource = "enflame.com/gcu",
      .register_format = RegisterFormat::kCapacity,
      .to_allocate_key = "hami.io/enflame-gcu-devices-to-allocate",
      .allocated_key = "hami.io/enflame-gcu-devices-allocated",
      .use_uuid_key = "enflame.com/use-gpuuuid",
      .nouse_uuid_key = "enflame.com/nouse-gpuuuid",
  };
}

VendorInfo EnflameDrs() {
  return VendorInfo{
      .vendor_key = "Enflame",
      .description = "Enflame GCU DRS slices",
      .count_resource = "enflame.com/drs-gcu",
      .memory_resource = "enflame.com/gcu-memory",
      .core_resource = "enflame.com/gcu-core",
      .register_key = "enflame.com/gcu-drs-capacity",
      .register_format = RegisterFormat::kVendorSpecific,
      .allocated_key = "hami.io/enflame-vgpu-devices-allocated",
      // Pod: what Enflame's DRS plugin reads (slice size, device, minor, assignment state and
      // time, per-container profiles as JSON).
      .extra_pod_keys = {"enflame.com/gcu-request-size", "enflame.com/gcu-assigned-id",
                         "enflame.com/gcu-assigned", "enflame.com/gcu-assigned-index",
                         "enflame.com/gcu-assigned-minor", "enflame.com/gcu-assigned-time",
                         "assigned-containers"},
      .use_uuid_key = "enflame.com/use-gpuuuid",
      .nouse_uuid_key = "enflame.com/nouse-gpuuuid",
  };
}

VendorInfo Kunlun() {
  return VendorInfo{
      .vendor_key = "kunlun",
      .description = "Kunlunxin XPU (whole devices)",
      .count_resource = "kunlunxin.com/xpu",
      .register_format = RegisterFormat::kCapacity,
      .allocated_key = "hami.io/kunlun-allocated",
      // Pod: the chosen device indexes Kunlunxin's plugin reads ("0,4").
      .extra_pod_keys = {"BAIDU_COM_DEVICE_IDX"},
      .use_uuid_key = "baidu.com/use-gpuuuid",
      .nouse_uuid_key = "baidu.com/nouse-gpuuuid",
  };
}

VendorInfo KunlunXpu() {
  return VendorInfo{
      .vendor_key = "XPU",
      .description = "Kunlunxin virtual XPU",
      .count_resource = "kunlunxin.com/vxpu",
      .memory_resource = "kunlunxin.com/vxpu-memory",
      .register_key = "hami.io/node-register-xpu",
      .register_format = RegisterFormat::kJson,
      .handshake_key = "hami.io/node-handshake-xpu",
      .to_allocate_key = "hami.io/xpu-devices-to-allocate",
      .allocated_key = "hami.io/xpu-devices-allocated",
      .use_uuid_key = "hami.io/use-xpu-uuid",
      .nouse_uuid_key = "hami.io/no-use-xpu-uuid",
  };
}

VendorInfo AwsNeuron() {
  return VendorInfo{
      .vendor_key = "AWSNeuron",
      .description = "AWS Neuron",
      .count_resource = "aws.amazon.com/neuron",
      .core_resource = "aws.amazon.com/neuroncore",
      .register_format = RegisterFormat::kCapacity,
      .allocated_key = "hami.io/aws-neuron-devices-allocated",
      // Pod: what Neuron's plugin reads (device or core indexes, node, time, flag, core mode).
      .extra_pod_keys = {"AWS_NEURON_IDS", "aws.amazon.com/predicate-node", "NEURON_ALLOC_TIME",
                         "NEURON_RESOURCE_TYPE", "NEURON_ALLOCATED"},
      .use_uuid_key = "aws.amazon.com/use-neuron-uuid",
      .nouse_uuid_key = "aws.amazon.com/nouse-neuron-uuid",
  };
}

VendorInfo Amd() {
  return VendorInfo{
      .vendor_key = "AMD",
      .description = "AMD GPU",
      .count_resource = "amd.com/gpu",
      .memory_resource = "amd.com/gpumem",
      .core_resource = "amd.com/gpucores",
      .register_key = "hami.io/node-amd-register",
      .register_format = RegisterFormat::kJson,
      .to_allocate_key = "hami.io/amd-devices-to-allocate",
      .allocated_key = "hami.io/amd-devices-allocated",
      .use_type_key = "amd.com/use-gputype",
      .nouse_type_key = "amd.com/nouse-gputype",
      .use_uuid_key = "amd.com/use-gpu-uuid",
      .nouse_uuid_key = "amd.com/nouse-gpu-uuid",
  };
}

// Vastai and Biren build pod keys from the vendor key, so its capitalisation shows.
VendorInfo Vastai() {
  return VendorInfo{
      .vendor_key = "Vastai",
      .description = "Vastai Technologies",
      .count_resource = "vastaitech.com/va",
      .register_key = "hami.io/node-va-register",
      .register_format = RegisterFormat::kJson,
      .handshake_key = "hami.io/node-handshake-va",
      .to_allocate_key = "hami.io/Vastai-devices-to-allocate",
      .allocated_key = "hami.io/Vastai-devices-allocated",
      .use_type_key = "vastaitech.com/use-va",
      .nouse_type_key = "vastaitech.com/nouse-va",
      .use_uuid_key = "vastaitech.com/use-gpuuuid",
      .nouse_uuid_key = "vastaitech.com/nouse-gpuuuid",
  };
}

VendorInfo Biren() {
  return VendorInfo{
      .vendor_key = "Biren",
      .description = "Biren GPU",
      .count_resource = "birentech.com/gpu",
      .register_key = "hami.io/node-biren-register",
      .register_format = RegisterFormat::kJson,
      .handshake_key = "hami.io/node-handshake-biren",
      .to_allocate_key = "hami.io/Biren-devices-to-allocate",
      .allocated_key = "hami.io/Biren-devices-allocated",
      .use_type_key = "birentech.com/use-biren",
      .nouse_type_key = "birentech.com/nouse-biren",
      .use_uuid_key = "birentech.com/use-gpuuuid",
      .nouse_uuid_key = "birentech.com/nouse-gpuuuid",
  };
}

}  // namespace

std::string_view RegisterFormatName(RegisterFormat format) {
  switch (format) {
    case RegisterFormat::kJson:
      return "json";
    case RegisterFormat::kLegacyColon:
      return "legacy-colon";
    case RegisterFormat::kCapacity:
      return "capacity";
    case RegisterFormat::kVendorSpecific:
      return "vendor-specific";
  }
  return "capacity";
}

std::vector<std::string> VendorInfo::ResourceNames() const {
  std::vector<std::string> out;
  for (const std::string* name : {&count_resource, &memory_resource, &memory_percentage_resource,
                                  &core_resource, &priority_resource}) {
    if (!name->empty()) out.push_back(*name);
  }
  return out;
}

const std::vector<VendorInfo>& BuiltinVendors() {
  static const std::vector<VendorInfo>* const vendors = new std::vector<VendorInfo>{
      Nvidia(),     Cambricon(), Hygon(),     MetaxGpu(),  MetaxSgpu(), Mthreads(), EnflameGcu(),
      EnflameDrs(), Kunlun(),    KunlunXpu(), AwsNeuron(), Amd(),       Vastai(),   Biren()};
  return *vendors;
}

VendorInfo IluvatarVendor(std::string_view common_word) {
  std::string cw(common_word);
  return VendorInfo{
      .vendor_key = cw,
      .description = "Iluvatar " + cw,
      .count_resource = "iluvatar.ai/" + cw + "-vgpu",
      .memory_resource = "iluvatar.ai/" + cw + ".vMem",
      .core_resource = "iluvatar.ai/" + cw + ".vCore",
      .register_key = "hami.io/node-" + cw + "-register",
      .register_format = RegisterFormat::kLegacyColon,
      .handshake_key = "hami.io/node-handshake-" + cw,
      .to_allocate_key = "hami.io/" + cw + "-devices-to-allocate",
      .allocated_key = "hami.io/" + cw + "-devices-allocated",
      .use_uuid_key = "hami.io/use-" + cw + "-uuid",
      .nouse_uuid_key = "hami.io/no-use-" + cw + "-uuid",
  };
}

VendorInfo AscendVendor(std::string_view common_word) {
  std::string cw(common_word);
  return VendorInfo{
      .vendor_key = cw,
      .description = "Huawei " + cw,
      .count_resource = "huawei.com/" + cw,
      .memory_resource = "huawei.com/" + cw + "-memory",
      .core_resource = "huawei.com/" + cw + "-core",
      .register_key = "hami.io/node-register-" + cw,
      .register_format = RegisterFormat::kJson,
      // Node: "true"/"false", whether the node takes soft-split (hami-core) vNPU pods.
      .extra_node_keys = {"hami-vnpu-core"},
      .handshake_key = "hami.io/node-handshake-" + cw,
      .to_allocate_key = "hami.io/" + cw + "-devices-to-allocate",
      .allocated_key = "hami.io/" + cw + "-devices-allocated",
      // Pod: the runtime list the Ascend plugin reads, then the split-mode choice.
      .extra_pod_keys = {"huawei.com/" + cw, "huawei.com/vnpu-mode"},
      .use_uuid_key = "hami.io/use-" + cw + "-uuid",
      .nouse_uuid_key = "hami.io/no-use-" + cw + "-uuid",
  };
}

std::vector<VendorInfo> AllVendors(const std::vector<std::string>& iluvatar_common_words,
                                   const std::vector<std::string>& ascend_common_words) {
  std::vector<VendorInfo> out = BuiltinVendors();
  for (const auto& cw : iluvatar_common_words) out.push_back(IluvatarVendor(cw));
  for (const auto& cw : ascend_common_words) out.push_back(AscendVendor(cw));
  return out;
}

std::optional<VendorInfo> FindVendor(std::string_view vendor_key) {
  return FindVendor(vendor_key, BuiltinVendors());
}

std::optional<VendorInfo> FindVendor(std::string_view vendor_key,
                                     const std::vector<VendorInfo>& vendors) {
  for (const auto& v : vendors) {
    if (v.vendor_key == vendor_key) return v;
  }
  return std::nullopt;
}

}  // namespace hami::protocol
