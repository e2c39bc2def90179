// The Device API (docs/ARCHITECTURE.md#decisions, 5): one interface per vendor backend. A backend
// knows its resource names and annotation keys (protocol::VendorInfo, with the configured resource
// names), reads its devices from a node's annotations, normalises a container's request and fits a
// request onto a node's devices. Backends are registered by vendor key in a Registry; the
// scheduler, the simulator and the device plugin loop over Registry::All().
//
// Everything here is pure: no I/O, no clock (a time is an input), deterministic for equal inputs.
#ifndef HAMI_DEVICE_DEVICE_H_
#define HAMI_DEVICE_DEVICE_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "device/config.h"
#include "device/pod_view.h"
#include "device/policy.h"
#include "device/quota.h"
#include "device/search_budget.h"
#include "device/usage.h"
#include "protocol/node_register.h"
#include "protocol/pair_score.h"
#include "protocol/pod_devices.h"
#include "protocol/reason.h"
#include "protocol/vendor.h"

namespace YAML {
class Node;
}  // namespace YAML

namespace hami::device {

// What Fit may look at besides the candidates and the request.
struct FitContext {
  const PodView* pod = nullptr;     // annotations: type/uuid selection, numa-bind, vgpu-mode
  const NodeUsage* node = nullptr;  // cordoned devices, pair scores
  GpuPolicy policy{};               // mutex / topology-aware filters
  // Quota of the pod's namespace; nullptr = no quota check.
  const NamespaceQuota* quota = nullptr;
  // This vendor's devices already chosen for the pod's earlier containers (positional, init
  // containers first, `init_count` of them); the container being fitted comes next. Used for the
  // hypothetical collapsed pod total in the quota check. nullptr = none.
  const protocol::PodDevices* earlier = nullptr;
  size_t init_count = 0;
  // What a search over device combinations may still spend in this Schedule call (NVIDIA's
  // topology-aware pick); nullptr = only the per-node cap (search_budget.h).
  SearchBudget* search_budget = nullptr;
};

struct FitResult {
  bool fit = false;
  protocol::ContainerDevices devices{};  // chosen devices, in pick order (on success)
  protocol::ReasonCounts reasons{};      // rejections by reason name
  int devices_considered = 0;            // the reason denominator: candidates given to Fit
  // "1/3 CardInsufficientMemory, 2/3 CardTypeMismatch" (protocol::EncodeReason).
  std::string Reason() const;
};

// A Node as the backends read it (HAMi GetNodeDevices gets the whole corev1.Node): several
// vendors register through status.capacity / status.allocatable instead of an annotation.
struct NodeView {
  std::string name{};
  StringMap annotations{};
  StringMap labels{};
  StringMap capacity{};     // status.capacity: resource -> quantity text ("8", "64Gi")
  StringMap allocatable{};  // status.allocatable
  bool operator==(const NodeView&) const = default;
};

// Reads metadata.name/annotations/labels and status.capacity/allocatable of a core/v1 Node;
// tolerant like ObjectAnnotations (non-string values are skipped, integers rendered as text).
NodeView NodeViewFromNode(const nlohmann::json& node);

// The edits a backend's admission mutation may make to the pod under review (the webhook turns
// them into a minimal JSON Patch). Paths are object keys relative to the container being mutated
// (Set/Append) or to the pod (SetPod); missing parent objects are created. The views show the
// pod as mutated so far (earlier backends' and containers' edits included).
class AdmissionEdit {
 public:
  virtual ~AdmissionEdit() = default;
  virtual const nlohmann::json& Pod() const = 0;
  virtual const nlohmann::json& Container() const = 0;
  virtual bool IsInitContainer() const = 0;
  // container[path...] = value, e.g. Set({"resources", "limits", "nvidia.com/gpucores"}, "100").
  virtual void Set(const std::vector<std::string>& path, const nlohmann::json& value) = 0;
  // Appends to the list container[path...], creating it, e.g. Append({"env"}, {{"name", ...}}).
  virtual void Append(const std::vector<std::string>& path, const nlohmann::json& value) = 0;
  // pod[path...] = value, e.g. SetPod({"spec", "runtimeClassName"}, "nvidia"),
  // SetPod({"metadata", "annotations", "hami.io/..."}, "...").
  virtual void SetPod(const std::vector<std::string>& path, const nlohmann::json& value) = 0;
};

// What Device::ScoreNode reads (HAMi ScoreNode's node, podDevices, previous and policy).
struct ScoreContext {
  // The node's row before the pod (HAMi's `previous`): its devices of every vendor with their
  // usage and custom_info. A node annotation a score needs is carried on the vendor's rows'
  // custom_info by its NodeDevices (the row is all the scheduler keeps of a node).
  const NodeUsage* node = nullptr;
  // This backend's picks, one entry per container of the pod (init first; empty entries for
  // containers that took none of its devices). Never null; all entries empty when the backend is
  // scored only because the node has its devices.
  const protocol::PodDevices* picks = nullptr;
  NodePolicy policy = NodePolicy::kBinpack;
  const PodView* pod = nullptr;  // the pod under decision; may be null
};

// What Device::AllocationAnnotations reads besides the picks.
struct AllocationContext {
  const PodView* pod = nullptr;  // the pod under decision; null reads as a pod with nothing set
  std::string_view node{};       // the chosen node's name; "" when unknown
  // The chosen node's devices with the pod counted (NodeFit::usage_after): their custom_info as
  // registered, e.g. Enflame's DRS profiles and minors. Null when unknown (keys that need it are
  // left out or derived from the device ids).
  const std::vector<DeviceUsage>* devices = nullptr;
  // The decision's time from the scheduler's clock; nullopt when unknown (keys carrying a time
  // are then left out). Never read from a real clock here.
  std::optional<SystemTime> now{};
};

// The handshake verdict for one backend on one node (HAMi CheckHealth's (healthy, needUpdate)).
struct Health {
  bool healthy = true;
  bool need_update = true;
  bool operator==(const Health&) const = default;
};

// What a simulated node publishes for a list of this vendor's devices (hami-sim's generic
// vendor plugin): annotations to merge into metadata.annotations, and status.capacity /
// status.allocatable entries (the same map is written to both).
struct NodeRegistration {
  StringMap annotations{};
  StringMap capacity{};
  bool operator==(const NodeRegistration&) const = default;
};

// Which node lock a bind of a pod asking for a backend's devices takes (Device::BindLockKind).
enum class BindLock {
  kNone,      // none: the vendor's plugin needs none (HAMi: MetaX GPU, Moore Threads, Enflame, ...)
  kNodeLock,  // HAMi's node lock, hami.io/mutex.lock
  kVendor,    // the vendor's own node annotation (Cambricon's cambricon.com/dsmlu.lock)
};

class Device {
 public:
  virtual ~Device() = default;

