// A small Kubernetes REST client over libcurl. One Client is shared by a whole process: it is
// thread-safe, reuses connections (a pool of curl handles), throttles with a QPS/burst token
// bucket, and returns API failures as ApiError values carrying the server's Status.
#ifndef HAMI_K8S_CLIENT_H_
#define HAMI_K8S_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "k8s/api_error.h"
#include "k8s/kubeconfig.h"
#include "k8s/object.h"

namespace hami::k8s {

// A resource collection: group, version, plural, scope.
struct Resource {
  std::string group;  // "" = core
  std::string version;
  std::string plural;
  bool namespaced = true;

  // "/api/v1/namespaces/<ns>/pods/<name>/<subresource>"; parts left empty are omitted
  // (an empty `ns` on a namespaced resource addresses all namespaces).
  std::string Path(std::string_view ns, std::string_view name = "",
                   std::string_view subresource = "") const;
};

namespace resources {
extern const Resource kPods;
extern const Resource kNodes;
extern const Resource kNamespaces;
extern const Resource kConfigMaps;
extern const Resource kSecrets;
extern const Resource kEvents;  // core/v1
extern const Resource kResourceQuotas;
extern const Resource kServices;
extern const Resource kLeases;    // coordination.k8s.io/v1
extern const Resource kEventsV1;  // events.k8s.io/v1
// resource.k8s.io/v1 (DRA, docs/DRA.md).
extern const Resource kDeviceClasses;
extern const Resource kResourceSlices;
extern const Resource kResourceClaims;
extern const Resource kResourceClaimTemplates;
}  // namespace resources

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 0;  // page size; 0 = everything in one response
  std::string continue_token;
  std::string resource_version;
};

struct ObjectList {
  std::vector<Json> items;
  std::string resource_version;
  std::string continue_token;  // non-empty when more pages follow
};

enum class PatchType { kMerge, kStrategicMerge, kJsonPatch };

struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // "" or "0": the server first sends ADDED for what exists
  bool allow_bookmarks = true;
  int64_t timeout_seconds = 0;  // server-side end of the stream; 0 = server default
};

struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED, BOOKMARK
  Json object;
};

class Client {
 public:
  // `clock` drives the rate limiter and must outlive the client.
  explicit Client(RestConfig config, const Clock& clock = RealClock());
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const RestConfig& config() const { return config_; }

  ApiResult<Json> Get(const Resource& r, std::string_view ns, std::string_view name);
  // One page (or everything when options.limit is 0).
  ApiResult<ObjectList> List(const Resource& r, std::string_view ns, const ListOptions& options);
  // Follows continue tokens until the last page; options.limit is the page size.
  ApiResult<ObjectList> ListAll(const Resource& r, std::string_view ns, ListOptions options);
  ApiResult<Json> Create(const Resource& r, std::string_view ns, const Json& obj);
  // PUT to the object's own namespace/name. Its metadata.resourceVersion, when set, is a
  // precondition: a stale one gets 409 Conflict.
  ApiResult<Json> Update(const Resource& r, const Json& obj);
  ApiResult<Json> UpdateStatus(const Resource& r, const Json& obj);
  ApiResult<Json> Patch(const Resource& r, std::string_view ns, std::string_view name,
                        PatchType type, const Json& patch, std::string_view subresource = "");
  // `resource_version` non-empty: delete only that version (409 otherwise).
  ApiStatus Delete(const Resource& r, std::string_view ns, std::string_view name,
                   std::string_view resource_version = "");
  // POST pods/<pod>/binding. 409 when the pod is already bound, or when `uid` is set and the pod
  // of that name has another UID (a Binding's metadata.uid is a precondition).
  ApiStatus Bind(std::string_view ns, std::string_view pod, std::string_view node,
                 std::string_view uid = "");
  // Whether pod ns/pod is bound to `node` now (and has UID `uid`, when set). After a Bind that
  // failed the Binding may still be written: its answer was lost, or a retry of it got 409
  // "already assigned". A GET, retried on transient errors (RetryTransient); false when it fails.
  bool BoundTo(std::string_view ns, std::string_view pod, std::string_view node,
               std::string_view uid = "");
  // Creates a core/v1 Event about `involved` (type "Normal" or "Warning"). A repeat of an Event
  // this client created (same component, object, type, reason and message) raises that Event's
  // count and lastTimestamp instead (k8s/event_correlator.h); the answer is the patched Event.
  ApiResult<Json> RecordEvent(const Json& involved, std::string_view type, std::string_view reason,
                              std::string_view message, std::string_view component);

