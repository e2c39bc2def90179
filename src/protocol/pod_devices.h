// Pod device annotations (docs/protocol.md#device-lists-on-pods): what the scheduler allocated to
// each container of a pod, for one vendor, e.g. `hami.io/vgpu-devices-allocated` and
// `hami.io/vgpu-devices-to-allocate`:
//   GPU-a,NVIDIA,3000,30:GPU-b,NVIDIA,3000,30:;;GPU-c,NVIDIA,1000,0:;
// Each device is `UUID,Type,UsedMemMiB,UsedCores` followed by ':'; each container's devices are
// followed by ';'. Containers are positional: init containers first, then regular containers.
// All functions here are pure and total.
#ifndef HAMI_PROTOCOL_POD_DEVICES_H_
#define HAMI_PROTOCOL_POD_DEVICES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace hami::protocol {

struct ContainerDevice {
  std::string uuid{};     // physical device UUID (MIG: the GPU's; v2.8 appended "[t-s]")
  std::string type{};     // the vendor key, e.g. "NVIDIA" (not the model name)
  int32_t usedmem = 0;    // MiB
  int32_t usedcores = 0;  // percent
  bool operator==(const ContainerDevice&) const = default;
};

using ContainerDevices = std::vector<ContainerDevice>;
// One entry per container, init containers first, then regular containers.
using PodDevices = std::vector<ContainerDevices>;

// `UUID,Type,mem,cores:` per device; "" for no devices. Precondition for a value that decodes
// back: no uuid or type contains ',', ':' or ';'.
std::string EncodeContainerDevices(const ContainerDevices& devices);

// Each container's encoding followed by ';'. An empty PodDevices encodes as "".
std::string EncodePodDevices(const PodDevices& pod);

// Splits on ':'; parts without ',' (the empty tail after the last ':' included) are skipped. A
// part with fewer than 4 comma fields is an error; fields past the 4th are ignored; fields 3 and
// 4 must be non-negative int32 (Go strconv.ParseInt: an optional sign, digits).
Result<ContainerDevices> DecodeContainerDevices(std::string_view value);

// Splits on ';' keeping every segment, so the trailing ';' yields one more, empty container:
// "A:;" -> [[A], []], "" -> [[]], ";;" -> [[], [], []]. Errors name the container, the device
// and the field, e.g. `container 0 device 0 "u,t,x,0": field "usedmem": want an int32, got "x"`.
Result<PodDevices> DecodePodDevices(std::string_view value);

// Whether a (remaining) to-allocate value still holds a device whose Type contains `vendor`
// (e.g. "NVIDIA"). The device plugin marks the pod's allocation done when this turns false.
// Tolerates malformed parts (they hold no device).
bool HasVendorDevice(std::string_view value, std::string_view vendor);

// Index of the first container that has at least one device; nullopt when there is none. The
// device plugin serves the containers' Allocate calls in this order.
std::optional<size_t> FirstNonEmptyContainer(const PodDevices& pod);

// The same on the raw annotation value: the index of the first ';'-segment holding a device
// part (one with a ','), or nullopt.
std::optional<size_t> FirstNonEmptyContainer(std::string_view value);

}  // namespace hami::protocol

#endif  // HAMI_PROTOCOL_POD_DEVICES_H_