  // Vendor key, resource names (as configured) and annotation keys.
  virtual const protocol::VendorInfo& Info() const = 0;
  const std::string& VendorKey() const { return Info().vendor_key; }

  // gpumem requests and quota memory limits are multiplied by this (>= 1).
  virtual int32_t MemoryFactor() const { return 1; }

  // --- the node side ---

  // This vendor's devices on a node, as usage rows with zero usage and `vendor` = VendorKey(),
  // from the node's register annotation or its capacity (HAMi GetNodeDevices). No registration =
  // no devices (not an error); an undecodable one is an error naming the key and quoting the
  // value's fault.
  virtual Result<std::vector<DeviceUsage>> NodeDevices(const NodeView& node) const = 0;

  // HAMi CheckHealth: the scheduler's registrar runs the generic handshake
  // (protocol::CheckHandshake on Info().handshake_key; no key = {true, true}) and passes its
  // verdict here; a backend with more rules refines it. Default: the handshake's verdict.
  // A backend may remember per node what it saw in earlier calls (thread-safe; HAMi's NVIDIA
  // backend does) until ForgetNode.
  virtual Health CheckHealth(const NodeView& /*node*/, Health handshake) const { return handshake; }

  // The node left the cluster: CheckHealth forgets what it remembered of it. Default: nothing.
  virtual void ForgetNode(std::string_view /*node*/) const {}

