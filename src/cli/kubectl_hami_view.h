// kubectl-hami's view model (docs/KUBECTL_HAMI.md): who holds which GPU slice, built from the
// Node and Pod objects of one List each. Pure: no I/O, the clock is a parameter. The annotation
// values are read with the protocol codecs (node register, pod devices, node lock, bind phase) and
// a pod's usage per device is collapsed exactly as the scheduler's usage index does
// (device::CollapsePodDevices), so `inspect` shows what the scheduler counts.
#ifndef HAMI_CLI_KUBECTL_HAMI_VIEW_H_
#define HAMI_CLI_KUBECTL_HAMI_VIEW_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/kubectl_hami_dra.h"
#include "common/clock.h"
#include "common/result.h"

namespace hami::cli {

struct DeviceRow {
  uint64_t index = 0;
  std::string uuid;
  std::string type;    // the register annotation's type, as written ("NVIDIA-Tesla T4")
  std::string vendor;  // vendor key ("NVIDIA")
  bool health = false;
  std::string mode;                                // -o wide
  int64_t numa = 0;                                // -o wide
  int64_t memory_allocated = 0, memory_total = 0;  // MiB
  int64_t cores_allocated = 0, cores_total = 0;    // percent
  int64_t slices_used = 0, slices_total = 0;       // vGPUs held / split count
  std::vector<std::string> pods;                   // "NS/NAME", sorted
  // DRA mode (a GPU of the node's ResourceSlices): the driver, the GPU's device name
  // ("hami-gpu-<minor>") and the allocated shares; slices_total is 0 (no split count) and
  // slices_used the number of shares.
  std::string driver;  // "" for a device-plugin device
  std::string device;
  std::vector<DraShare> shares;
};

struct NodeRow {
  std::string name;
  std::vector<DeviceRow> devices;   // vendor order of the table, then registered order
  std::string handshake;            // the first handshake annotation found; "" when none
  std::optional<std::string> lock;  // hami.io/mutex.lock as written
  std::string lock_holder;          // "NS/POD"; "" for a legacy or unreadable value
  std::optional<int64_t> lock_age_seconds;
};

struct PodDeviceRow {
  std::string uuid;
  std::string vendor;
  int64_t memory = 0;  // MiB
  int64_t cores = 0;   // percent
};

struct PodRow {
  std::string ns, name;
  std::optional<std::string> node;        // spec.nodeName, else hami.io/vgpu-node
  std::optional<std::string> bind_phase;  // hami.io/bind-phase
  std::vector<PodDeviceRow> devices;      // per device UUID (containers collapsed), sorted
  // Pending pods: the last PodScheduled=False message, reason codes in words (ReasonInWords),
  // followed by ReasonSummary when it says something.
  std::optional<std::string> reason;
  std::string phase;                   // status.phase
  std::optional<int64_t> age_seconds;  // from metadata.creationTimestamp
  // DRA mode: the pod's claims (ours, and those not made or listed yet); `devices` then holds
  // their shares per GPU UUID.
  struct Claim {
    std::string name;                  // the pod's spec.resourceClaims[].name
    std::optional<std::string> claim;  // the ResourceClaim; nullopt: not made yet
    bool allocated = false;
    std::vector<DraShare> shares;
  };
  std::vector<Claim> claims;
};

struct InspectView {
  std::vector<NodeRow> nodes;         // sorted by name
  std::vector<std::string> warnings;  // undecodable annotations, skipped
};

struct PodsView {
  std::vector<PodRow> pods;  // sorted by namespace, name
  std::vector<std::string> warnings;
};

// `nodes`, `pods`: the items of a Node and a Pod list (all namespaces). `only`: node names to
// show (empty = every node with a HAMi device); a name with no node is an error naming it.
// `dra`: a node without a HAMi register annotation shows the GPUs of its ResourceSlices of
// hami-dra-plugin's driver and the claims' shares of them (docs/KUBECTL_HAMI.md "DRA mode").
Result<InspectView> BuildInspect(const std::vector<nlohmann::json>& nodes,
                                 const std::vector<nlohmann::json>& pods,
                                 const std::vector<std::string>& only, SystemTime now,
                                 const DraObjects& dra = {});

// Pods that request a known vendor resource or carry hami.io/vgpu-node (`nodes` tells which
// Iluvatar/Ascend chip names exist), and DRA mode's pods (IsDraPod) with their claims.
PodsView BuildPods(const std::vector<nlohmann::json>& nodes,
                   const std::vector<nlohmann::json>& pods, SystemTime now,
                   const DraObjects& dra = {});

// One container's share of one device, as the pod's allocation annotation records it.
struct ContainerAllocation {
  std::string node;  // spec.nodeName, else hami.io/vgpu-node
  std::string ns, pod, container;
  std::string uuid, vendor;
  int64_t memory = 0;  // MiB
  int64_t cores = 0;   // percent
  // DRA mode: one share of the pod's claim `claim` (its name; the pod's namespace). `container`
  // is then "", as the monitor labels a claim's region (shared by the containers using it), and
  // `containers` names the pod's containers that use the claim; `node` is the share's.
  std::string claim;
  std::vector<std::string> containers;
};

// Every holding pod's (allocation annotation, not Succeeded or Failed) devices per container,
// all vendors, in pod list order then container order (init first), then the shares of DRA
// pods' claims; `nodes` tells which Iluvatar/Ascend chip names exist. Undecodable annotations
// are skipped with a warning.
std::vector<ContainerAllocation> ContainerAllocations(const std::vector<nlohmann::json>& nodes,
                                                      const std::vector<nlohmann::json>& pods,
                                                      std::vector<std::string>* warnings,
                                                      const DraObjects& dra = {});

// The -o json shapes (docs/KUBECTL_HAMI.md), one line plus '\n'.
std::string InspectJson(const InspectView& view);
std::string PodsJson(const PodsView& view);

struct TableOptions {
  bool wide = false;
  bool no_headers = false;
  bool colour = false;  // ANSI colours (the caller decides: a terminal and no NO_COLOR)
};

// A column table: every cell padded to its column's width, three spaces apart, no trailing
// blanks, each line indented by `indent` spaces. `colour(row, col)` may name an ANSI code for a
// cell: it wraps the cell's text (widths count the text only).
std::string RenderTable(const std::vector<std::vector<std::string>>& rows, size_t indent = 0,
                        const std::function<const char*(size_t row, size_t col)>& colour = {});
// kubectl-style aligned tables (columns separated by three spaces at least).
std::string InspectTable(const InspectView& view, const TableOptions& options);
std::string PodsTable(const PodsView& view, const TableOptions& options);

// What the devices counted under one of HAMi's reason names have in common ("lack memory" for
// CardInsufficientMemory); nullopt for a name that is not a reason code.
std::optional<std::string_view> ReasonPhrase(std::string_view name);

// A scheduling failure message with HAMi's reason codes spelled out: "1 2/2
// CardInsufficientMemory" (nodes, then rejected/considered devices) becomes "1 node(s) where 2 of
// 2 GPUs lack memory"; a bare "1/3 CardTypeMismatch" becomes "1 of 3 GPUs are not of the
// requested type". Unknown names and all other text stay as written.
std::string ReasonInWords(const std::string& message);

// One sentence over the reason codes of a scheduling failure: "No GPU has enough memory for the
// request." when every entry rejected all the GPUs it considered for CardInsufficientMemory; ""
// otherwise (and when the message has no reason code).
std::string ReasonSummary(const std::string& message);

// kubectl's short age: "45s", "12m", "5h", "3d", "2y"; "<unknown>" for nullopt.
std::string ShortAge(std::optional<int64_t> seconds);

}  // namespace hami::cli

#endif  // HAMI_CLI_KUBECTL_HAMI_VIEW_H_
