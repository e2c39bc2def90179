// Node register annotations (docs/protocol.md#node-registration-and-the-handshake): the device
// inventory a device plugin publishes on its node, e.g. `hami.io/node-nvidia-register`.
//
// Two encodings exist:
//  * JSON (NVIDIA since v2.8; Ascend, XPU, AMD, Vastai, Biren): Go's encoding/json output of the
//    DeviceInfo list, compact, keys in struct order, every zero-valued field omitted:
//      [{"id":"GPU-a","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB",
//        "numa":1,"mode":"hami-core","health":true},{"id":"GPU-b","index":1,...}]
//  * legacy colon (NVIDIA <= v2.7, Hygon DCU, Iluvatar): each device
//      `ID,Count,Devmem,Devcore,Type,Numa,Health,Index,Mode` followed by ':'.
// All functions here are pure and total: they never throw and never read out of bounds.
#ifndef HAMI_PROTOCOL_NODE_REGISTER_H_
#define HAMI_PROTOCOL_NODE_REGISTER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace hami::protocol {

// A MIG instance position on a GPU, in memory slices. Also used by the MIG allocation annotation.
struct MigPlacement {
  uint32_t start = 0;
  uint32_t size = 0;
  bool operator==(const MigPlacement&) const = default;
};

// One MIG profile a GPU offers (NVIDIA register JSON since v2.10). JSON keys: name, memoryMB,
// core, sliceCount, placements. Every key is always written (an empty placement list as []).
struct MigProfile {
  std::string name{};       // e.g. "1g.5gb"
  int64_t memory_mb = 0;    // "memoryMB"
  int32_t core = 0;         // percent of the GPU's SMs
  int32_t slice_count = 0;  // "sliceCount"
  std::vector<MigPlacement> placements{};
  bool operator==(const MigProfile&) const = default;
};

// One physical device as registered on the node. Field types follow HAMi's Go struct, so the
// decoder rejects the values Go would (index uint, count/devmem/devcore int32, numa int), and
// also, in both encodings, a negative count/devmem/devcore or a device id listed twice: they
// would add capacity that does not exist (issue 19).
struct DeviceInfo {
  std::string id{};                        // device UUID, e.g. "GPU-0fc3eda5-..."
  uint64_t index = 0;                      // position on the node
  int32_t count = 0;                       // split count: how many pods may share it
  int32_t devmem = 0;                      // MiB
  int32_t devcore = 0;                     // percent (100 = whole device)
  std::string type{};                      // model, e.g. "NVIDIA-Tesla V100-PCIE-32GB"
  int64_t numa = 0;                        // NUMA node
  std::string mode{};                      // "hami-core", "mig", "mps"
  std::vector<MigProfile> mig_profiles{};  // "migProfiles"
  bool health = false;                     // absent in JSON means unhealthy
  bool operator==(const DeviceInfo&) const = default;
};

// The mode a 7-field legacy entry gets.
inline constexpr std::string_view kDefaultDeviceMode = "hami-core";

// --- JSON encoding ---

// Go encoding/json's output for the list, byte for byte: compact, keys in the order id, index,
// count, devmem, devcore, type, numa, mode, migProfiles, health, zero values omitted. An empty
// list encodes as "[]".
std::string EncodeNodeRegister(const std::vector<DeviceInfo>& devices);

// Reads what EncodeNodeRegister (or HAMi) wrote, as Go's encoding/json would: missing keys and
// null values keep their zero value, unknown keys are ignored, keys match case-insensitively when
// no exact match exists, "null" is an empty list. Wrong types and out-of-range numbers are errors
// that name the device and field, e.g. `device 1: field "devmem": want an integer, got "abc"`.
// One difference from Go: invalid UTF-8 inside a JSON string is rejected rather than replaced by
// U+FFFD (no Go encoder writes it).
//
// `require_id`: also refuse a device without an id of its own, as the vendors other than NVIDIA
// do (two such entries would be one device, picked twice): an entry with no non-null id member
// is `node register: device <i>: field "id": missing`, one whose id is "" is
// `node register: device <i>: field "id": must not be empty, got ""`. Checked after the other
// device checks, so their errors come first.
struct RegisterRules {
  bool require_id = false;
};
Result<std::vector<DeviceInfo>> DecodeNodeRegister(std::string_view value,
                                                   RegisterRules rules = {});

// --- legacy colon encoding ---

// Each device as `ID,Count,Devmem,Devcore,Type,Numa,Health,Index,Mode:` (always 9 fields;
// health as "true"/"false"). Precondition for a value that decodes back: no id, type or mode
// contains ',' or ':'. An empty list encodes as "". mig_profiles are not representable and are
// dropped.
std::string EncodeNodeRegisterLegacy(const std::vector<DeviceInfo>& devices);

// Splits on ':' (the value must contain at least one), skips empty entries, and reads entries of
// 7 fields (index 0, mode "hami-core") or 9 fields. Any other field count, a non-integer, a bad
// bool (Go strconv.ParseBool set) or a negative index is an error naming the entry and field.
Result<std::vector<DeviceInfo>> DecodeNodeRegisterLegacy(std::string_view value);

// --- Go JSON strings, shared by this module's JSON encoders ---

// Appends `s` as a JSON string literal exactly as Go's encoding/json writes it: `"` and `\`
// backslash-escaped; \b \f \n \r \t as such; other bytes < 0x20 as \u00XX (lower-case hex);
// '<' '>' '&' as \u003c \u003e \u0026 (Go's default HTML escaping); U+2028/U+2029 as
// \u2028/\u2029; each byte that is not part of valid UTF-8 as \ufffd. Everything else verbatim.
void AppendGoJsonString(std::string* out, std::string_view s);

}  // namespace hami::protocol

#endif  // HAMI_PROTOCOL_NODE_REGISTER_H_