  // Scores between pairs of this vendor's devices on `node`, for topology-aware picks (HAMi:
  // NVIDIA's hami.io/node-nvidia-score); NodeUsageFromView appends them to NodeUsage::pair_scores.
  // An undecodable value is an error naming the key. Default: none.
  virtual Result<protocol::PairScores> NodePairScores(const NodeView& /*node*/) const {
    return protocol::PairScores{};
  }

  // HAMi ScoreNode: what this backend adds to the score of a node the pod fits on (binpack
  // prefers the highest total, spread the lowest). Called once per fitting node for every backend
  // the pod took devices from and every backend some device on the node has as its type (HAMi
  // scores the node's device types too, with empty picks). Default 0 (NVIDIA, Hygon, ...).
  virtual double ScoreNode(const ScoreContext& /*context*/) const { return 0; }
  // True for a backend that overrides ScoreNode. The filter asks only these (Registry::
  // FindScoring): a backend answering false must score every node 0, which
  // `Registry.EveryBackendThatScoresNoNodeScoresZero` checks for every vendor.
  virtual bool ScoresNodes() const { return false; }

  // --- the webhook ---

  // HAMi MutateAdmission for one container: normalises the container's request through `edit`
  // (e.g. adds the default count, env, runtimeClassName) and says whether the container asks for
  // this vendor's devices. An error (-> admission code 500) names the resource and quotes the
  // value. Default: no edit; true when the count resource is in limits or requests.
  virtual Result<bool> MutateAdmission(AdmissionEdit& edit) const;

  // --- the scheduler ---

  // One container's request (limits first, then requests, per resource). nums == 0 when the
  // container asks for none of this vendor's devices. A bad quantity is an error naming the
  // container, the resource and the value (HAMi silently ignores such pods).
  virtual Result<DeviceRequest> NormalizeRequest(const ContainerView& container) const = 0;

  // Picks `request.nums` devices among `candidates` (already sorted by the GPU policy; the
  // preferred device last) or says why not. Does not modify the candidates.
  virtual FitResult Fit(const std::vector<const DeviceUsage*>& candidates,
                        const DeviceRequest& request, const FitContext& context) const = 0;

  // Whether `request` may take several devices of one candidate, so that asking for more
  // devices than there are candidates is not refused before Fit (HAMi isMIGRequest: NVIDIA on a
  // GPU in MIG mode). Default: false.
  virtual bool MayShareOneDevice(const DeviceRequest& /*request*/,
                                 const std::vector<const DeviceUsage*>& /*candidates*/,
                                 const PodView& /*pod*/) const {
    return false;
  }

  // HAMi AddResourceUsage for one pick `chosen` on its device `dev`, when the backend counts it
  // itself (NVIDIA's MIG GPUs reserve an instance, and chosen's memory and cores become the
  // profile's). nullopt: the backend adds nothing special and the scheduler counts one slot,
  // chosen's memory and cores. Default: nullopt.
  struct PickUsage {
    bool added = true;                      // false: nothing fits any more, dev is unchanged
    std::optional<MigInstance> instance{};  // the instance reserved, if any
  };
  virtual std::optional<PickUsage> AddPickUsage(DeviceUsage* /*dev*/,
                                                protocol::ContainerDevice* /*chosen*/) const {
    return std::nullopt;
  }

  // HAMi PatchAnnotations: the pod annotations that carry this vendor's allocation (`devices`
  // has one entry per container, init first), written with the filter's decision. Default:
  // EncodePodDevices under to_allocate_key and allocated_key (each when non-empty).
  virtual StringMap AllocationAnnotations(const AllocationContext& context,
                                          const protocol::PodDevices& devices) const;
  // The same for `pod` with no node and no time (keys that need them are left out).
  StringMap AllocationAnnotations(const PodView& pod, const protocol::PodDevices& devices) const {
    return AllocationAnnotations(AllocationContext{.pod = &pod}, devices);
  }

