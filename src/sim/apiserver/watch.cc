// The watch verb of the sim apiserver: WatchHub. A watch is a net::Stream; one thread per
// watched resource type waits for that type's events and feeds every watch of the type, so open
// watches cost a connection and a little state each, never a thread or a worker.
#include <algorithm>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/strings.h"
#include "k8s/object.h"
#include "sim/apiserver/handlers.h"

namespace hami::sim {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Initial-list events are written in chunks of about this size.
constexpr size_t kFlushBytes = 256 << 10;
// How often a type's thread looks at its watches without events (timeouts, bookmarks, clients
// gone).
constexpr std::chrono::milliseconds kTick{200};
// The tick while an initial list is still being written.
constexpr std::chrono::milliseconds kShortTick{5};
// The initial list is written while the stream's unsent bytes stay under this.
constexpr size_t kInitialBacklog = 4 << 20;

void AppendEventLine(std::string& out, const char* type, const std::string& object_raw) {
  out += R"({"type":")";
  out += type;
  out += R"(","object":)";
  out += object_raw;
  out += "}\n";
}

std::string EventLine(const char* type, const std::string& object_raw) {
  std::string line;
  AppendEventLine(line, type, object_raw);
  return line;
}

// The event a filtered watcher sees for `e`, or nullptr for none: objects entering the filter
// are ADDED, objects leaving it are DELETED (as kube-apiserver does).
const char* FilteredType(const StoreEvent& e, const ListFilter& filter) {
  bool now = filter.Matches(e.object->json);
  bool before = e.previous != nullptr && filter.Matches(e.previous->json);
  switch (e.type) {
    case EventType::kAdded:
      return now ? "ADDED" : nullptr;
    case EventType::kDeleted:
      return before ? "DELETED" : nullptr;
    case EventType::kModified:
      if (now && before) return "MODIFIED";
      if (now) return "ADDED";
      if (before) return "DELETED";
      return nullptr;
  }
  return nullptr;
}

// One open watch. Step() runs on the type's thread, or once on the worker that started it;
// `mu` keeps them apart.
struct Watch {
  const ResourceType* type = nullptr;
  std::string ns;
  ListFilter filter;
  bool bookmarks = false;
  SteadyClock::time_point deadline;
  net::Stream stream;

  std::mutex mu;
  // resourceVersion "" or "0": the objects to send as ADDED before any event, sent a piece at a
  // time as the client reads them (a large list never sits whole in the connection's buffer).
  std::vector<ObjectPtr> initial;
  size_t initial_sent = 0;
  int64_t cursor = 0;  // every event up to here was sent (or filtered out)
  int sent = 0;
  SteadyClock::time_point next_bookmark;
  bool done = false;
};

}  // namespace

class WatchHub::Impl {
 public:
  Impl(Store& store, std::chrono::milliseconds bookmark_interval, int drop_watch_every)
      : store_(store), bookmark_interval_(bookmark_interval), drop_every_(drop_watch_every) {}

  // The watches of one type and what its thread last saw.
  struct Type {
    std::thread thread;
    std::vector<std::shared_ptr<Watch>> watches;  // under Impl::mu_
    // Under Impl::mu_: the store's resourceVersion when the thread last read the type's
    // events, and the rv of the newest event of the type it saw then. A watch whose cursor is
    // at least `latest` has nothing to read up to `seen`.
    int64_t seen = 0;
    int64_t latest = 0;
  };

