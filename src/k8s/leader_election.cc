#include "k8s/leader_election.h"

#include <ctime>

#include <fmt/format.h>

#include "common/log.h"

namespace hami::k8s {
namespace {

// metav1.MicroTime: RFC 3339 with microseconds, UTC.
std::string MicroTime(SystemTime t) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return std::string(buf) + fmt::format(".{:06d}Z", us % 1000000);
}

}  // namespace

LeaderElector::LeaderElector(Client& client, LeaderElectionConfig config, const Clock& clock)
    : client_(client), config_(std::move(config)), clock_(clock) {}

Json LeaderElector::LeaseSpec(const Json& old_spec, bool transition) const {
  Json spec = old_spec.is_object() ? old_spec : Json::object();
  std::string now = MicroTime(clock_.Now());
  spec["holderIdentity"] = config_.identity;
  spec["leaseDurationSeconds"] = config_.lease_duration.count();
  spec["renewTime"] = now;
  if (transition || !spec.contains("acquireTime")) spec["acquireTime"] = now;
  if (transition) spec["leaseTransitions"] = spec.value("leaseTransitions", 0) + 1;
  if (!spec.contains("leaseTransitions")) spec["leaseTransitions"] = 0;
  return spec;
}

ApiResult<bool> LeaderElector::TryAcquireOrRenew() {
  const Resource& leases = resources::kLeases;
  SystemTime now = clock_.Now();
  auto lease = client_.Get(leases, config_.lease_namespace, config_.lease_name);
  if (!lease) {
    if (!IsNotFound(lease.error())) return std::move(lease).take_error();
    Json fresh = {{"apiVersion", "coordination.k8s.io/v1"},
                  {"kind", "Lease"},
                  {"metadata", {{"name", config_.lease_name}}},
                  {"spec", LeaseSpec(Json(), false)}};
    auto created = client_.Create(leases, config_.lease_namespace, fresh);
    if (!created) {
      if (IsAlreadyExists(created.error())) return false;
      return std::move(created).take_error();
    }
    observed_record_ = (*created)["spec"].dump();
    observed_at_ = last_renew_ = now;
    return true;
  }
  Json spec = lease->contains("spec") ? (*lease)["spec"] : Json::object();
  std::string holder = spec.value("holderIdentity", "");
  std::string record = spec.dump();
  if (record != observed_record_) {
    observed_record_ = record;
    observed_at_ = now;
  }
  auto duration = std::chrono::seconds(spec.value("leaseDurationSeconds", 0));
  bool mine = holder == config_.identity;
  if (!mine && !holder.empty() && observed_at_ + duration > now) return false;
  (*lease)["spec"] = LeaseSpec(spec, !mine);
  auto updated = client_.Update(leases, *lease);  // carries the resourceVersion we read
  if (!updated) {
    if (IsConflict(updated.error())) return false;
    return std::move(updated).take_error();
  }
  observed_record_ = (*updated)["spec"].dump();
  observed_at_ = last_renew_ = now;
  return true;
}

void LeaderElector::Run(const std::function<void()>& on_started,
                        const std::function<void()>& on_stopped) {
  for (;;) {
    auto won = TryAcquireOrRenew();
    bool holds = won.ok() && *won;
    if (!won) HAMI_WARN("leader election {}: {}", config_.lease_name, won.error().ToString());
    bool was = is_leader();
    // A leader keeps its role through failed renewals until renew_deadline passes.
    if (!holds && was && !won.ok() && clock_.Now() - last_renew_ < config_.renew_deadline) {
      holds = true;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      leader_ = holds;
    }
    if (holds && !was && on_started) on_started();
    if (!holds && was && on_stopped) on_stopped();
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, config_.retry_period, [&] { return stop_; })) break;
  }
  bool was;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was = leader_;
    leader_ = false;
  }
  if (was && on_stopped) on_stopped();
}

void LeaderElector::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = true;
  cv_.notify_all();
}

bool LeaderElector::is_leader() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leader_;
}

}  // namespace hami::k8s
