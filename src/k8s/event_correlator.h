// Folds repeated Events into one, as client-go's EventCorrelator does (its EventLogger): an
// Event with the same source, involved object, type, reason and message as one this process
// created before is not created again; that Event's count and lastTimestamp are raised instead.
// A node with a bad annotation then shows one Warning whose count grows every pass, not a new
// Event every 15 s. Keys are remembered for the last 4096 distinct Events (client-go's cache
// size), the least recently seen forgotten first.
#ifndef HAMI_K8S_EVENT_CORRELATOR_H_
#define HAMI_K8S_EVENT_CORRELATOR_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace hami::k8s {

class EventCorrelator {
 public:
  static constexpr size_t kDefaultCapacity = 4096;

  explicit EventCorrelator(size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  // The Event created earlier under `key`, its count already raised by one for this repeat;
  // nullopt when `key` is new. Thread-safe.
  struct Repeat {
    std::string ns;
    std::string name;
    int64_t count = 0;
  };
  std::optional<Repeat> Observe(const std::string& key);

  // Records that Event `ns`/`name` was created for `key` (count 1). Thread-safe.
  void Created(const std::string& key, std::string ns, std::string name);

  // Drops `key`, e.g. when its Event is gone (expired) and must be created afresh.
  void Forget(const std::string& key);

  size_t size() const;

 private:
  struct Entry {
    Repeat event;
    std::list<std::string>::iterator age;
  };
  size_t capacity_;
  mutable std::mutex mu_;
  std::list<std::string> lru_;  // front: most recently seen
  std::unordered_map<std::string, Entry> entries_;
};

// The correlation key: source component, involved object (kind, namespace, name, uid), type,
// reason and message, each prefixed with its length so no field can pass for another.
std::string EventKey(std::string_view component, std::string_view kind, std::string_view ns,
                     std::string_view name, std::string_view uid, std::string_view type,
                     std::string_view reason, std::string_view message);

}  // namespace hami::k8s

#endif  // HAMI_K8S_EVENT_CORRELATOR_H_
