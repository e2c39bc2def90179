// The inventory file (`--device-inventory FILE`): GPUs described in YAML instead of discovered
// through NVML, for simulation, tests and a mock plugin on nodes without GPUs:
//   devices:
//     - {index: 0, uuid: GPU-a, model: Tesla V100-PCIE-32GB, memory: 32768, numa: 1, health: true}
// `memory` is MiB. `index` defaults to the list position, `numa` to 0, `health` to true; `uuid`,
// `model` and a positive `memory` are required. `index` and `memory` must fit the register
// annotation's int32 (at most 2147483647); a `uuid` must not hold `,`, `:` or `;` (the pod
// annotation's separators); an unknown key, at the top or in an entry, is an error.
#ifndef HAMI_DEVICEPLUGIN_INVENTORY_H_
#define HAMI_DEVICEPLUGIN_INVENTORY_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "deviceplugin/discovery.h"

namespace hami::deviceplugin {

// Parses the YAML text. Errors name the entry and field, e.g.
// `devices[1].memory: want an integer from 1 to 2147483647 (MiB), got "lots"`. Duplicate UUIDs
// and duplicate indices are errors.
Result<std::vector<GpuDevice>> ParseInventory(std::string_view yaml_text);

// Re-reads the file on every Discover(), so editing it simulates hot-plug or a health change.
class InventoryDiscovery : public Discovery {
 public:
  explicit InventoryDiscovery(std::string path) : path_(std::move(path)) {}
  Result<std::vector<GpuDevice>> Discover() override;
  std::string Name() const override { return "inventory:" + path_; }

 private:
  std::string path_;
};

// Reads a whole file; errors name the path.
Result<std::string> ReadFile(const std::string& path);

}  // namespace hami::deviceplugin

#endif  // HAMI_DEVICEPLUGIN_INVENTORY_H_
