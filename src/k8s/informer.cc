#include "k8s/informer.h"

#include "common/log.h"
#include "common/thread.h"

namespace hami::k8s {

Informer::Informer(Client& client, Resource resource, InformerOptions options,
                   InformerHandlers handlers)
    : client_(client),
      resource_(std::move(resource)),
      options_(std::move(options)),
      handlers_(std::move(handlers)) {}

Informer::~Informer() { Stop(); }

void Informer::Start() {
  thread_ = std::thread([this] {
    NameThisThread("informer-" + resource_.plural);
    if (Status s = LowerThisThreadPriority(options_.nice); !s) {
      HAMI_WARN("informer {}: {}", resource_.plural, s.error());
    }
    Run();
  });
}

void Informer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Informer::HasSynced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return synced_;
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return synced_ || stop_; }) && synced_;
}

Informer::Cached Informer::Freeze(const ObjectRef& obj) const {
  if (!options_.compact) return Cached{obj, "", ResourceVersion(*obj)};
  return Cached{nullptr, obj->dump(), ResourceVersion(*obj)};
}

// c.raw is our own dump of a value ParseJson already bounded, so it is parsed directly.
ObjectRef Informer::Thaw(const Cached& c) {
  if (c.obj) return c.obj;
  return std::make_shared<const Json>(Json::parse(c.raw, nullptr, /*allow_exceptions=*/false));
}

ObjectRef Informer::Get(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  return it == cache_.end() ? nullptr : Thaw(it->second);
}

std::vector<ObjectRef> Informer::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ObjectRef> out;
  out.reserve(cache_.size());
  for (const auto& [key, c] : cache_) out.push_back(Thaw(c));
  return out;
}

size_t Informer::Size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

std::string Informer::LastResourceVersion() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rv_;
}

bool Informer::SleepFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, d, [&] { return stop_.load(); });
}

void Informer::Run() {
  auto backoff = options_.backoff_initial;
  next_resync_ = std::chrono::steady_clock::now() + options_.resync_period;
  bool need_list = true;
  while (!stop_) {
    if (need_list) {
      if (!Relist()) {
        if (!SleepFor(backoff)) return;
        backoff = std::min(backoff * 2, options_.backoff_max);
        continue;
      }
      need_list = false;
      backoff = options_.backoff_initial;
    }
    auto started = std::chrono::steady_clock::now();
    bool progressed = false;
    need_list = !WatchOnce(&progressed);
    if (stop_) return;
    ++watch_restarts_;
    // A stream that delivered events or lived a while was healthy (a dropped connection, a
    // server-side timeout): reconnect at once, from the last resourceVersion. One that died
    // young with nothing means trouble: back off, doubling up to the cap.
    if (progressed || std::chrono::steady_clock::now() - started > std::chrono::seconds(10)) {
      backoff = options_.backoff_initial;
    } else {
      if (!SleepFor(backoff)) return;
      backoff = std::min(backoff * 2, options_.backoff_max);
    }
  }
}

