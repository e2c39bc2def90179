#include "k8s/event_correlator.h"

namespace hami::k8s {

std::optional<EventCorrelator::Repeat> EventCorrelator::Observe(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second.age);
  ++it->second.event.count;
  return it->second.event;
}

void EventCorrelator::Created(const std::string& key, std::string ns, std::string name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.age);
    it->second.event = Repeat{std::move(ns), std::move(name), 1};
    return;
  }
  lru_.push_front(key);
  entries_.emplace(key, Entry{Repeat{std::move(ns), std::move(name), 1}, lru_.begin()});
  while (entries_.size() > capacity_) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
}

void EventCorrelator::Forget(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  lru_.erase(it->second.age);
  entries_.erase(it);
}

size_t EventCorrelator::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

std::string EventKey(std::string_view component, std::string_view kind, std::string_view ns,
                     std::string_view name, std::string_view uid, std::string_view type,
                     std::string_view reason, std::string_view message) {
  std::string key;
  for (std::string_view part : {component, kind, ns, name, uid, type, reason, message}) {
    // Length-prefixed, so no field's content can be mistaken for a separator.
    key += std::to_string(part.size());
    key += ':';
    key += part;
  }
  return key;
}

}  // namespace hami::k8s
