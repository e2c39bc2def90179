#include "deviceplugin/plugin.h"

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "common/log.h"
#include "deviceplugin/allocator.h"
#include "deviceplugin/register.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace hami::deviceplugin {

std::vector<AdvertisedDevice> Advertise(const std::vector<GpuDevice>& gpus, int32_t split) {
  std::vector<AdvertisedDevice> out;
  for (const GpuDevice& g : gpus) {
    for (int32_t i = 0; i < split; ++i) {
      out.push_back({g.uuid + "-" + std::to_string(i), g.healthy, g.numa});
    }
  }
  return out;
}

namespace {

// Identity of a socket file: a re-created file has a new inode or change time.
struct FileId {
  ino_t ino = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileId&) const = default;
};

std::optional<FileId> Identify(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_ino,
                static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
}

// Whether a unix socket can be bound at `path`, with the OS error when not: gRPC's BuildAndStart
// only says that it failed. The probe's file is removed again.
Status ProbeListen(const std::string& path) {
  auto fail = [&](int err) { return Error{"cannot serve on " + path + ": " + std::strerror(err)}; };
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return fail(ENAMETOOLONG);
  std::memcpy(addr.sun_path, path.data(), path.size());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(errno);
  int rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  int err = errno;
  ::close(fd);
  if (rc != 0) return fail(err);
  ::unlink(path.c_str());
  return OkStatus();
}

std::vector<std::vector<std::string>> Ids(
    const google::protobuf::RepeatedPtrField<v1beta1::ContainerAllocateRequest>& requests) {
  std::vector<std::vector<std::string>> out;
  for (const auto& r : requests) out.emplace_back(r.devices_ids().begin(), r.devices_ids().end());
  return out;
}

void Fill(const ContainerAllocation& a, v1beta1::ContainerAllocateResponse* out) {
  for (const auto& [k, v] : a.envs) (*out->mutable_envs())[k] = v;
  for (const auto& [k, v] : a.annotations) (*out->mutable_annotations())[k] = v;
  for (const MountSpec& m : a.mounts) {
    auto* mount = out->add_mounts();
    mount->set_container_path(m.container_path);
    mount->set_host_path(m.host_path);
    mount->set_read_only(m.read_only);
  }
  for (const std::string& name : a.cdi_devices) out->add_cdi_devices()->set_name(name);
}

}  // namespace

class Plugin::Impl {
 public:
  Impl(PluginOptions options, RegisterPublisher* publisher, Allocator* allocator)
      : options_(std::move(options)), publisher_(publisher), allocator_(allocator) {
    socket_ =
        (std::filesystem::path(options_.kubelet_socket).parent_path() / options_.endpoint).string();
  }

