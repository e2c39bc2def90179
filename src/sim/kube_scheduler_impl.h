// KubeSchedulerLoop's state, shared by its parts (internal to hami-sim):
//   kube_scheduler.cc           start/stop and the serial scheduling cycle (filter, then hand off)
//   kube_scheduler_queue.cc     activeQ/backoffQ/unschedulableQ, the informer handlers that feed
//                               them, and the candidate nodes of one cycle
//   kube_scheduler_bind.cc      the bind workers (one bind per node at a time) and the
//                               FailedScheduling status write
//   kube_scheduler_extender.cc  the HTTP client of the extender (/filter, /bind)
#ifndef HAMI_SIM_KUBE_SCHEDULER_IMPL_H_
#define HAMI_SIM_KUBE_SCHEDULER_IMPL_H_

#include <httplib.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/object.h"
#include "sim/kube_scheduler.h"

namespace hami::sim {

class KubeSchedulerLoop::Impl {
 public:
  using json = nlohmann::json;
  enum class Where { kActive, kBackoff, kUnschedulable, kCycle, kBinding, kBound, kGone };
  struct PodState {
    PodScheduleRecord rec;
    Where where = Where::kActive;
    uint64_t seq = 0;  // activeQ order
    SystemTime backoff_until{};
    std::string last_written;  // last PodScheduled message written
    std::string uid;
  };

  Impl(k8s::Client& client, KubeSchedulerOptions options, const Clock& clock)
      : client_(client), options_(std::move(options)), clock_(clock) {}

  // Succeeded or Failed: the pod takes no more scheduling.
  static bool Terminal(const json& pod) {
    const std::string phase = k8s::FieldString(pod, "status.phase");
    return phase == "Succeeded" || phase == "Failed";
  }

  Status Start();
  void Stop();

  // Informer handlers (kube_scheduler_queue.cc).
  void OnPod(const json& pod);
  void OnPodDelete(const json& pod);
  void OnNode(const json* old_node, const json& node);
  void OnNodeDelete(const json& node);

  // Queue moves; mu_ held (kube_scheduler_queue.cc).
  void PushActive(PodState& s);
  void Remove(PodState& s);
  void Flush(SystemTime now);
  void Fail(PodState& s, SystemTime now, const std::string& why, bool unschedulable);

  // The scheduling cycle (kube_scheduler.cc).
  void CycleLoop();
  void ScheduleOne(const std::string& key, httplib::Client& http);
  // Bind workers (kube_scheduler_bind.cc).
  void Bind(const std::string& key, const json& pod, const std::string& node,
            httplib::Client& http);
  void WriteUnschedulable(const json& pod, const std::string& message);
  std::vector<std::string> CandidateNodes();
  void Submit(std::function<void(httplib::Client&)> task);
  void SubmitBind(const std::string& node, std::function<void(httplib::Client&)> task);
  void BindDone(const std::string& node);
  void Worker();

  k8s::Client& client_;
  const KubeSchedulerOptions options_;
  const Clock& clock_;
  std::unique_ptr<k8s::Informer> pods_;
  std::unique_ptr<k8s::Informer> nodes_;

  mutable std::mutex mu_;
  std::condition_variable cv_;  // wakes the cycle
  std::map<std::string, PodState> pods_state_;
  std::vector<double> filter_ms_;  // each POST /filter round trip
  std::set<std::pair<uint64_t, std::string>> active_;
  std::set<std::pair<SystemTime, std::string>> backoff_;
  std::set<std::string> unschedulable_;
  uint64_t next_seq_ = 0;
  size_t in_flight_ = 0;  // the cycle's pod + queued and running binds
  bool flush_requested_ = false;
  SystemTime last_flush_{};
  uint64_t passes_ = 0;
  bool stopping_ = false;
  bool started_ = false;

  std::mutex nodes_mu_;
  std::set<std::string> ready_nodes_;
  std::vector<std::string> ready_list_;
  bool ready_dirty_ = true;
  size_t next_start_ = 0;  // kube-scheduler's nextStartNodeIndex

  std::mutex work_mu_;
  std::condition_variable work_cv_;
  std::deque<std::function<void(httplib::Client&)>> work_;
  // Binds to a node with a bind in flight wait here, in cycle order (see the header).
  std::map<std::string, std::deque<std::function<void(httplib::Client&)>>> node_binds_;
  std::set<std::string> node_busy_;
  bool work_stop_ = false;
  std::vector<std::thread> workers_;
  std::thread cycle_;
};

}  // namespace hami::sim

#endif  // HAMI_SIM_KUBE_SCHEDULER_IMPL_H_