  void Add(std::shared_ptr<Watch> w) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) {
        w->stream.End();
        return;
      }
      Type& t = types_[w->type];
      t.watches.push_back(w);
      if (!t.thread.joinable()) {
        t.seen = t.latest = store_.resource_version();  // unknown: read before skipping
        const ResourceType* type = w->type;
        t.thread = std::thread([this, type] { Run(*type); });
      }
    }
    // Events that arrived after the type's thread took its snapshot of the watches: a later
    // event wakes the thread, and this catches up on the earlier ones.
    Step(*w, /*force=*/true);
  }

  void Run(const ResourceType& type) {
    int64_t since = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      since = types_[&type].seen;
    }
    bool more = false;  // an initial list is still being written: come back soon
    while (!stopping_.load()) {
      auto batch = store_.WaitEvents(type, "", since, more ? kShortTick : kTick);
      if (stopping_.load() || store_.shut_down()) break;
      std::vector<std::shared_ptr<Watch>> watches;
      {
        std::lock_guard<std::mutex> lock(mu_);
        Type& t = types_[&type];
        if (batch) {
          since = batch->cursor;
          if (!batch->events.empty()) t.latest = std::max(t.latest, batch->events.back().rv);
        } else {
          since = store_.resource_version();  // fell out of the window: read every watch
          t.latest = since;
        }
        t.seen = since;
        // Drop the finished ones.
        auto& ws = t.watches;
        ws.erase(std::remove_if(ws.begin(), ws.end(),
                                [](const std::shared_ptr<Watch>& w) {
                                  std::lock_guard<std::mutex> wl(w->mu);
                                  return w->done;
                                }),
                 ws.end());
        watches = ws;
      }
      more = false;
      for (const auto& w : watches) more |= Step(*w, /*force=*/false);
      if (stopping_.load()) break;
    }
  }

  // Sends what `w` has to send; true when part of its initial list is still to go.
  bool Step(Watch& w, bool force) {
    // Read before taking w.mu: the order of the locks is mu_, then a watch's.
    int64_t seen = 0, latest = 0;
    {
      std::lock_guard<std::mutex> l(mu_);
      const Type& t = types_[w.type];
      seen = t.seen;
      latest = t.latest;
    }
    std::lock_guard<std::mutex> lock(w.mu);
    if (w.done) return false;
    if (!w.stream.open()) {
      w.done = true;
      return false;
    }
    const auto now = SteadyClock::now();
    if (now >= w.deadline || stopping_.load()) {
      w.stream.End();
      w.done = true;
      return false;
    }
    if (w.initial_sent < w.initial.size()) {
      std::string lines;
      while (w.initial_sent < w.initial.size() && w.stream.backlog() < kInitialBacklog) {
        AppendEventLine(lines, "ADDED", w.initial[w.initial_sent++]->raw);
        if (lines.size() >= kFlushBytes || w.initial_sent == w.initial.size()) {
          if (!w.stream.Write(lines)) {
            w.done = true;
            return false;
          }
          lines.clear();
        }
      }
      if (!lines.empty() && !w.stream.Write(lines)) {
        w.done = true;
        return false;
      }
      if (w.initial_sent < w.initial.size()) return true;  // the rest once the client read more
      w.initial.clear();
      w.initial.shrink_to_fit();
      force = true;  // the events since the list
    }
    if (!force && w.cursor >= latest) {
      // No event of the type after the cursor up to `seen`: move on without reading, so that an
      // idle watch never falls behind the event window.
      w.cursor = std::max(w.cursor, seen);
    } else {
      auto batch = store_.WaitEvents(*w.type, w.ns, w.cursor, std::chrono::milliseconds(0));
      if (!batch) {
        w.stream.Write(EventLine("ERROR", StatusJson(batch.error()).dump()));
        w.stream.End();
        w.done = true;
        return false;
      }
      // One write (one chunk) per batch rather than per event: under a burst every watcher is
      // behind on many events, and per-event writes dominated its cost.
      std::string lines;
      bool drop = false;
      for (const auto& e : batch->events) {
        const char* type = FilteredType(e, w.filter);
        if (type == nullptr) continue;
        AppendEventLine(lines, type, e.object->raw);
        if (drop_every_ > 0 && ++w.sent >= drop_every_) {
          drop = true;
          break;
        }
      }
      if (!lines.empty() && !w.stream.Write(lines)) {
        w.done = true;
        return false;
      }
      if (drop) {
        w.stream.Abort();  // the injected fault: the stream breaks without its end
        w.done = true;
        return false;
      }
      w.cursor = batch->cursor;
    }
    if (w.bookmarks && now >= w.next_bookmark) {
      Json obj = {{"kind", w.type->kind},
                  {"apiVersion", w.type->ApiVersion()},
                  {"metadata", {{"resourceVersion", std::to_string(w.cursor)}}}};
      if (!w.stream.Write(EventLine("BOOKMARK", obj.dump()))) {
        w.done = true;
        return false;
      }
      w.next_bookmark = now + bookmark_interval_;
    }
    return false;
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      stopped_ = true;
      stopping_ = true;
    }
    // The threads wake within a tick (or at once after Store::Shutdown()).
    for (auto& [type, t] : types_) {
      if (t.thread.joinable()) t.thread.join();
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [type, t] : types_) {
      for (const auto& w : t.watches) {
        std::lock_guard<std::mutex> wl(w->mu);
        if (!w->done) w->stream.End();
        w->done = true;
      }
      t.watches.clear();
    }
  }

  size_t open() const {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& [type, t] : types_) {
      for (const auto& w : t.watches) {
        std::lock_guard<std::mutex> wl(w->mu);
        if (!w->done && w->stream.open()) ++n;
      }
    }
    return n;
  }

  Store& store_;
  const std::chrono::milliseconds bookmark_interval_;
  const int drop_every_;
  mutable std::mutex mu_;
  std::map<const ResourceType*, Type> types_;  // never erased: the threads hold references
  bool stopped_ = false;
  std::atomic<bool> stopping_{false};
};

