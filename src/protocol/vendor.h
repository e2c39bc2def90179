// The vendor registry: for every device backend HAMi schedules, its vendor key, default resource
// names and the annotation keys it uses on nodes and pods
// (docs/protocol.md#resource-names-and-vendor-keys; where HAMi versions differ, ours: Hygon writes
// hami.io/hcu-devices-to-allocate). Resource names are the defaults (the device config file may
// rename them). Where HAMi's docs abbreviate a key ("nouse-gpuuuid", "…-allocated") the full key
// follows the pattern of the key it abbreviates (e.g. mthreads.ai/use-gpuuuid ->
// mthreads.ai/nouse-gpuuuid).
#ifndef HAMI_PROTOCOL_VENDOR_H_
#define HAMI_PROTOCOL_VENDOR_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hami::protocol {

// How a vendor's devices are announced on the Node.
enum class RegisterFormat {
  kJson,            // JSON array (node_register.h), e.g. hami.io/node-nvidia-register
  kLegacyColon,     // "id,count,mem,core,type,numa,health[,index,mode]:" entries
  kCapacity,        // no annotation: devices come from node capacity/allocatable
  kVendorSpecific,  // the vendor's own annotation format (Metax sGPU, Enflame DRS)
};

std::string_view RegisterFormatName(RegisterFormat format);  // "json", "legacy-colon", ...

// NVIDIA's keys as constants, for the code that serves NVIDIA alone (its device plugin); the
// NVIDIA entry of the table below is built from them.
inline constexpr std::string_view kNvidiaVendorKey = "NVIDIA";
inline constexpr std::string_view kNvidiaCountResource = "nvidia.com/gpu";
// The CDI device kind the NVIDIA container toolkit names GPUs and MIG devices with
// ("<kind>=<UUID>").
inline constexpr std::string_view kNvidiaCdiKind = "nvidia.com/gpu";
inline constexpr std::string_view kNvidiaMemoryResource = "nvidia.com/gpumem";
inline constexpr std::string_view kNvidiaMemoryPercentageResource = "nvidia.com/gpumem-percentage";
inline constexpr std::string_view kNvidiaCoreResource = "nvidia.com/gpucores";
inline constexpr std::string_view kNvidiaPriorityResource = "nvidia.com/priority";
inline constexpr std::string_view kNvidiaRegisterKey = "hami.io/node-nvidia-register";
inline constexpr std::string_view kNvidiaHandshakeKey = "hami.io/node-handshake";
inline constexpr std::string_view kNvidiaToAllocateKey = "hami.io/vgpu-devices-to-allocate";
inline constexpr std::string_view kNvidiaAllocatedKey = "hami.io/vgpu-devices-allocated";

struct VendorInfo {
  std::string vendor_key{};   // the device type keyword in pod device strings, e.g. "NVIDIA"
  std::string description{};  // e.g. "Hygon DCU/HCU"
  // Default resource names; "" when the vendor has no such resource.
  std::string count_resource{};
  std::string memory_resource{};
  std::string memory_percentage_resource{};
  std::string core_resource{};
  std::string priority_resource{};
  // Node side. register_key is "" for kCapacity.
  std::string register_key{};
  RegisterFormat register_format = RegisterFormat::kCapacity;
  std::vector<std::string> extra_node_keys{};  // e.g. hami.io/node-nvidia-score
  std::string handshake_key{};                 // "" when the vendor runs no handshake
  // Pod side. to_allocate_key is what the scheduler writes ("" when none); readers also accept
  // to_allocate_read_keys (older names), in that order after to_allocate_key.
  std::string to_allocate_key{};
  std::vector<std::string> to_allocate_read_keys{};
  std::string allocated_key{};
  std::vector<std::string> extra_pod_keys{};  // e.g. hami.io/vgpu-mig-allocations
  // Pod annotations selecting devices by type / UUID; "" when the vendor has none.
  std::string use_type_key{};
  std::string nouse_type_key{};
  std::string use_uuid_key{};
  std::string nouse_uuid_key{};

  // The non-empty resource names, count first.
  std::vector<std::string> ResourceNames() const;
};

// The vendors with fixed keys, in the spec's table order: NVIDIA, MLU, DCU, Metax-GPU,
// Metax-SGPU, Mthreads, GCU, Enflame, kunlun, XPU, AWSNeuron, AMD, Vastai, Biren.
const std::vector<VendorInfo>& BuiltinVendors();

// Iluvatar and Ascend build their keys from a chip "common word" (e.g. "BI-V100",
// "Ascend910B3"); the vendor key is that word.
VendorInfo IluvatarVendor(std::string_view common_word);
VendorInfo AscendVendor(std::string_view common_word);

// BuiltinVendors() followed by one Iluvatar and one Ascend entry per common word given.
std::vector<VendorInfo> AllVendors(const std::vector<std::string>& iluvatar_common_words,
                                   const std::vector<std::string>& ascend_common_words);

// Looks `vendor_key` up (exact, case-sensitive) among `vendors`; BuiltinVendors() by default.
std::optional<VendorInfo> FindVendor(std::string_view vendor_key);
std::optional<VendorInfo> FindVendor(std::string_view vendor_key,
                                     const std::vector<VendorInfo>& vendors);

}  // namespace hami::protocol

#endif  // HAMI_PROTOCOL_VENDOR_H_
