// The claims this node has prepared, checkpointed to a file (docs/DRA.md "Prepare"), as kubelet's
// own DRA plugins do: kubelet retries NodePrepareResources and calls it again for every pod that
// shares a claim, and the plugin may restart between Prepare and Unprepare. Prepare of a claim
// already prepared answers what it answered before and re-creates only missing files; Unprepare
// removes exactly what Prepare made.
#ifndef HAMI_DRAPLUGIN_STATE_H_
#define HAMI_DRAPLUGIN_STATE_H_

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "draplugin/prepare.h"

namespace hami::draplugin {

class PreparedClaims {
 public:
  // `checkpoint_path`: e.g. /var/lib/kubelet/plugins/hami-core-gpu.project-hami.io/checkpoint.json
  // `mig`: the driver that makes MIG devices' instances (NVML's NvmlDiscovery; must outlive
  // this); null: a claim with a MIG device fails with the reason. `mig_lock_path`: the node's
  // MIG apply lock; `mig_lock_wait`: how long a prepare waits for it (mig.h MigLockWait).
  PreparedClaims(std::string checkpoint_path, PrepareEnv env,
                 deviceplugin::MigDriver* mig = nullptr,
                 std::string mig_lock_path = std::string(deviceplugin::kMigApplyLockPath),
                 MigLockWait mig_lock_wait = {});

  // Reads the checkpoint; a missing file is an empty state. An unreadable or malformed file is an
  // error naming the path (the plugin must not forget what it prepared).
  Status Load();

  // Plans and writes `claim` (its MIG devices' instances through MigPreparer, PlanClaim, then the
  // files: create-only ones made when absent, the others replaced atomically), records it (with
  // its MIG instances), writes the checkpoint, and returns kubelet's devices. On an error the MIG
  // instances it created are destroyed again. A claim already recorded returns its recorded
  // devices after re-creating missing files, and creates no MIG instance.
  Result<std::vector<PreparedDevice>> Prepare(const ClaimAllocation& claim,
                                              const std::vector<GpuFacts>& gpus);

  // Destroys the MIG instances the claim's Prepare recorded, removes the files it made, its
  // directory, and its record. A claim not recorded is done already (kubelet retries).
  Status Unprepare(std::string_view claim_uid);

  bool Has(std::string_view claim_uid) const;
  size_t size() const;

 private:
  struct Entry {
    std::string ns, name, claim_dir;
    std::vector<PlannedFile> files;
    std::vector<PreparedDevice> devices;
    std::vector<ClaimMig> migs;
  };
  Status WriteFiles(const Entry& entry) const;
  Status Save() const;  // under mu_

  std::string path_;
  PrepareEnv env_;
  deviceplugin::MigDriver* mig_driver_;
  MigPreparer mig_;
  mutable std::mutex mu_;
  std::map<std::string, Entry, std::less<>> claims_;
};

// A claim UID as a path component: letters, digits and '-' only (the API server's UIDs); an
// error names the value otherwise.
Status CheckClaimUid(std::string_view uid);

}  // namespace hami::draplugin

#endif  // HAMI_DRAPLUGIN_STATE_H_