  // The gRPC service; a fresh one per server start.
  class Service final : public v1beta1::DevicePlugin::Service {
   public:
    explicit Service(Impl* impl) : impl_(impl) {}
    grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                        v1beta1::DevicePluginOptions* out) override {
      out->set_get_preferred_allocation_available(true);
      return grpc::Status::OK;
    }
    grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty*,
                              grpc::ServerWriter<v1beta1::ListAndWatchResponse>* w) override {
      return impl_->ListAndWatch(ctx, w);
    }
    grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                        const v1beta1::PreferredAllocationRequest* req,
                                        v1beta1::PreferredAllocationResponse* out) override {
      std::vector<std::vector<std::string>> available;
      std::vector<int32_t> sizes;
      for (const auto& r : req->container_requests()) {
        available.emplace_back(r.available_deviceids().begin(), r.available_deviceids().end());
        sizes.push_back(r.allocation_size());
      }
      for (const auto& ids : impl_->allocator_->Prefer(available, sizes)) {
        auto* c = out->add_container_responses();
        for (const std::string& id : ids) c->add_deviceids(id);
      }
      return grpc::Status::OK;
    }
    grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* req,
                          v1beta1::AllocateResponse* out) override {
      auto r = impl_->allocator_->Allocate(Ids(req->container_requests()));
      if (!r) return grpc::Status(grpc::StatusCode::UNKNOWN, r.error());
      for (const ContainerAllocation& a : *r) Fill(a, out->add_container_responses());
      return grpc::Status::OK;
    }
    grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                   v1beta1::PreStartContainerResponse*) override {
      return grpc::Status::OK;
    }

   private:
    Impl* impl_;
  };

  grpc::Status ListAndWatch(grpc::ServerContext* ctx,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* w) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t epoch = epoch_;
    bool first = true;
    uint64_t seen = 0;
    while (!stopping_ && epoch_ == epoch && !ctx->IsCancelled()) {
      const uint64_t gen = publisher_->generation();
      if (first || gen != seen) {
        first = false;
        seen = gen;
        lock.unlock();
        const bool ok = w->Write(BuildList());
        lock.lock();
        if (!ok) break;
        continue;
      }
      // Woken by the loop on a change; the timeout only bounds how late a cancel is seen.
      cv_.wait_for(lock, std::chrono::milliseconds(200));
    }
    return grpc::Status::OK;
  }

  v1beta1::ListAndWatchResponse BuildList() const {
    v1beta1::ListAndWatchResponse resp;
    for (const AdvertisedDevice& a : Advertise(publisher_->devices(), options_.split_count)) {
      auto* d = resp.add_devices();
      d->set_id(a.id);
      d->set_health(a.healthy ? "Healthy" : "Unhealthy");
      if (options_.numa_topology) d->mutable_topology()->add_nodes()->set_id(a.numa);
    }
    return resp;
  }

  Status StartServer() {
    ::unlink(socket_.c_str());
    if (Status probe = ProbeListen(socket_); !probe) return probe;
    auto service = std::make_unique<Service>(this);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(service.get());
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (!server) return Error{"cannot serve on " + socket_};
    server_ = std::move(server);
    service_ = std::move(service);
    return OkStatus();
  }

  void StopServer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++epoch_;
    }
    cv_.notify_all();
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
      server_.reset();
      service_.reset();
    }
    ::unlink(socket_.c_str());
  }

  Status Register() {
    auto channel = grpc::CreateChannel("unix://" + options_.kubelet_socket,
                                       grpc::InsecureChannelCredentials());
    auto stub = v1beta1::Registration::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1beta1::RegisterRequest req;
    req.set_version(kApiVersion);
    req.set_endpoint(options_.endpoint);
    req.set_resource_name(options_.resource_name);
    req.mutable_options()->set_get_preferred_allocation_available(options_.preferred_allocation);
    v1beta1::Empty resp;
    grpc::Status s = stub->Register(&ctx, req, &resp);
    if (!s.ok()) {
      return Error{"register " + options_.resource_name + " with " + options_.kubelet_socket +
                   ": " + s.error_message()};
    }
    registrations_.fetch_add(1);
    HAMI_INFO("registered {} with kubelet at {}", options_.resource_name, options_.kubelet_socket);
    return OkStatus();
  }

  // One pass of the background loop.
  void Step() {
    const uint64_t before = publisher_->generation();
    if (auto r = publisher_->Tick(); !r) HAMI_ERROR("node register: {}", r.error());
    if (publisher_->generation() != before) cv_.notify_all();
    if (options_.tick) options_.tick();

    if (!Identify(socket_)) {
      HAMI_WARN("plugin socket {} is gone; restarting the server", socket_);
      StopServer();
      if (Status s = StartServer(); !s) HAMI_ERROR("{}", s.error());
      registered_for_.reset();
    }
    const auto kubelet = Identify(options_.kubelet_socket);
    if (!kubelet || (registered_for_ && *registered_for_ == *kubelet)) return;
    if (registered_for_) {  // kubelet restarted: serve afresh, then register again
      HAMI_INFO("kubelet socket {} was re-created", options_.kubelet_socket);
      StopServer();
      if (Status s = StartServer(); !s) HAMI_ERROR("{}", s.error());
      registered_for_.reset();
    }
    if (Status s = Register(); !s) {
      HAMI_WARN("{}", s.error());
      return;
    }
    registered_for_ = kubelet;
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(loop_mu_);
    while (!loop_stop_) {
      lock.unlock();
      Step();
      lock.lock();
      loop_cv_.wait_for(lock, options_.poll_interval, [this] { return loop_stop_; });
    }
  }

  // Serves first: a node's GPUs are published only once kubelet can reach the plugin for them.
  Status Start() {
    if (Status s = StartServer(); !s) return s;
    if (auto r = publisher_->Tick(); !r) HAMI_ERROR("node register: {}", r.error());
    if (auto kubelet = Identify(options_.kubelet_socket)) {
      if (Status s = Register(); s) {
        registered_for_ = kubelet;
      } else {
        HAMI_WARN("{}", s.error());
      }
    }
    thread_ = std::thread([this] { Loop(); });
    return OkStatus();
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(loop_mu_);
      loop_stop_ = true;
    }
    loop_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    StopServer();
  }

  PluginOptions options_;
  RegisterPublisher* publisher_;
  Allocator* allocator_;
  std::string socket_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Service> service_;
  std::optional<FileId> registered_for_;  // kubelet socket we registered with (loop only)
  std::atomic<int> registrations_{0};

  std::mutex mu_;  // guards epoch_, stopping_; cv_ wakes ListAndWatch streams
  std::condition_variable cv_;
  uint64_t epoch_ = 0;
  bool stopping_ = false;

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool loop_stop_ = false;
  std::thread thread_;
};

Plugin::Plugin(PluginOptions options, RegisterPublisher* publisher, Allocator* allocator)
    : impl_(std::make_unique<Impl>(std::move(options), publisher, allocator)) {}

Plugin::~Plugin() { Stop(); }

Status Plugin::Start() { return impl_->Start(); }

void Plugin::Stop() { impl_->Stop(); }

std::string Plugin::socket_path() const { return impl_->socket_; }

int Plugin::registrations() const { return impl_->registrations_.load(); }

}  // namespace hami::deviceplugin
