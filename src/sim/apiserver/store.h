// The sim apiserver's in-memory storage: objects per resource type, one cluster-wide
// monotonically increasing resourceVersion, and a bounded event log that watches read from.
// Thread-safe: every method may be called from any thread.
#ifndef HAMI_SIM_STORE_H_
#define HAMI_SIM_STORE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "k8s/api_error.h"
#include "k8s/selector.h"
#include "sim/apiserver/resources.h"

namespace hami::sim {

using Json = nlohmann::json;

// One version of one object. `raw` is `json.dump()`, computed once so that lists and watch
// fan-out copy bytes instead of re-serialising.
struct StoredObject {
  Json json;
  std::string raw;
  int64_t rv = 0;
  SystemTime written{};  // when this version was stored (the store's clock)
};
using ObjectPtr = std::shared_ptr<const StoredObject>;

enum class EventType { kAdded, kModified, kDeleted };
const char* EventTypeName(EventType t);

struct StoreEvent {
  EventType type = EventType::kAdded;
  int64_t rv = 0;
  const ResourceType* resource = nullptr;
  std::string ns;
  ObjectPtr object;    // the new state; for kDeleted the last state at the deletion's rv
  ObjectPtr previous;  // the state before; null for kAdded
};

struct ListFilter {
  k8s::LabelSelector labels;
  k8s::FieldSelector fields;
  bool Matches(const Json& obj) const { return labels.MatchesObject(obj) && fields.Matches(obj); }
};

struct ListPage {
  std::vector<ObjectPtr> items;
  int64_t rv = 0;
  std::string continue_token;  // empty on the last page
  int64_t remaining = 0;       // matching items after this page
};

struct DeletePreconditions {
  std::string uid;
  std::string resource_version;
};

// Limits kube-apiserver enforces that the store enforces too.
// metadata.annotations, keys and values together (apimachinery TotalAnnotationSizeLimitB).
inline constexpr size_t kMaxAnnotationBytes = 256 * 1024;
// How long an Event lives after its last write (kube-apiserver's --event-ttl default).
inline constexpr std::chrono::hours kEventTtl{1};

class Store {
 public:
  // `event_window`: how many events watches can resume from; older resourceVersions get 410.
  // `clock` must outlive the store.
  explicit Store(const Clock& clock, size_t event_window = 10000);
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // `ns` is the namespace from the URL ("" for cluster-scoped types). Fills uid,
  // creationTimestamp, resourceVersion, kind and apiVersion.
  k8s::ApiResult<ObjectPtr> Create(const ResourceType& type, const std::string& ns, Json obj);
  k8s::ApiResult<ObjectPtr> Get(const ResourceType& type, const std::string& ns,
                                const std::string& name) const;
  // `ns` "" lists every namespace. `limit` 0 = no limit. `continue_token` from a previous page.
  k8s::ApiResult<ListPage> List(const ResourceType& type, const std::string& ns,
                                const ListFilter& filter, int64_t limit,
                                std::string_view continue_token) const;

  // Computes the new object from the current one, under the store lock (so read-modify-write is
  // atomic). A non-empty metadata.resourceVersion in the result must equal the current one (409
  // otherwise). Identity fields (name, namespace, uid, creationTimestamp) cannot change. A result
  // equal to the current object is a no-op: no new resourceVersion, no event.
  using Mutation = std::function<k8s::ApiResult<Json>(const Json& current)>;
  k8s::ApiResult<ObjectPtr> Update(const ResourceType& type, const std::string& ns,
                                   const std::string& name, const Mutation& mutate);

  // Deleting a namespace deletes everything in it first.
  //
  // Every write (Create, Update, Delete) first deletes the Events whose kEventTtl has passed on
  // the clock, each with a DELETED watch event; Get and List never return an expired Event.
  // Create and Update refuse metadata.annotations over kMaxAnnotationBytes with 422.
  k8s::ApiResult<ObjectPtr> Delete(const ResourceType& type, const std::string& ns,
                                   const std::string& name, const DeletePreconditions& pre);

  int64_t resource_version() const;