  // This vendor's allocation as recorded on a pod (what the usage index counts). nullopt when
  // the pod carries none; an undecodable value is an error naming the key. Default: the
  // allocated_key, protocol::DecodePodDevices.
  virtual Result<std::optional<protocol::PodDevices>> PodAllocated(
      const StringMap& pod_annotations) const;

  // HAMi AddResourceUsage, in the usage index's form: how a pod's allocation counts against
  // its devices. Default: CollapsePodDevices (used slots, memory, cores;
  // docs/protocol.md#usage-of-a-pod).
  virtual std::vector<DeviceDelta> UsageDeltas(const protocol::PodDevices& devices,
                                               size_t init_count, bool init_done) const;

  // The tag a pod with `pod_annotations` puts on each of this backend's devices it holds: the
  // usage index counts the pods on a device by tag (DeviceUsage::pod_tags) for the fit and score
  // rules that look at the other pods on a device (HAMi DeviceUsage.PodInfos, reduced to what
  // the vendor reads of them). "" = no tag. Default: "" (the backend reads no other pods).
  virtual std::string UsageTag(const StringMap& /*pod_annotations*/) const { return {}; }

  // --- the bind (HAMi LockNode / ReleaseNodeLock) ---

  // The node lock a bind takes when a regular container of the pod asks for this backend's
  // devices; the vendor's device plugin releases it when its Allocate is done. Default: HAMi's
  // node lock (hami.io/mutex.lock, src/nodelock).
  virtual BindLock BindLockKind() const { return BindLock::kNodeLock; }
  // kVendor only: the node annotation of the vendor's own lock, and the value a bind at `now`
  // writes on `node` (fresh, or over an expired lock), or why the bind must fail in HAMi's
  // words. Default: none (an error).
  virtual std::string_view VendorLockKey() const { return {}; }
  virtual Result<std::string> TakeVendorLock(const NodeView& node, SystemTime now) const;

  // --- the device plugin (hami-sim simulates it; the real NVIDIA plugin uses the same keys) ---

  // What this vendor's HAMi device plugin publishes on its node for `devices`. Default: the
  // register annotation in Info().register_format (JSON or legacy colon) and the count resource
  // as capacity (sum of the devices' split counts). The handshake value is the caller's (clock).
  virtual NodeRegistration EncodeNodeRegistration(
      const std::vector<protocol::DeviceInfo>& devices) const;

  // The devices the scheduler assigned to a pod and not yet handed to a container
  // (to_allocate_key, then the to_allocate_read_keys). nullopt when none is set.
  virtual Result<std::optional<protocol::PodDevices>> PodToAllocate(
      const StringMap& pod_annotations) const;

  // Pod annotations this vendor's plugin writes when its Allocate has served every container of
  // `pod` (besides the common bind-phase success and node-lock release, which hami-sim's
  // generic plugin does for every vendor). Default: none.
  virtual StringMap AllocateAnnotations(const PodView& /*pod*/,
                                        const protocol::PodDevices& /*allocated*/) const {
    return {};
  }
};

// Backends by vendor key. Not thread-safe to modify; const use is safe from any thread.
class Registry {
 public:
  Registry() = default;
  Registry(Registry&&) = default;
  Registry& operator=(Registry&&) = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Adds `device`, replacing a backend with the same vendor key.
  void Register(std::unique_ptr<Device> device);
  // The backend whose vendor key is `vendor_key`, or null. A length no key has, or a first byte,
  // is answered without reading the rest of `vendor_key`'s text: the filter asks for device types
  // of candidates (model names such as "NVIDIA A100-SXM4-80GB", cold heap text at 5,000 nodes).
  const Device* Find(std::string_view vendor_key) const;
  // Find, for backends that score nodes (Device::ScoresNodes) only: null for every other key,
  // most without reading `vendor_key` (the filter's per-device lookup of a node's types).
  const Device* FindScoring(std::string_view vendor_key) const;
  // Every backend, sorted by vendor key (the order HAMi uses for multi-vendor work).
  std::vector<const Device*> All() const;
  // Hands every backend over, leaving the registry empty.
  std::map<std::string, std::unique_ptr<Device>, std::less<>> Release();