  // Opens a watch and calls `on_event` for each event until it returns false, `cancel` turns
  // true (checked at least once a second), or the stream ends. Returns OK when the stream ended
  // or was stopped; an ERROR event or failed request becomes the error (410 Expired => relist).
  ApiStatus Watch(const Resource& r, std::string_view ns, const WatchOptions& options,
                  const std::function<bool(const WatchEvent&)>& on_event,
                  const std::atomic<bool>* cancel = nullptr);

  // A raw request: `path` includes the query string. Returns the body of a 2xx answer.
  ApiResult<std::string> Request(std::string_view method, std::string_view path,
                                 std::string_view body = "",
                                 std::string_view content_type = "application/json");

 private:
  class Impl;
  RestConfig config_;
  std::unique_ptr<Impl> impl_;
};

// Calls `fn` again while it fails with 409 Conflict, up to `attempts` calls in all. `fn` must
// re-read the object each time (client-go's retry.RetryOnConflict).
template <typename T>
ApiResult<T> RetryOnConflict(int attempts, const std::function<ApiResult<T>()>& fn) {
  for (int i = 1;; ++i) {
    ApiResult<T> r = fn();
    if (r.ok() || !IsConflict(r.error()) || i >= attempts) return r;
  }
}

// Calls `fn` again while it fails with a transient error (IsTransient), up to `attempts` calls in
// all, waiting `backoff` before the first retry and twice as long before each next one
// (client-go's retry.OnError). For writes that may be repeated: merge patches, preconditioned
// JSON patches.
template <typename T>
ApiResult<T> RetryTransient(int attempts, std::chrono::milliseconds backoff,
                            const std::function<ApiResult<T>()>& fn);

// The retry both binaries put around an API call on their request paths (the extender's Bind,
// the device plugin's Allocate, the node-lock release): 4 calls in all, 50, 100 and 200 ms apart.
// Those paths get no second chance from their caller (kubelet does not call Allocate again; a
// lock left behind blocks the node for 5 minutes), so a transient error is worth about 350 ms.
inline constexpr int kDefaultRetryAttempts = 4;
inline constexpr std::chrono::milliseconds kDefaultRetryBackoff{50};

// The retry policy for transient API errors on the request paths, as a value: every node-lock
// call (nodelock/) takes one, so a caller that waits on a fake clock can pass a `sleep` that
// records the waits instead of spending them. Default-constructed: the default policy above.
struct RetryPolicy {
  int attempts = kDefaultRetryAttempts;                      // calls in all, the first included
  std::chrono::milliseconds backoff = kDefaultRetryBackoff;  // before the first retry; doubled
  // Spends each wait between tries; empty: std::this_thread::sleep_for.
  std::function<void(std::chrono::milliseconds)> sleep;
};

// RetryTransient under `policy`.
template <typename T>
ApiResult<T> RetryTransient(const RetryPolicy& policy, const std::function<ApiResult<T>()>& fn) {
  std::chrono::milliseconds backoff = policy.backoff;
  for (int i = 1;; ++i) {
    ApiResult<T> r = fn();
    if (r.ok() || !IsTransient(r.error()) || i >= policy.attempts) return r;
    if (policy.sleep) {
      policy.sleep(backoff);
    } else {
      std::this_thread::sleep_for(backoff);
    }
    backoff *= 2;
  }
}

template <typename T>
ApiResult<T> RetryTransient(int attempts, std::chrono::milliseconds backoff,
                            const std::function<ApiResult<T>()>& fn) {
  return RetryTransient<T>(RetryPolicy{attempts, backoff, nullptr}, fn);
}

// RetryTransient with the default policy above.
template <typename T>
ApiResult<T> RetryTransient(const std::function<ApiResult<T>()>& fn) {
  return RetryTransient<T>(RetryPolicy{}, fn);
}

// URL query escaping (RFC 3986 unreserved characters pass through).
std::string QueryEscape(std::string_view s);

}  // namespace hami::k8s

#endif  // HAMI_K8S_CLIENT_H_