WatchHub::WatchHub(Store& store, std::chrono::milliseconds bookmark_interval, int drop_watch_every)
    : impl_(std::make_unique<Impl>(store, bookmark_interval, drop_watch_every)) {}
WatchHub::~WatchHub() { Stop(); }
void WatchHub::Stop() { impl_->Stop(); }
size_t WatchHub::open() const { return impl_->open(); }

void WatchHub::Serve(const ResourceType& type, const std::string& ns, ListFilter filter,
                     const ApiRequest& req, const net::Responder& reply) {
  auto w = std::make_shared<Watch>();
  w->type = &type;
  w->ns = ns;
  w->filter = std::move(filter);
  bool initial_list = false;  // resourceVersion "" or "0": send the current objects first
  std::string rv = req.Param("resourceVersion");
  if (rv.empty() || rv == "0") {
    initial_list = true;
  } else {
    auto parsed = k8s::ParseResourceVersion(rv);
    if (!parsed) {
      reply.Send(ErrorResponse(k8s::ApiError{400, k8s::kReasonBadRequest,
                                             "resourceVersion " + Quote(rv) + ": not a number"}));
      return;
    }
    w->cursor = *parsed;
  }
  std::string b = req.Param("allowWatchBookmarks");
  w->bookmarks = b == "true" || b == "1";
  // kube-apiserver ends watches after a random 30-60 minutes unless timeoutSeconds is given.
  auto timeout = std::chrono::seconds(1800);
  if (req.HasParam("timeoutSeconds")) {
    auto t = ParseInt64(req.Param("timeoutSeconds"));
    if (!t || *t < 0) {
      reply.Send(
          ErrorResponse(k8s::ApiError{400, k8s::kReasonBadRequest,
                                      "timeoutSeconds " + Quote(req.Param("timeoutSeconds")) +
                                          ": not a non-negative integer"}));
      return;
    }
    if (*t > 0) timeout = std::chrono::seconds(*t);
  }
  const auto now = SteadyClock::now();
  w->deadline = now + timeout;
  w->next_bookmark = now + impl_->bookmark_interval_;
  w->stream = reply.StartStream(200, "application/json;stream=watch");
  if (initial_list) {
    auto page = impl_->store_.List(type, ns, w->filter, 0, "");
    if (page) {
      w->initial = std::move(page->items);
      w->cursor = page->rv;
    }
  }
  impl_->Add(std::move(w));
}

}  // namespace hami::sim