bool Informer::Relist() {
  ListOptions lo;
  lo.label_selector = options_.label_selector;
  lo.field_selector = options_.field_selector;
  lo.limit = options_.page_size;
  // Page by page: each page is transformed and frozen before the next is fetched, so at most
  // one page is held parsed (a first LIST of 100,000 pods held every one of them parsed).
  std::unordered_map<std::string, Cached> fresh;
  std::string rv;
  do {
    auto page = client_.List(resource_, options_.ns, lo);
    if (!page) {
      HAMI_WARN("informer {}: list failed: {}", resource_.plural, page.error().ToString());
      return false;
    }
    if (rv.empty()) rv = page->resource_version;
    fresh.reserve(fresh.size() + page->items.size());
    for (Json& item : page->items) {
      auto obj = std::make_shared<const Json>(
          options_.transform ? options_.transform(std::move(item)) : std::move(item));
      std::string key = ObjectKey(*obj);
      fresh.insert_or_assign(std::move(key), Freeze(obj));
    }
    lo.continue_token = std::move(page->continue_token);
  } while (!lo.continue_token.empty());
  ++relists_;
  std::unordered_map<std::string, Cached> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old.swap(cache_);
    cache_.swap(fresh);
    rv_ = rv;
  }
  // Only this thread writes cache_, so it reads it here unlocked (Get/List only read it). In
  // compact mode each handler call parses the frozen text, one object at a time.
  for (const auto& [key, c] : cache_) {
    auto it = old.find(key);
    if (it == old.end()) {
      if (handlers_.on_add) handlers_.on_add(Thaw(c));
    } else if (it->second.rv != c.rv) {
      if (handlers_.on_update) handlers_.on_update(Thaw(it->second), Thaw(c));
    }
  }
  for (const auto& [key, c] : old) {
    if (!cache_.count(key) && handlers_.on_delete) handlers_.on_delete(Thaw(c));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    synced_ = true;
  }
  cv_.notify_all();
  return true;
}

void Informer::Apply(const WatchEvent& e) {
  std::string rv = ResourceVersion(e.object);
  if (e.type == "BOOKMARK") {
    std::lock_guard<std::mutex> lock(mu_);
    if (!rv.empty()) rv_ = rv;
    return;
  }
  auto obj =
      std::make_shared<const Json>(options_.transform ? options_.transform(e.object) : e.object);
  std::string key = ObjectKey(*obj);
  ObjectRef old;
  bool existed = false;
  bool want_old = handlers_.on_update || handlers_.on_delete;
  Cached frozen = e.type == "DELETED" ? Cached{} : Freeze(obj);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      existed = true;
      if (want_old) old = Thaw(it->second);
    }
    if (e.type == "DELETED") {
      cache_.erase(key);
    } else {
      cache_[key] = std::move(frozen);
    }
    if (!rv.empty()) rv_ = rv;
  }
  if (e.type == "DELETED") {
    if (handlers_.on_delete) handlers_.on_delete(old ? old : obj);
  } else if (existed) {
    if (handlers_.on_update) handlers_.on_update(old, obj);
  } else if (handlers_.on_add) {
    handlers_.on_add(obj);
  }
}

void Informer::MaybeResync() {
  if (options_.resync_period.count() <= 0 || !handlers_.on_update) return;
  auto now = std::chrono::steady_clock::now();
  if (now < next_resync_) return;
  next_resync_ = now + options_.resync_period;
  for (const auto& obj : List()) handlers_.on_update(obj, obj);
}

bool Informer::WatchOnce(bool* progressed) {
  WatchOptions wo;
  wo.label_selector = options_.label_selector;
  wo.field_selector = options_.field_selector;
  wo.resource_version = LastResourceVersion();
  wo.allow_bookmarks = true;
  wo.timeout_seconds = options_.watch_timeout_seconds;
  auto st = client_.Watch(
      resource_, options_.ns, wo,
      [&](const WatchEvent& e) {
        *progressed = true;
        Apply(e);
        MaybeResync();
        return !stop_.load();
      },
      &stop_);
  MaybeResync();
  if (st) return true;
  if (IsGone(st.error())) {
    HAMI_INFO("informer {}: {}; relisting", resource_.plural, st.error().ToString());
    return false;
  }
  // A stream cut after it delivered events resumes at once from the last resourceVersion and
  // loses nothing: worth a line at -v=2, not a warning (under a flaky network or the sim's
  // dropped watches there is one per cut). A stream that failed before any event is a problem.
  if (*progressed) {
    HAMI_VLOG(2, "informer {}: watch cut, resuming: {}", resource_.plural, st.error().ToString());
  } else {
    HAMI_WARN("informer {}: watch ended: {}", resource_.plural, st.error().ToString());
  }
  return true;
}

}  // namespace hami::k8s
