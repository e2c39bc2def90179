#include "sim/loadgen.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "common/json.h"
#include "common/log.h"
#include "common/strings.h"
#include "common/time_format.h"
#include "k8s/client.h"
#include "k8s/kubeconfig.h"
#include "k8s/object.h"
#include "nodelock/release.h"
#include "protocol/handshake.h"
#include "protocol/keys.h"
#include "protocol/node_register.h"
#include "protocol/pod_devices.h"
#include "protocol/vendor.h"
#include "scheduler/extender_args.h"
#include "sim/report.h"
#include "sim/synthetic/cluster.h"

extern char** environ;

namespace hami::sim {

namespace fs = std::filesystem;
namespace res = k8s::resources;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;
using namespace synthetic;  // NOLINT: the cluster loadgen pre-loads

namespace {

double MsBetween(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// ---- children -------------------------------------------------------------------------------

std::mutex g_children_mu;
std::set<pid_t> g_children;

// A child process whose stdout and stderr go through a pipe to `log_path`; the last 64 KiB stay
// in memory for WaitFor() and error messages.
class Child {
 public:
  Child() = default;
  ~Child() { Stop(); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  Status Start(const std::vector<std::string>& args, const std::string& log_path) {
    std::vector<std::string> store = args;
    std::vector<char*> argv;
    for (std::string& a : store) argv.push_back(a.data());
    argv.push_back(nullptr);
    log_ = std::fopen(log_path.c_str(), "w");
    if (log_ == nullptr) return Error{"log " + Quote(log_path) + ": cannot write"};
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return Error{"pipe: " + std::string(std::strerror(errno))};
    const pid_t parent = getpid();
    std::lock_guard<std::mutex> lock(g_children_mu);
    pid_ = fork();
    if (pid_ == 0) {
      // Async-signal-safe calls only: the parent has threads.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);  // the parent died before prctl
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);  // main.cc blocks SIGTERM for its sigwait
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      execve(argv[0], argv.data(), environ);
      _exit(127);
    }
    close(fds[1]);
    if (pid_ < 0) {
      close(fds[0]);
      return Error{"fork: " + std::string(std::strerror(errno))};
    }
    g_children.insert(pid_);
    fd_ = fds[0];
    reader_ = std::thread([this] { Drain(); });
    return OkStatus();
  }

  pid_t pid() const { return pid_; }

  // The first match of `re` in the output; "" when the child exits or `timeout` passes first.
  std::string WaitFor(const std::regex& re, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    std::smatch m;
    cv_.wait_for(lock, timeout, [&] { return std::regex_search(tail_, m, re) || eof_; });
    if (!std::regex_search(tail_, m, re)) return "";
    return m.size() > 1 ? m[1].str() : m[0].str();
  }

  bool Exited() {
    std::lock_guard<std::mutex> lock(mu_);
    return eof_;
  }

  std::string Tail() {
    std::lock_guard<std::mutex> lock(mu_);
    return tail_.size() > 2000 ? tail_.substr(tail_.size() - 2000) : tail_;
  }

  void Stop() {
    if (pid_ > 0) {
      {
        std::lock_guard<std::mutex> lock(g_children_mu);
        kill(pid_, SIGKILL);
        g_children.erase(pid_);
      }
      int status = 0;
      waitpid(pid_, &status, 0);
      pid_ = -1;
    }
    if (reader_.joinable()) reader_.join();
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    if (log_ != nullptr) std::fclose(log_);
    log_ = nullptr;
  }

 private:
  void Drain() {
    char buf[4096];
    for (;;) {
      ssize_t n = read(fd_, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      std::lock_guard<std::mutex> lock(mu_);
      if (n <= 0) {
        eof_ = true;
        cv_.notify_all();
        return;
      }
      std::fwrite(buf, 1, static_cast<size_t>(n), log_);
      std::fflush(log_);
      tail_.append(buf, static_cast<size_t>(n));
      if (tail_.size() > 65536) tail_.erase(0, tail_.size() - 32768);
      cv_.notify_all();
    }
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  FILE* log_ = nullptr;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string tail_;
  bool eof_ = false;
};

// /proc/<pid>/status "VmHWM:" or "VmRSS:" in MiB; 0 when unreadable.
double ProcStatusMiB(pid_t pid, std::string_view key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      return std::strtod(line.c_str() + key.size() + 1, nullptr) / 1024.0;  // kB
    }
  }
  return 0;
}

// user + system CPU seconds of `pid` from /proc/<pid>/stat (fields 14 and 15); 0 when unreadable.
double ProcCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream fields(text.substr(paren + 2));
  std::string f;
  double ticks = 0;
  for (int i = 3; i <= 15 && (fields >> f); ++i) {
    if (i >= 14) ticks += std::strtod(f.c_str(), nullptr);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string SelfDir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

// Creates `objs` (nodes first: is_node(i)) over `threads` clients; keeps each answer in `out`.
Status CreateAll(const k8s::RestConfig& cfg, const std::vector<json>& objs, size_t node_count,
                 int threads, std::vector<json>* out) {
  out->assign(objs.size(), json());
  std::atomic<size_t> next{0};
  std::mutex err_mu;
  std::string first_error;
  auto work = [&] {
    k8s::Client client(cfg);
    for (size_t i = next++; i < objs.size(); i = next++) {
      const bool node = i < node_count;
      auto r = node ? client.Create(res::kNodes, "", objs[i])
                    : client.Create(res::kPods, kNamespace, objs[i]);
      if (!r) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (first_error.empty()) {
          first_error = "create " + Quote(k8s::Name(objs[i])) + ": " + r.error().ToString();
        }
        next = objs.size();
        return;
      }
      (*out)[i] = std::move(*r);
    }
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < std::max(1, threads); ++t) workers.emplace_back(work);
  for (std::thread& w : workers) w.join();
  if (!first_error.empty()) return Error{first_error};
  return OkStatus();
}

// What the device plugin would answer the scheduler's Requesting: Reported_<now>, on every node
// whose handshake asks. One LIST per pass; runs until `stop`.
class HandshakeAnswerer {
 public:
  explicit HandshakeAnswerer(const k8s::RestConfig& cfg) : client_(cfg) {}
  ~HandshakeAnswerer() { Stop(); }

  void Start(std::chrono::seconds period) {
    thread_ = std::thread([this, period] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!stop_) {
        lock.unlock();
        Pass();
        lock.lock();
        cv_.wait_for(lock, period, [this] { return stop_; });
      }
    });
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // One pass: answers every node whose handshake reads Requesting. Returns how many it answered.
  int Pass() {
    k8s::ListOptions opts;
    opts.limit = 500;
    auto nodes = client_.ListAll(res::kNodes, "", opts);
    if (!nodes) return 0;
    int answered = 0;
    for (const json& node : nodes->items) {
      auto hs = k8s::Annotation(node, protocol::kNvidiaHandshakeKey);
      if (!hs || hs->find("Requesting") == std::string::npos) continue;
      json patch;
      patch["metadata"]["annotations"][std::string(protocol::kNvidiaHandshakeKey)] =
          protocol::FormatHandshake(protocol::HandshakeKind::kReported,
                                    std::chrono::system_clock::now(), Zone::Local());
      if (client_.Patch(res::kNodes, "", k8s::Name(node), k8s::PatchType::kMerge, patch)) {
        ++answered;
      }
    }
    return answered;
  }

 private:
  k8s::Client client_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

std::unique_ptr<httplib::Client> NewHttp(int port) {
  auto http = std::make_unique<httplib::Client>("127.0.0.1", port);
  http->set_keep_alive(true);
  http->set_tcp_nodelay(true);  // as kube-scheduler's Go client: Nagle off
  http->set_connection_timeout(std::chrono::seconds(5));
  http->set_read_timeout(std::chrono::seconds(60));
  http->set_write_timeout(std::chrono::seconds(60));
  return http;
}

// The extender's answer: `error` for a transport failure, an HTTP status or its Error field.
std::string ExtenderError(const httplib::Result& r, std::string_view verb, json* body) {
  const std::string what = std::string(verb) + ": ";
  if (!r) return what + httplib::to_string(r.error());
  if (r->status != 200) return what + "HTTP " + std::to_string(r->status);
  auto parsed = ParseJson(r->body);
  if (!parsed || !parsed->is_object()) return what + "answer is not a JSON object";
  *body = std::move(*parsed);
  const json* e = scheduler::FindKeyInsensitive(*body, "Error");
  return e != nullptr && e->is_string() && !e->get<std::string>().empty()
             ? what + e->get<std::string>()
             : "";
}

// The bind side: a pool of workers, binds to one node in the order they were handed over.
class Binder {
 public:
  Binder(int port, const k8s::RestConfig& cfg, int workers) : port_(port), client_(cfg) {
    for (int i = 0; i < std::max(1, workers); ++i) threads_.emplace_back([this] { Worker(); });
  }
  ~Binder() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  struct Task {
    std::string name, uid, node;
  };

  void Submit(Task task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++pending_;
      if (!busy_.insert(task.node).second) {
        per_node_[task.node].push_back(std::move(task));
        return;
      }
      queue_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

  // Waits until every submitted bind has settled; false at `deadline`.
  bool WaitIdle(SteadyClock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    return done_cv_.wait_until(lock, deadline, [this] { return pending_ == 0; });
  }

  // Read after WaitIdle.
  std::vector<double> latencies_ms;
  std::vector<std::string> errors;
  int bound = 0;
  int failed = 0;
  SteadyClock::time_point last_done{};

 private:
  void Worker() {
    std::unique_ptr<httplib::Client> http = NewHttp(port_);
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      Task task = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      std::string error;
      const double ms = Bind(*http, task, &error);
      lock.lock();
      latencies_ms.push_back(ms);
      if (error.empty()) {
        ++bound;
      } else {
        ++failed;
        if (errors.size() < 5) errors.push_back("pod " + Quote(task.name) + ": " + error);
      }
      last_done = SteadyClock::now();
      auto it = per_node_.find(task.node);
      if (it == per_node_.end() || it->second.empty()) {
        busy_.erase(task.node);
        if (it != per_node_.end()) per_node_.erase(it);
      } else {
        queue_.push_back(std::move(it->second.front()));
        it->second.pop_front();
        cv_.notify_one();
      }
      if (--pending_ == 0) done_cv_.notify_all();
    }
  }

  // POST /bind, then what the device plugin's Allocate writes: the slices consumed, bind-phase
  // success and the node lock released. Returns the /bind round trip in ms.
  double Bind(httplib::Client& http, const Task& task, std::string* error) {
    const std::string body = json{
        {"PodName", task.name},
        {"PodNamespace", kNamespace},
        {"PodUID", task.uid},
        {"Node", task.node}}.dump();
    const auto t0 = SteadyClock::now();
    auto r = http.Post("/bind", body, "application/json");
    const double ms = MsBetween(t0, SteadyClock::now());
    json answer;
    *error = ExtenderError(r, "/bind", &answer);
    if (!error->empty()) return ms;
    json patch;
    patch["metadata"]["annotations"] = {{std::string(protocol::kNvidiaToAllocateKey), ";"},
                                        {std::string(protocol::kBindPhaseKey), "success"}};
    auto patched = k8s::RetryTransient<json>([&] {
      return client_.Patch(res::kPods, kNamespace, task.name, k8s::PatchType::kMerge, patch);
    });
    if (!patched) {
      *error = "allocation patch: " + patched.error().ToString();
      return ms;
    }
    if (Status s = nodelock::Release(client_, task.node, kNamespace, task.name); !s) {
      *error = "node lock release: " + s.error();
    }
    return ms;
  }

  const int port_;
  k8s::Client client_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  std::deque<Task> queue_;
  std::map<std::string, std::deque<Task>> per_node_;
  std::set<std::string> busy_;
  int pending_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

void Progress(const LoadgenOptions& o, const std::string& line) {
  if (o.progress) o.progress(line);
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

}  // namespace

OvercommitCount CountOvercommit(const std::vector<json>& nodes, const std::vector<json>& pods) {
  struct Gpu {
    std::string node;
    int64_t mem_cap = 0, core_cap = 0, slot_cap = 0;
    int64_t mem = 0, cores = 0, slots = 0;
  };
  OvercommitCount out;
  std::map<std::string, Gpu> gpus;
  for (const json& node : nodes) {
    auto value = k8s::Annotation(node, protocol::kNvidiaRegisterKey);
    if (!value) continue;
    auto devices = protocol::DecodeNodeRegister(*value);
    if (!devices) continue;
    for (const protocol::DeviceInfo& d : *devices) {
      gpus[d.id] = Gpu{
          .node = k8s::Name(node), .mem_cap = d.devmem, .core_cap = d.devcore, .slot_cap = d.count};
    }
  }
  out.gpus = static_cast<int>(gpus.size());
  for (const json& pod : pods) {
    if (k8s::FieldString(pod, "spec.nodeName").empty()) continue;
    const std::string phase = k8s::FieldString(pod, "status.phase");
    if (phase == "Succeeded" || phase == "Failed") continue;
    auto value = k8s::Annotation(pod, protocol::kNvidiaAllocatedKey);
    if (!value) continue;
    auto devices = protocol::DecodePodDevices(*value);
    if (!devices) continue;
    for (const protocol::ContainerDevices& ctr : *devices) {
      for (const protocol::ContainerDevice& d : ctr) {
        auto it = gpus.find(d.uuid);
        if (it == gpus.end()) {
          ++out.unknown;
          continue;
        }
        it->second.mem += d.usedmem;
        it->second.cores += d.usedcores;
        it->second.slots += 1;
      }
    }
  }
  for (const auto& [uuid, g] : gpus) {
    std::vector<std::string> why;
    if (g.mem > g.mem_cap) {
      why.push_back("memory " + std::to_string(g.mem) + " > " + std::to_string(g.mem_cap));
    }
    if (g.cores > g.core_cap) {
      why.push_back("cores " + std::to_string(g.cores) + " > " + std::to_string(g.core_cap));
    }
    if (g.slots > g.slot_cap) {
      why.push_back("pods " + std::to_string(g.slots) + " > " + std::to_string(g.slot_cap));
    }
    if (why.empty()) continue;
    ++out.overcommitted;
    out.details.push_back(g.node + "/" + uuid + ": " + Join(why, ", "));
  }
  return out;
}

std::vector<pid_t> LoadgenChildren() {
  std::lock_guard<std::mutex> lock(g_children_mu);
  return {g_children.begin(), g_children.end()};
}

void KillLoadgenChildren() {
  std::lock_guard<std::mutex> lock(g_children_mu);
  for (pid_t pid : g_children) kill(pid, SIGKILL);
}

Result<LoadgenReport> RunLoadgen(const LoadgenOptions& o) {
  if (o.nodes < 1) return Error{"--nodes " + std::to_string(o.nodes) + ": want at least 1"};
  if (o.bound_pods < 0 || o.pods < 1) {
    return Error{"--bound-pods/--pods " + std::to_string(o.bound_pods) + "/" +
                 std::to_string(o.pods) + ": want >= 0 and >= 1"};
  }
  // The bound pods must fit: 10 slices and 81920 MiB per GPU, 4000 MiB each.
  if (o.bound_pods > o.nodes * kGpusPerNode * (kSplit - 1)) {
    return Error{"--bound-pods " + std::to_string(o.bound_pods) + ": more than " +
                 std::to_string(o.nodes * kGpusPerNode * (kSplit - 1)) + " fit on " +
                 std::to_string(o.nodes) + " nodes"};
  }
  const auto deadline = SteadyClock::now() + o.timeout;
  const std::string bin = o.bin_dir.empty() ? SelfDir() : o.bin_dir;
  const std::string sim_bin = bin + "/hami-sim";
  const std::string sched_bin = bin + "/hami-scheduler";
  for (const std::string& b : {sim_bin, sched_bin}) {
    if (access(b.c_str(), X_OK) != 0) return Error{"binary " + Quote(b) + ": not executable"};
  }
  std::string work = o.work_dir;
  bool remove_work = false;
  if (work.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "hami-loadgen-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) return Error{"mkdtemp " + Quote(tmpl) + ": failed"};
    work = tmpl;
    remove_work = true;
  } else {
    std::error_code ec;
    fs::create_directories(work, ec);
    if (ec) return Error{"--work-dir " + Quote(work) + ": " + ec.message()};
  }
  struct Cleanup {
    std::string dir;
    bool remove;
    ~Cleanup() {
      std::error_code ec;
      if (remove) fs::remove_all(dir, ec);
    }
  } cleanup{work, remove_work};

  LoadgenReport rep;
  rep.nodes = o.nodes;
  rep.bound_pods = o.bound_pods;
  rep.pods = o.pods;

  // 1. The API server.
  Child api;
  const std::string kubeconfig = work + "/kubeconfig";
  if (Status s = api.Start(
          {sim_bin, "apiserver", "--listen", "127.0.0.1:0", "--kubeconfig-out", kubeconfig},
          work + "/apiserver.log");
      !s) {
    return Error{"hami-sim apiserver: " + s.error()};
  }
  if (api.WaitFor(std::regex("listening on (\\S+)"), std::chrono::seconds(30)).empty()) {
    return Error{"hami-sim apiserver did not start: " + api.Tail()};
  }
  auto cfg = k8s::LoadKubeconfigFile(kubeconfig);
  if (!cfg) return Error{"kubeconfig " + Quote(kubeconfig) + ": " + cfg.error()};
  cfg->qps = 0;  // unthrottled: the figures are the servers', not a client limiter's
  Progress(o, "hami-sim apiserver (pid " + std::to_string(api.pid()) + ") on " + cfg->server);

  // 2. Pre-load: nodes, bound pods, and the new pods (pending, as the webhook leaves them).
  const std::string handshake =
      protocol::FormatHandshake(o.answer_handshakes ? protocol::HandshakeKind::kReported
                                                    : protocol::HandshakeKind::kRequesting,
                                std::chrono::system_clock::now(), Zone::Local());
  std::vector<json> objs;
  objs.reserve(static_cast<size_t>(o.nodes + o.bound_pods + o.pods));
  for (int n = 0; n < o.nodes; ++n) objs.push_back(MakeNode(n, handshake));
  for (int p = 0; p < o.bound_pods; ++p) objs.push_back(MakeBoundPod(p, o.nodes));
  for (int i = 0; i < o.pods; ++i) objs.push_back(MakePendingPod("new-" + std::to_string(i)));
  Progress(o, "pre-loading " + std::to_string(o.nodes) + " nodes x 8 GPUs, " +
                  std::to_string(o.bound_pods) + " bound pods and " + std::to_string(o.pods) +
                  " new pods");
  const auto populate_start = SteadyClock::now();
  std::vector<json> created;
  if (Status s = CreateAll(*cfg, objs, static_cast<size_t>(o.nodes), o.populate_threads, &created);
      !s) {
    return Error{"pre-load: " + s.error()};
  }
  rep.populate_seconds = MsBetween(populate_start, SteadyClock::now()) / 1000;
  std::vector<std::string> node_names;
  for (int n = 0; n < o.nodes; ++n) node_names.push_back(NodeName(n));
  std::vector<json> new_pods(created.end() - o.pods, created.end());
  objs.clear();
  objs.shrink_to_fit();
  created.clear();
  created.shrink_to_fit();

  // 3. The scheduler, and its first sync.
  Child sched;
  std::vector<std::string> args = {sched_bin,
                                   "--kubeconfig",
                                   kubeconfig,
                                   "--http_bind",
                                   "127.0.0.1:0",
                                   "--metrics-bind-address",
                                   "127.0.0.1:0",
                                   "--node-scheduler-policy",
                                   o.node_policy,
                                   "--kube-qps",
                                   "0"};
  args.insert(args.end(), o.scheduler_flags.begin(), o.scheduler_flags.end());
  const auto sched_start = SteadyClock::now();
  if (Status s = sched.Start(args, work + "/scheduler.log"); !s) {
    return Error{"hami-scheduler: " + s.error()};
  }
  const std::string port_text =
      sched.WaitFor(std::regex("serving on port (\\d+)\\D"),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::max(deadline - SteadyClock::now(), SteadyClock::duration(0))));
  auto port = ParseInt32(port_text);
  if (!port) return Error{"hami-scheduler did not start: " + sched.Tail()};
  Progress(o, "hami-scheduler (pid " + std::to_string(sched.pid()) + ") on port " + port_text +
                  ", waiting for its first sync");
  {
    std::unique_ptr<httplib::Client> probe = NewHttp(*port);
    while (true) {
      auto r = probe->Get("/readyz");
      if (r && r->status == 200) break;
      if (sched.Exited()) return Error{"hami-scheduler exited: " + sched.Tail()};
      if (SteadyClock::now() > deadline) return Error{"hami-scheduler not ready before timeout"};
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a start-up poll, not timing
    }
  }
  rep.sync_seconds = MsBetween(sched_start, SteadyClock::now()) / 1000;
  rep.scheduler_sync_cpu_seconds = ProcCpuSeconds(sched.pid());
  rep.scheduler_synced_rss_mib = ProcStatusMiB(sched.pid(), "VmHWM:");
  Progress(o, "hami-scheduler ready after " + Fixed(rep.sync_seconds, 2) + " s (" +
                  Fixed(rep.scheduler_sync_cpu_seconds, 2) + " s CPU)");

  // The device plugins' side of the handshake: answer the scheduler's Requesting now and then.
  HandshakeAnswerer answerer(*cfg);
  if (o.answer_handshakes) {
    answerer.Pass();
    answerer.Start(std::chrono::seconds(10));
  }

  // 4. The drive: serial filters, concurrent binds.
  const size_t want = KubeSchedulerCandidates(node_names.size());
  rep.candidates_per_filter = want;
  Progress(o, "scheduling " + std::to_string(o.pods) + " pods (" + std::to_string(want) +
                  " candidate nodes per filter, " + std::to_string(o.bind_workers) +
                  " bind workers)");
  std::vector<double> filter_ms;
  filter_ms.reserve(static_cast<size_t>(o.pods));
  std::vector<std::string> errors;
  int filter_failed = 0;
  const double sched_cpu0 = ProcCpuSeconds(sched.pid());
  const double api_cpu0 = ProcCpuSeconds(api.pid());
  SteadyClock::time_point drive_start;
  {
    Binder binder(*port, *cfg, o.bind_workers);
    std::unique_ptr<httplib::Client> http = NewHttp(*port);
    size_t next_start = 0;
    drive_start = SteadyClock::now();
    for (const json& pod : new_pods) {
      json names = json::array();
      for (size_t i = 0; i < want; ++i) {
        names.push_back(node_names[(next_start + i) % node_names.size()]);
      }
      next_start = (next_start + want) % node_names.size();
      const std::string body =
          json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", std::move(names)}}.dump();
      const auto t0 = SteadyClock::now();
      auto r = http->Post("/filter", body, "application/json");
      filter_ms.push_back(MsBetween(t0, SteadyClock::now()));
      json answer;
      std::string error = ExtenderError(r, "/filter", &answer);
      std::string chosen;
      if (error.empty()) {
        const json* chosen_names = scheduler::FindKeyInsensitive(answer, "NodeNames");
        if (chosen_names != nullptr && chosen_names->is_array() && !chosen_names->empty() &&
            (*chosen_names)[0].is_string()) {
          chosen = (*chosen_names)[0].get<std::string>();
        } else {
          error = "/filter: no node fits";
        }
      }
      if (!error.empty()) {
        ++filter_failed;
        if (errors.size() < 5) errors.push_back("pod " + Quote(k8s::Name(pod)) + ": " + error);
        continue;
      }
      binder.Submit({k8s::Name(pod), k8s::Uid(pod), chosen});
      if (SteadyClock::now() > deadline) break;
    }
    if (!binder.WaitIdle(deadline)) return Error{"binds still running at the timeout"};
    const SteadyClock::time_point end = std::max(binder.last_done, drive_start);
    rep.wall_seconds = MsBetween(drive_start, end) / 1000;
    rep.pods_bound = binder.bound;
    rep.pods_failed = filter_failed + binder.failed;
    errors.insert(errors.end(), binder.errors.begin(), binder.errors.end());
    rep.bind_latency_p50_ms = Percentile(binder.latencies_ms, 50);
    rep.bind_latency_p99_ms = Percentile(binder.latencies_ms, 99);
  }
  answerer.Stop();
  const double pods_done = std::max(1, rep.pods_bound);
  rep.scheduler_cpu_ms_per_pod = (ProcCpuSeconds(sched.pid()) - sched_cpu0) * 1000 / pods_done;
  rep.apiserver_cpu_ms_per_pod = (ProcCpuSeconds(api.pid()) - api_cpu0) * 1000 / pods_done;
  rep.pods_per_second = rep.wall_seconds > 0 ? rep.pods_bound / rep.wall_seconds : 0;
  rep.filter_latency_p50_ms = Percentile(filter_ms, 50);
  rep.filter_latency_p99_ms = Percentile(filter_ms, 99);
  rep.filter_latency_max_ms = Percentile(filter_ms, 100);
  rep.errors = std::move(errors);
  rep.scheduler_peak_rss_mib = ProcStatusMiB(sched.pid(), "VmHWM:");
  rep.scheduler_rss_mib = ProcStatusMiB(sched.pid(), "VmRSS:");
  rep.apiserver_peak_rss_mib = ProcStatusMiB(api.pid(), "VmHWM:");
  sched.Stop();  // its figures are read; nothing may change the pods while they are counted

  // 5. Over-commit, from the objects.
  k8s::Client client(*cfg);
  k8s::ListOptions page;
  page.limit = 500;
  auto nodes = client.ListAll(res::kNodes, "", page);
  auto pods = client.ListAll(res::kPods, "", page);
  if (!nodes || !pods) {
    return Error{"final LIST: " + (nodes ? pods.error() : nodes.error()).ToString()};
  }
  for (const json& node : nodes->items) {
    if (k8s::Annotation(node, protocol::kNvidiaHandshakeKey) != handshake) {
      ++rep.nodes_handshake_changed;
    }
  }
  const OvercommitCount oc = CountOvercommit(nodes->items, pods->items);
  rep.gpus = oc.gpus;
  rep.overcommitted_devices = oc.overcommitted;
  rep.unknown_device_allocations = oc.unknown;
  for (size_t i = 0; i < oc.details.size() && rep.errors.size() < 10; ++i) {
    rep.errors.push_back("over-committed: " + oc.details[i]);
  }
  Progress(o, "done: " + std::to_string(rep.pods_bound) + " pods bound in " +
                  Fixed(rep.wall_seconds, 2) + " s");
  return rep;
}

json LoadgenReportToJson(const LoadgenReport& r) {
  return json{{"nodes", r.nodes},
              {"gpus", r.gpus},
              {"bound_pods", r.bound_pods},
              {"pods", r.pods},
              {"candidates_per_filter", r.candidates_per_filter},
              {"pods_bound", r.pods_bound},
              {"pods_failed", r.pods_failed},
              {"errors", r.errors},
              {"populate_seconds", r.populate_seconds},
              {"sync_seconds", r.sync_seconds},
              {"scheduler_sync_cpu_seconds", r.scheduler_sync_cpu_seconds},
              {"nodes_handshake_changed", r.nodes_handshake_changed},
              {"wall_seconds", r.wall_seconds},
              {"pods_per_second", r.pods_per_second},
              {"filter_latency_p50_ms", r.filter_latency_p50_ms},
              {"filter_latency_p99_ms", r.filter_latency_p99_ms},
              {"filter_latency_max_ms", r.filter_latency_max_ms},
              {"bind_latency_p50_ms", r.bind_latency_p50_ms},
              {"bind_latency_p99_ms", r.bind_latency_p99_ms},
              {"scheduler_peak_rss_mib", r.scheduler_peak_rss_mib},
              {"scheduler_rss_mib", r.scheduler_rss_mib},
              {"scheduler_synced_rss_mib", r.scheduler_synced_rss_mib},
              {"apiserver_peak_rss_mib", r.apiserver_peak_rss_mib},
              {"scheduler_cpu_ms_per_pod", r.scheduler_cpu_ms_per_pod},
              {"apiserver_cpu_ms_per_pod", r.apiserver_cpu_ms_per_pod},
              {"overcommitted_devices", r.overcommitted_devices},
              {"unknown_device_allocations", r.unknown_device_allocations}};
}

}  // namespace hami::sim
