// The loop's lifecycle and its serial scheduling cycle: one pod at a time from the activeQ, POST
// /filter, then the bind handed to a worker (kube_scheduler_bind.cc) or the pod back to a queue
// (sim/scheduling_queue.h). The parts are listed in kube_scheduler_impl.h.
#include "sim/kube_scheduler.h"

#include <algorithm>
#include <map>

#include "common/log.h"
#include "common/strings.h"
#include "k8s/informer.h"
#include "k8s/object.h"
#include "sim/kube_scheduler_extender.h"
#include "sim/kube_scheduler_impl.h"

namespace hami::sim {

namespace res = k8s::resources;
using nlohmann::json;

Status KubeSchedulerLoop::Impl::Start() {
  if (options_.extender_url.empty()) return Error{"kube-scheduler loop: extender_url is empty"};
  MakeInformers();
  if (Status st = StartInformers("kube-scheduler loop", {}); !st.ok()) return st;
  pool_.Start(options_.bind_parallelism,
              [this] { return NewExtenderHttp(options_, /*keep_alive=*/false); });
  StartCycle([this] { CycleLoop(); });
  return OkStatus();
}

void KubeSchedulerLoop::Impl::Stop() {
  StopCycle();
  pool_.Stop();
  StopInformers({});
}

void KubeSchedulerLoop::Impl::CycleLoop() {
  std::unique_ptr<httplib::Client> http = NewExtenderHttp(options_, /*keep_alive=*/true);
  std::string url = options_.extender_url_source ? options_.extender_url_source() : "";
  RunCycles([&](const std::string& key) {
    if (options_.extender_url_source && options_.extender_url_source() != url) {
      // Another replica leads now: its kube-scheduler would talk to its own extender.
      url = options_.extender_url_source();
      http = NewExtenderHttp(options_, /*keep_alive=*/true);
    }
    ScheduleOne(key, *http);
  });
}

void KubeSchedulerLoop::Impl::ScheduleOne(const std::string& key, httplib::Client& http) {
  k8s::ObjectRef pod = pods_->Get(key);
  if (SettledBeforeCycle(key, pod)) return;
  std::vector<std::string> nodes = ready_.Sample();
  const size_t node_count = nodes.size();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++queue_[key].rec.attempts;
  }
  const SystemTime filter_start = clock_.Now();
  const FilterReply reply = ExtenderFilter(http, *pod, std::move(nodes));
  RecordFilter(filter_start);
  const std::string& error = reply.error;
  const std::string& chosen = reply.chosen;
  if (error.empty() && !chosen.empty()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_[key].where = PodWhere::kBinding;  // stays in flight until the bind settles
    }
    pool_.SubmitSerial(chosen, [this, key, pod, chosen](httplib::Client& h) {
      Bind(key, *pod, chosen, h);
      pool_.SerialDone(chosen);
    });
    return;
  }
  // A transport failure or an extender Error is retried after the backoff; "no node fits"
  // waits in the unschedulableQ for a cluster event.
  const bool unschedulable = error.empty();
  const std::string message = UnschedulableMessage(node_count, reply.failed, error);
  bool write = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    QueuedPod& s = queue_[key];
    queue_.Fail(s, clock_.Now(), unschedulable ? message : error, unschedulable);
    write = unschedulable && queue_.ShouldWrite(s, message);
    queue_.Done();
  }
  if (write) {
    pool_.Submit([this, pod, message](httplib::Client&) {
      WriteUnschedulable(client_, clock_, *pod, message);
    });
  }
}

KubeSchedulerLoop::KubeSchedulerLoop(k8s::Client& client, KubeSchedulerOptions options,
                                     const Clock& clock)
    : impl_(std::make_unique<Impl>(client, std::move(options), clock)) {
  core_ = impl_.get();
}

KubeSchedulerLoop::~KubeSchedulerLoop() { Stop(); }

}  // namespace hami::sim