 private:
  std::map<std::string, std::unique_ptr<Device>, std::less<>> devices_;
  // What the keys (of all backends; of those that score nodes) look like, to turn most other
  // text away unread: `lengths` bit n, some key is n bytes long (n < 64); `long_keys`, some key
  // is longer; `first` bit c, some key starts with byte c.
  struct KeyFilter {
    uint64_t lengths = 0;
    bool long_keys = false;
    std::array<uint64_t, 4> first{};
    void Add(std::string_view key);
    bool MayHave(std::string_view key) const {
      const size_t n = key.size();
      if (n < 64 ? ((lengths >> n) & 1) == 0 : !long_keys) return false;
      if (n == 0) return true;
      const auto c = static_cast<unsigned char>(key[0]);
      return ((first[c >> 6] >> (c & 63)) & 1) != 0;
    }
  };
  KeyFilter keys_{};
  KeyFilter scoring_keys_{};
};

// --- Self-registration (docs/VENDORS.md) ---
//
// A vendor registers a factory keyed by its device-config.yaml section name ("nvidia", "hygon",
// "cambricon", "iluvatars", "vnpus", ...). The factory parses its own section (the YAML value of
// that top-level key: a map, or a list for `iluvatars`; a null node when the section is empty)
// with the defaults of HAMi's chart, and returns the section's backend(s). Errors name the YAML
// path ("hygon.resourceCountName: want a string, got [1]"). `config` gives the parsed
// configuration around it (e.g. the scheduler policy defaults).
using VendorFactory = std::function<Result<std::vector<std::unique_ptr<Device>>>(
    const YAML::Node& section, const DeviceConfig& config)>;

// Records `factory` for `section`; a second registration of the same section is ignored and
// returns false. Called from static initialisers (HAMI_REGISTER_VENDOR), so it must not depend
// on other statics.
bool RegisterVendorFactory(std::string_view section, VendorFactory factory);

// The registered section names, sorted.
std::vector<std::string> RegisteredVendorSections();

// The registered factory for `section`, or null.
const VendorFactory* FindVendorFactory(std::string_view section);

// Registers a vendor from its folder src/device/vendors/<folder>/ (one use per folder; a folder
// with a second section uses HAMI_REGISTER_VENDOR_SECTION for it in the same file). The anchor
// symbol it defines is referenced by a file CMake generates from the folder list, so a static
// library never drops the vendor's object file.
#define HAMI_REGISTER_VENDOR(folder, section, factory) \
  extern "C" {                                         \
  extern const bool hami_vendor_anchor_##folder;       \
  }                                                    \
  const bool hami_vendor_anchor_##folder = ::hami::device::RegisterVendorFactory(section, factory)
#define HAMI_REGISTER_VENDOR_SECTION(folder, section, factory) \
  static const bool hami_vendor_section_##folder =             \
      ::hami::device::RegisterVendorFactory(section, factory)

// Runs every registered factory whose section is present in `config` (config.sections), in
// section order. The first failing factory is the error.
Result<Registry> BuildRegistry(const DeviceConfig& config);

// BuildRegistry for a configuration already validated by LoadDeviceConfig (or built in code):
// a section whose factory fails is left out.
Registry MakeRegistry(const DeviceConfig& config);

// A node's usage row with zero usage: every backend's devices from the annotations, in backend
// order then registered order, plus the cordon list and every backend's pair scores
// (NodePairScores). A register or pair-score annotation that does not decode is an error naming
// the node and key.
Result<NodeUsage> NodeUsageFromView(const Registry& registry, const NodeView& node);
// The same for a node known by its annotations only (no capacity).
Result<NodeUsage> NodeUsageFromAnnotations(const Registry& registry, const std::string& node_name,
                                           const StringMap& node_annotations);

// The same from a core/v1 Node object (NodeViewFromNode), e.g. for the simulation filter, whose
// ExtenderArgs carry full nodes and whose usage is zero.
Result<NodeUsage> NodeUsageFromNode(const Registry& registry, const nlohmann::json& node);

}  // namespace hami::device

#endif  // HAMI_DEVICE_DEVICE_H_