  struct WatchBatch {
    std::vector<StoreEvent> events;  // of `type` (and `ns` unless "") after `since`
    int64_t cursor = 0;              // pass as `since` next time
  };
  // Waits up to `wait` for any event after `since`, then returns the matching ones. 410 Expired
  // when events after `since` have already left the window. Returns at once after Shutdown().
  k8s::ApiResult<WatchBatch> WaitEvents(const ResourceType& type, const std::string& ns,
                                        int64_t since, std::chrono::milliseconds wait) const;

  // Forgets the watch history, as a restarted kube-apiserver's watch cache starts at the current
  // resourceVersion: a watch from an older one gets 410 Expired (a client relists). The objects
  // stay (etcd keeps them).
  void CompactHistory();

  // Wakes every waiter; later waits return immediately.
  void Shutdown();
  bool shut_down() const;
  // The clock the store stamps objects with (Table ages are measured on it).
  const Clock& clock() const { return clock_; }

 private:
  using Objects = std::map<std::string, ObjectPtr>;  // by ObjectKey

  Objects& ObjectsOf(const ResourceType& type) { return data_[&type]; }
  const Objects* FindObjects(const ResourceType& type) const;
  // Under mu_: the entry (key, object) of type/ns/name, or nullptr when there is none.
  Objects::value_type* FindLocked(const ResourceType& type, const std::string& ns,
                                  const std::string& name);
  ObjectPtr Freeze(Json obj, int64_t rv) const;
  void Emit(EventType type, const ResourceType& resource, const std::string& ns, ObjectPtr obj,
            ObjectPtr previous);
  std::string NewUid();
  std::string Now() const;
  ObjectPtr DeleteLocked(const ResourceType& type, const std::string& key, const ObjectPtr& cur);
  bool Expired(const ResourceType& type, const StoredObject& obj) const;
  // Under mu_: deletes the Events whose TTL has passed.
  void ExpireEventsLocked();

  const Clock& clock_;
  const size_t event_window_;
  mutable std::mutex mu_;
  // Watchers wait on their type's variable, so a node write wakes only node watchers (a burst
  // writes pods and nodes at thousands per second). Entries are created under mu_, never erased.
  std::condition_variable& CvOf(const ResourceType& type) const { return cvs_[&type]; }
  mutable std::unordered_map<const ResourceType*, std::condition_variable> cvs_;
  // Under mu_: the variables Emit owes a notify_all. A write holds mu_ through a WriteLock, which
  // notifies them after unlocking: a watcher woken while the writer still held mu_ only went
  // back to sleep on it (two futex calls and two context switches more per write).
  std::vector<std::condition_variable*> to_notify_;
  class WriteLock {
   public:
    explicit WriteLock(Store& store) : store_(store), lock_(store.mu_) {}
    ~WriteLock();
    WriteLock(const WriteLock&) = delete;
    WriteLock& operator=(const WriteLock&) = delete;

   private:
    Store& store_;
    std::unique_lock<std::mutex> lock_;
  };
  // Under mu_: the rv of the latest event of each type.
  std::unordered_map<const ResourceType*, int64_t> type_rv_;
  std::unordered_map<const ResourceType*, Objects> data_;
  std::deque<StoreEvent> log_;
  int64_t rv_ = 0;
  int64_t evicted_rv_ = 0;  // highest rv no longer in log_
  bool shutdown_ = false;
  // Under mu_: one entry per Event write, in write order (so in expiry order); an entry whose rv
  // is no longer the object's was superseded by a later write.
  struct EventWrite {
    SystemTime at;
    const ResourceType* type;
    std::string key;
    int64_t rv;
  };
  std::deque<EventWrite> event_writes_;
  std::mt19937_64 rng_;
};

// A metav1.Status error body for `e`.
Json StatusJson(const k8s::ApiError& e);
// The 404 a missing object gets: pods "x" not found.
k8s::ApiError NotFoundError(const ResourceType& type, const std::string& name);

}  // namespace hami::sim

#endif  // HAMI_SIM_STORE_H_
