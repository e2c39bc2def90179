#include "sim/scheduler_set.h"

#include <httplib.h>

#include "common/log.h"
#include "common/strings.h"

namespace hami::sim {
namespace {

// The value of label `name` in a Prometheus sample's label set (no escapes in ours).
std::string LabelValue(std::string_view labels, std::string_view name) {
  const std::string key = std::string(name) + "=\"";
  for (size_t pos = labels.find(key); pos != std::string_view::npos;
       pos = labels.find(key, pos + 1)) {
    if (pos != 0 && labels[pos - 1] != ',') continue;
    const size_t start = pos + key.size();
    const size_t end = labels.find('"', start);
    if (end == std::string_view::npos) return "";
    return std::string(labels.substr(start, end - start));
  }
  return "";
}

}  // namespace

std::map<std::string, std::set<std::string>> CountedAllocations(std::string_view metrics) {
  constexpr std::string_view kFamily = "hami_vgpu_memory_allocated_bytes{";
  std::map<std::string, std::set<std::string>> out;
  size_t at = 0;
  while (at < metrics.size()) {
    size_t eol = metrics.find('\n', at);
    if (eol == std::string_view::npos) eol = metrics.size();
    std::string_view line = metrics.substr(at, eol - at);
    at = eol + 1;
    if (line.substr(0, kFamily.size()) != kFamily) continue;
    const size_t close = line.find('}');
    if (close == std::string_view::npos) continue;
    std::string_view labels = line.substr(kFamily.size(), close - kFamily.size());
    const std::string ns = LabelValue(labels, "namespace"), pod = LabelValue(labels, "pod");
    const std::string uuid = LabelValue(labels, "device_uuid");
    if (ns.empty() || pod.empty() || uuid.empty()) continue;
    out[ns + "/" + pod].insert(uuid);
  }
  return out;
}

Result<std::map<std::string, std::set<std::string>>> ScrapeCountedAllocations(int port) {
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(std::chrono::seconds(10));
  httplib::Result res = http.Get("/metrics");
  if (!res) return Error{"GET /metrics: " + httplib::to_string(res.error())};
  if (res->status != 200) return Error{"GET /metrics: HTTP " + std::to_string(res->status)};
  return CountedAllocations(res->body);
}

struct SchedulerSet::Replica {
  std::string pod;       // hami-scheduler-sim-<i>
  std::string identity;  // this process's election identity (new per start)
  int port = 0, metrics_port = 0;
  bool alive = false;
  std::unique_ptr<k8s::LeaderElector> elector;
  std::thread elector_thread;
  std::unique_ptr<scheduler::Server> server;
};

SchedulerSet::SchedulerSet(SchedulerSetOptions options) : options_(std::move(options)) {}

SchedulerSet::~SchedulerSet() { Stop(); }

Status SchedulerSet::StartLocked(Replica& r, int index) {
  scheduler::ServerOptions so = options_.server;
  so.http_bind = "127.0.0.1:" + std::to_string(r.port);
  so.metrics_bind = "127.0.0.1:" + std::to_string(r.metrics_port);
  r.pod = "hami-scheduler-sim-" + std::to_string(index);
  // kube-scheduler's identity is <hostname>_<uuid>: a new one per process, so a restarted
  // replica waits for the Lease like anyone else instead of renewing its predecessor's.
  r.identity = r.pod + "_" + std::to_string(++generation_);
  k8s::Client& client = options_.new_client();
  if (options_.replicas > 1) {
    k8s::LeaderElectionConfig config;
    config.lease_namespace = options_.lease_namespace;
    config.lease_name = options_.lease_name;
    config.identity = r.identity;
    config.lease_duration = options_.election.lease_duration;
    config.renew_deadline = options_.election.renew_deadline;
    config.retry_period = options_.election.retry_period;
    r.elector = std::make_unique<k8s::LeaderElector>(client, config, *options_.clock);
    k8s::LeaderElector* elector = r.elector.get();
    r.elector_thread = std::thread([elector] { elector->Run({}, {}); });
    so.leader_elect = true;
    so.lease_name = options_.lease_name;
    so.lease_namespace = options_.lease_namespace;
    so.identity = r.pod;
  }
  r.server =
      std::make_unique<scheduler::Server>(client, options_.device_config, so, *options_.clock);
  if (auto st = r.server->Start(); !st) {
    return Error{"hami-scheduler replica " + std::to_string(index) + ": " + st.error()};
  }
  r.port = r.server->port();
  r.metrics_port = r.server->metrics_port();
  r.alive = true;
  return OkStatus();
}

Status SchedulerSet::Start(std::chrono::milliseconds wait) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < options_.replicas; ++i) {
      replicas_.push_back(std::make_unique<Replica>());
      if (auto st = StartLocked(*replicas_.back(), i); !st) return st;
    }
  }
  sampler_ = std::thread([this] { Sample(); });
  const auto deadline = std::chrono::steady_clock::now() + wait;
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_until(lock, deadline, [&] { return serving_ >= 0 || stopped_; })) {
    return Error{"hami-scheduler: no replica served (leader with a registration pass) within " +
                 std::to_string(wait.count()) + " ms"};
  }
  return OkStatus();
}

