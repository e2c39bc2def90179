#include "draplugin/state.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/strings.h"
#include "deviceplugin/container_files.h"

namespace hami::draplugin {
namespace {

namespace fs = std::filesystem;
constexpr int kCheckpointVersion = 1;

Json DeviceToJson(const PreparedDevice& d) {
  return {{"requests", d.requests},
          {"pool", d.pool},
          {"device", d.device},
          {"shareID", d.share_id},
          {"cdiDeviceIDs", d.cdi_device_ids}};
}

PreparedDevice DeviceFromJson(const Json& j) {
  PreparedDevice d;
  d.requests = j.at("requests").get<std::vector<std::string>>();
  d.pool = j.at("pool").get<std::string>();
  d.device = j.at("device").get<std::string>();
  d.share_id = j.at("shareID").get<std::string>();
  d.cdi_device_ids = j.at("cdiDeviceIDs").get<std::vector<std::string>>();
  return d;
}

Json MigToJson(const ClaimMig& m) {
  return {{"device", m.device},
          {"gpuIndex", m.gpu_index},
          {"gpuUUID", m.gpu_uuid},
          {"profile", m.profile},
          {"profileID", m.profile_id},
          {"placement", {{"start", m.placement.start}, {"size", m.placement.size}}},
          {"gpuInstanceID", m.gpu_instance_id},
          {"computeInstanceID", m.compute_instance_id},
          {"migUUID", m.mig_uuid}};
}

ClaimMig MigFromJson(const Json& j) {
  ClaimMig m;
  m.device = j.at("device").get<std::string>();
  m.gpu_index = j.at("gpuIndex").get<uint32_t>();
  m.gpu_uuid = j.at("gpuUUID").get<std::string>();
  m.profile = j.at("profile").get<std::string>();
  m.profile_id = j.at("profileID").get<uint32_t>();
  m.placement = {j.at("placement").at("start").get<uint32_t>(),
                 j.at("placement").at("size").get<uint32_t>()};
  m.gpu_instance_id = j.at("gpuInstanceID").get<uint32_t>();
  m.compute_instance_id = j.at("computeInstanceID").get<uint32_t>();
  m.mig_uuid = j.at("migUUID").get<std::string>();
  return m;
}

Json FileToJson(const PlannedFile& f) {
  return {{"path", f.host_path},
          {"content", f.content},
          {"mode", f.mode},
          {"createOnly", f.create_only}};
}

PlannedFile FileFromJson(const Json& j) {
  return {j.at("path").get<std::string>(), j.at("content").get<std::string>(),
          j.at("mode").get<unsigned>(), j.at("createOnly").get<bool>()};
}

// An empty file made only when absent (O_EXCL): a region another pod's container is using is
// never truncated.
Status CreateIfAbsent(const PlannedFile& f) {
  std::error_code ec;
  fs::create_directories(fs::path(f.host_path).parent_path(), ec);
  if (ec) return Error{"create directory of " + Quote(f.host_path) + ": " + ec.message()};
  int fd = ::open(f.host_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                  f.mode & 0777);
  if (fd < 0) {
    if (errno == EEXIST) return OkStatus();
    return Error{"create " + Quote(f.host_path) + ": " + std::strerror(errno)};
  }
  ::fchmod(fd, f.mode & 0777);
  ::close(fd);
  return OkStatus();
}

}  // namespace

Status CheckClaimUid(std::string_view uid) {
  bool ok = !uid.empty() && uid.size() <= 128;
  for (char c : uid) {
    ok = ok &&
         ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-');
  }
  if (!ok) return Error{"claim uid: want letters, digits and '-', got " + Quote(uid)};
  return OkStatus();
}

PreparedClaims::PreparedClaims(std::string checkpoint_path, PrepareEnv env,
                               deviceplugin::MigDriver* mig, std::string mig_lock_path,
                               MigLockWait mig_lock_wait)
    : path_(std::move(checkpoint_path)),
      env_(std::move(env)),
      mig_driver_(mig),
      mig_(mig, std::move(mig_lock_path), std::move(mig_lock_wait)) {}

Status PreparedClaims::Load() {
  std::lock_guard<std::mutex> lock(mu_);
  claims_.clear();
  std::ifstream in(path_);
  if (!in) {
    if (errno == ENOENT) return OkStatus();
    return Error{"checkpoint " + Quote(path_) + ": " + std::strerror(errno)};
  }
  std::stringstream text;
  text << in.rdbuf();
  Json root = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return Error{"checkpoint " + Quote(path_) + ": not JSON"};
  }
  if (root.value("version", 0) != kCheckpointVersion) {
    return Error{"checkpoint " + Quote(path_) + ": version " +
                 root.value("version", Json()).dump() + ", want " +
                 std::to_string(kCheckpointVersion)};
  }
  try {
    for (const auto& [uid, e] : root.at("claims").items()) {
      if (auto ok = CheckClaimUid(uid); !ok)
        return Error{"checkpoint " + Quote(path_) + ": " + ok.error()};
      Entry entry;
      entry.ns = e.at("namespace").get<std::string>();
      entry.name = e.at("name").get<std::string>();
      entry.claim_dir = e.at("claimDir").get<std::string>();
      for (const Json& f : e.at("files")) entry.files.push_back(FileFromJson(f));
      for (const Json& d : e.at("devices")) entry.devices.push_back(DeviceFromJson(d));
      if (e.contains("migInstances")) {  // absent before MIG claims were prepared
        for (const Json& m : e.at("migInstances")) entry.migs.push_back(MigFromJson(m));
      }
      claims_.emplace(uid, std::move(entry));
    }
  } catch (const std::exception& ex) {
    claims_.clear();
    return Error{"checkpoint " + Quote(path_) + ": " + ex.what()};
  }
  return OkStatus();
}

