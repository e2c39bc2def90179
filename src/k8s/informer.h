// An informer: list + watch of one resource into a thread-safe cache, with add/update/delete
// handlers, a synced signal and periodic resync (client-go's SharedInformer, simplified).
//
// Run() lists, then watches from the list's resourceVersion. A dropped stream re-watches from the
// last resourceVersion seen (bookmarks advance it) after a backoff; 410 Gone relists, and the
// relist turns differences into the matching add/update/delete calls.
#ifndef HAMI_K8S_INFORMER_H_
#define HAMI_K8S_INFORMER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "k8s/client.h"

namespace hami::k8s {

using ObjectRef = std::shared_ptr<const Json>;

struct InformerOptions {
  std::string ns;  // "" = all namespaces
  std::string label_selector;
  std::string field_selector;  // e.g. "spec.nodeName=node-a" for a node's pods
  int64_t page_size = 500;     // list page size
  // Calls on_update(obj, obj) for every cached object this often; 0 = never. Checked on the
  // informer thread whenever an event or bookmark arrives or a stream ends, so the period is
  // honoured to within the server's bookmark interval.
  std::chrono::milliseconds resync_period{0};
  std::chrono::milliseconds backoff_initial{100};
  std::chrono::milliseconds backoff_max{5000};
  // Server-side watch timeout per stream, so streams are renewed now and then.
  int64_t watch_timeout_seconds = 300;
  // Applied to every object before it is cached (client-go's SetTransform): drop what the
  // consumer never reads to keep a large cache small. Must keep metadata name, namespace and
  // resourceVersion.
  std::function<Json(Json)> transform;
  // Keep cached objects as compact JSON text (about 1.2x the wire size instead of ~8x for parsed
  // objects) and parse on Get()/List(). For large caches read mostly through the handlers.
  bool compact = false;
  // The list+watch thread (named after the resource, e.g. "informer-pods") runs this much nicer
  // than the process (common/thread.h): 0 keeps its priority.
  int nice = 0;
};

struct InformerHandlers {
  std::function<void(const ObjectRef&)> on_add;
  std::function<void(const ObjectRef& old_obj, const ObjectRef& new_obj)> on_update;
  std::function<void(const ObjectRef&)> on_delete;
};

class Informer {
 public:
  // `client` must outlive the informer. Handlers run on the informer's thread, one at a time,
  // after the cache already reflects the event.
  Informer(Client& client, Resource resource, InformerOptions options, InformerHandlers handlers);
  ~Informer();  // Stop()s
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Starts the list+watch thread. Call once.
  void Start();
  // Ends the thread (within about a second: the watch checks for cancellation that often).
  void Stop();

  // True once the first list is in the cache.
  bool HasSynced() const;
  // Waits for HasSynced() up to `timeout`; false if it did not happen or the informer stopped.
  bool WaitForSync(std::chrono::milliseconds timeout) const;

  // Cache reads: snapshots of immutable objects, safe to keep. In compact mode every call parses.
  ObjectRef Get(const std::string& key) const;  // "ns/name" or "name"; null when absent
  std::vector<ObjectRef> List() const;
  size_t Size() const;
  // The resourceVersion the cache reflects.
  std::string LastResourceVersion() const;

  // Counters for tests and metrics.
  int relists() const { return relists_.load(); }
  int watch_restarts() const { return watch_restarts_.load(); }

 private:
  void Run();
  // Lists everything and replaces the cache; false when the list failed.
  bool Relist();
  // One watch stream; returns false when the next step is a relist (410). *progressed: it
  // delivered at least one event.
  bool WatchOnce(bool* progressed);
  void Apply(const WatchEvent& e);
  void MaybeResync();
  bool SleepFor(std::chrono::milliseconds d);  // false when stopped meanwhile

  Client& client_;
  const Resource resource_;
  const InformerOptions options_;
  const InformerHandlers handlers_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  // One cached object: parsed (`obj`), or in compact mode only its text (`raw`).
  struct Cached {
    ObjectRef obj;
    std::string raw;
    std::string rv;
  };
  Cached Freeze(const ObjectRef& obj) const;
  static ObjectRef Thaw(const Cached& c);

  std::unordered_map<std::string, Cached> cache_;
  std::string rv_;
  bool synced_ = false;

  std::atomic<bool> stop_{false};
  std::atomic<int> relists_{0};
  std::atomic<int> watch_restarts_{0};
  std::chrono::steady_clock::time_point next_resync_;
  std::thread thread_;
};

}  // namespace hami::k8s

#endif  // HAMI_K8S_INFORMER_H_