void SchedulerSet::Sample() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopped_) {
    int serving = -1;
    for (size_t i = 0; i < replicas_.size() && serving < 0; ++i) {
      const Replica& r = *replicas_[i];
      if (!r.alive || !r.server->synced()) continue;
      if (r.elector && !r.elector->is_leader()) continue;
      serving = static_cast<int>(i);
    }
    const auto now = std::chrono::steady_clock::now();
    if (serving >= 0) {
      const std::string& id = replicas_[serving]->identity;
      if (ever_served_ && id != last_serving_) ++stats_.leader_changes;
      if (gap_open_) {
        stats_.failover_seconds_max = std::max(
            stats_.failover_seconds_max, std::chrono::duration<double>(now - gap_start_).count());
        gap_open_ = false;
      }
      last_serving_ = id;
      ever_served_ = true;
    } else if (ever_served_ && !gap_open_) {
      gap_open_ = true;
      gap_start_ = now;
    }
    if (serving != serving_) {
      serving_ = serving;
      cv_.notify_all();
    }
    cv_.wait_for(lock, options_.sample_period);
  }
}

bool SchedulerSet::Kill(int i) {
  std::unique_ptr<Replica> dead;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_ || i < 0 || i >= static_cast<int>(replicas_.size()) || !replicas_[i]->alive) {
      return false;
    }
    // The successor gets the ports; the corpse keeps its threads until they are joined below.
    auto next = std::make_unique<Replica>();
    next->port = replicas_[i]->port;
    next->metrics_port = replicas_[i]->metrics_port;
    next->pod = replicas_[i]->pod;
    next->identity = replicas_[i]->identity;
    dead = std::move(replicas_[i]);
    replicas_[i] = std::move(next);
    if (serving_ == i) {
      // The sampler would notice within a period; the gap starts now.
      serving_ = -1;
      if (!gap_open_) {
        gap_open_ = true;
        gap_start_ = std::chrono::steady_clock::now();
      }
    }
  }
  HAMI_INFO("hami-sim: killing hami-scheduler replica {} ({})", i, dead->identity);
  // The election ends without releasing the Lease (SIGKILL gives no chance to).
  if (dead->elector) {
    dead->elector->Stop();
    if (dead->elector_thread.joinable()) dead->elector_thread.join();
  }
  dead->server->Stop();
  std::lock_guard<std::mutex> lock(mu_);
  graveyard_.push_back(std::move(dead));
  return true;
}

Status SchedulerSet::Restart(int i) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return Error{"hami-scheduler: the set is stopped"};
  if (i < 0 || i >= static_cast<int>(replicas_.size())) {
    return Error{"hami-scheduler: no replica " + std::to_string(i)};
  }
  Replica& r = *replicas_[i];
  if (r.alive) return OkStatus();
  HAMI_INFO("hami-sim: restarting hami-scheduler replica {}", i);
  if (auto st = StartLocked(r, i); !st) return st;
  ++stats_.restarts;
  return OkStatus();
}

bool SchedulerSet::Alive(int i) const {
  std::lock_guard<std::mutex> lock(mu_);
  return i >= 0 && i < static_cast<int>(replicas_.size()) && replicas_[i]->alive;
}

int SchedulerSet::Serving() const {
  std::lock_guard<std::mutex> lock(mu_);
  return serving_;
}

int SchedulerSet::Leader() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (replicas_.size() == 1) return 0;
  for (size_t i = 0; i < replicas_.size(); ++i) {
    const Replica& r = *replicas_[i];
    if (r.alive && r.elector && r.elector->is_leader()) return static_cast<int>(i);
  }
  return -1;
}

std::string SchedulerSet::ExtenderUrl() const {
  std::lock_guard<std::mutex> lock(mu_);
  int pick = serving_;
  for (size_t i = 0; pick < 0 && i < replicas_.size(); ++i) {
    const Replica& r = *replicas_[i];
    if (r.alive && (!r.elector || r.elector->is_leader())) pick = static_cast<int>(i);
  }
  if (replicas_.empty()) return "http://127.0.0.1:0";  // stopped
  if (pick < 0) pick = 0;
  return "http://127.0.0.1:" + std::to_string(replicas_.at(pick)->port);
}

int SchedulerSet::WebhookPort() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (serving_ >= 0) return replicas_[serving_]->port;
  for (const auto& r : replicas_) {
    if (r->alive) return r->port;
  }
  return 0;
}

int SchedulerSet::MetricsPort() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (serving_ >= 0) return replicas_[serving_]->metrics_port;
  for (const auto& r : replicas_) {
    if (r->alive) return r->metrics_port;
  }
  return 0;
}

SchedulerSetStats SchedulerSet::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  SchedulerSetStats out = stats_;
  if (gap_open_) {
    out.failover_seconds_max = std::max(
        out.failover_seconds_max,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - gap_start_).count());
  }
  return out;
}

void SchedulerSet::Stop() {
  std::vector<std::unique_ptr<Replica>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    cv_.notify_all();
    for (auto& r : replicas_) all.push_back(std::move(r));
    for (auto& r : graveyard_) all.push_back(std::move(r));
  }
  if (sampler_.joinable()) sampler_.join();
  for (auto& r : all) {
    if (r->elector) r->elector->Stop();
  }
  std::vector<std::thread> stoppers;
  for (auto& r : all) {
    Replica* p = r.get();
    stoppers.emplace_back([p] {
      if (p->elector_thread.joinable()) p->elector_thread.join();
      if (p->server) p->server->Stop();
    });
  }
  for (std::thread& t : stoppers) t.join();
}

}  // namespace hami::sim