Status PreparedClaims::Save() const {
  Json claims = Json::object();
  for (const auto& [uid, e] : claims_) {
    Json files = Json::array();
    for (const PlannedFile& f : e.files) files.push_back(FileToJson(f));
    Json devices = Json::array();
    for (const PreparedDevice& d : e.devices) devices.push_back(DeviceToJson(d));
    claims[uid] = {{"namespace", e.ns},
                   {"name", e.name},
                   {"claimDir", e.claim_dir},
                   {"files", files},
                   {"devices", devices}};
    if (!e.migs.empty()) {
      Json migs = Json::array();
      for (const ClaimMig& m : e.migs) migs.push_back(MigToJson(m));
      claims[uid]["migInstances"] = migs;
    }
  }
  Json root = {{"version", kCheckpointVersion}, {"claims", claims}};
  return deviceplugin::WriteFileAtomically({path_, root.dump() + "\n", 0600});
}

Status PreparedClaims::WriteFiles(const Entry& entry) const {
  std::error_code ec;
  fs::create_directories(entry.claim_dir, ec);
  if (ec) return Error{"create " + Quote(entry.claim_dir) + ": " + ec.message()};
  for (const PlannedFile& f : entry.files) {
    Status s = f.create_only ? CreateIfAbsent(f)
                             : deviceplugin::WriteFileAtomically({f.host_path, f.content, f.mode});
    if (!s) return s;
  }
  return OkStatus();
}

Result<std::vector<PreparedDevice>> PreparedClaims::Prepare(const ClaimAllocation& claim,
                                                            const std::vector<GpuFacts>& gpus) {
  if (auto ok = CheckClaimUid(claim.uid); !ok) return std::move(ok).take_error();
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = claims_.find(claim.uid); it != claims_.end()) {
    if (auto s = WriteFiles(it->second); !s) return std::move(s).take_error();
    return it->second.devices;
  }
  const std::string where = "ResourceClaim " + claim.ns + "/" + claim.name + ": ";
  std::vector<ClaimMig> migs = ClaimMigDevices(claim, gpus);
  if (!migs.empty()) {
    if (mig_driver_ == nullptr) {
      return Error{where + "MIG device " + Quote(migs.front().device) +
                   ": this plugin has no MIG driver (GPUs from an inventory, not NVML)"};
    }
    auto created = mig_.Create(std::move(migs));
    if (!created) return Error{where + created.error()};
    migs = std::move(*created);
  }
  // What this call created goes again when the claim cannot be recorded.
  auto undo = [&](Error e) -> Error {
    std::vector<ClaimMig> created;
    for (const ClaimMig& m : migs) {
      if (m.created) created.push_back(m);
    }
    if (!created.empty()) {
      if (auto s = mig_.Destroy(created); !s) e = Error{e.message + "; roll-back: " + s.error()};
    }
    return e;
  };
  auto plan = PlanClaim(claim, gpus, env_, migs);
  if (!plan) return undo(std::move(plan).take_error());
  Entry entry{claim.ns, claim.name, plan->claim_dir, plan->files, plan->devices, migs};
  if (auto s = WriteFiles(entry); !s) return undo(std::move(s).take_error());
  claims_.emplace(claim.uid, entry);
  if (auto s = Save(); !s) {
    claims_.erase(claim.uid);
    return undo(std::move(s).take_error());
  }
  return entry.devices;
}

Status PreparedClaims::Unprepare(std::string_view claim_uid) {
  if (auto ok = CheckClaimUid(claim_uid); !ok) return ok;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = claims_.find(claim_uid);
  if (it == claims_.end()) return OkStatus();
  if (!it->second.migs.empty()) {
    if (mig_driver_ == nullptr) {
      return Error{"MIG device " + Quote(it->second.migs.front().device) +
                   ": this plugin has no MIG driver to destroy its instance"};
    }
    if (auto s = mig_.Destroy(it->second.migs); !s) return s;
  }
  std::error_code ec;
  for (const PlannedFile& f : it->second.files) {
    if (::unlink(f.host_path.c_str()) != 0 && errno != ENOENT) {
      return Error{"remove " + Quote(f.host_path) + ": " + std::strerror(errno)};
    }
  }
  fs::remove_all(it->second.claim_dir, ec);
  if (ec) return Error{"remove " + Quote(it->second.claim_dir) + ": " + ec.message()};
  Entry kept = std::move(it->second);
  claims_.erase(it);
  if (auto s = Save(); !s) {
    claims_.emplace(std::string(claim_uid), std::move(kept));
    return s;
  }
  return OkStatus();
}

bool PreparedClaims::Has(std::string_view claim_uid) const {
  std::lock_guard<std::mutex> lock(mu_);
  return claims_.find(claim_uid) != claims_.end();
}

size_t PreparedClaims::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return claims_.size();
}

}  // namespace hami::draplugin
