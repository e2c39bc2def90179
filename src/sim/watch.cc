// The watch verb of the sim apiserver.
#include <memory>

#include "common/strings.h"
#include "k8s/object.h"
#include "sim/handlers.h"

namespace hami::sim {
namespace {

using Clock = std::chrono::steady_clock;

// Initial-list events are written in chunks of about this size.
constexpr size_t kFlushBytes = 256 << 10;

// Everything a watch stream needs after the handler returns (httplib calls the content provider
// later, on the same worker thread).
struct WatchState {
  Store* store = nullptr;
  HandlerConfig config;
  const ResourceType* type = nullptr;
  std::string ns;
  ListFilter filter;
  bool initial_list = false;  // resourceVersion "" or "0": send the current objects first
  int64_t since = 0;
  bool bookmarks = false;
  Clock::time_point deadline;
};

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

// Runs the stream. Returns false to make httplib drop the connection without a final chunk
// (used for the injected dropped watch).
bool RunWatch(WatchState& w, httplib::DataSink& sink) {
  int sent = 0;
  auto write = [&](const std::string& line) { return sink.write(line.data(), line.size()); };
  int64_t cursor = w.since;
  if (w.initial_list) {
    auto page = w.store->List(*w.type, w.ns, w.filter, 0, "");
    if (page) {
      std::string lines;
      for (const auto& obj : page->items) {
        AppendEventLine(lines, "ADDED", obj->raw);
        if (lines.size() >= kFlushBytes) {
          if (!write(lines)) return false;
          lines.clear();
        }
      }
      if (!lines.empty() && !write(lines)) return false;
      cursor = page->rv;
    }
  }
  auto next_bookmark = Clock::now() + w.config.bookmark_interval;
  while (!(w.config.stopping && w.config.stopping->load()) && Clock::now() < w.deadline) {
    auto wait =
        std::min<Clock::duration>(std::chrono::milliseconds(200), w.deadline - Clock::now());
    auto batch = w.store->WaitEvents(*w.type, w.ns, cursor,
                                     std::chrono::duration_cast<std::chrono::milliseconds>(wait));
    if (!batch) {
      write(EventLine("ERROR", StatusJson(batch.error()).dump()));
      break;
    }
    if (w.store->shut_down()) break;
    // One write (one chunk, one syscall) per batch rather than per event: under a burst every
    // watcher wakes for each event it is behind on, and per-event writes dominated its cost.
    std::string lines;
    bool drop = false;
    for (const auto& e : batch->events) {
      const char* type = FilteredType(e, w.filter);
      if (type == nullptr) continue;
      AppendEventLine(lines, type, e.object->raw);
      if (w.config.drop_watch_every > 0 && ++sent >= w.config.drop_watch_every) {
        drop = true;
        break;
      }
    }
    if (!lines.empty() && !write(lines)) return false;
    if (drop) return false;
    cursor = batch->cursor;
    if (w.bookmarks && Clock::now() >= next_bookmark) {
      Json obj = {{"kind", w.type->kind},
                  {"apiVersion", w.type->ApiVersion()},
                  {"metadata", {{"resourceVersion", std::to_string(cursor)}}}};
      if (!write(EventLine("BOOKMARK", obj.dump()))) return false;
      next_bookmark = Clock::now() + w.config.bookmark_interval;
    }
    if (!sink.is_writable()) return false;
  }
  sink.done();
  return true;
}

}  // namespace

void ServeWatch(Store& store, const HandlerConfig& config, const ResourceType& type,
                const std::string& ns, ListFilter filter, const httplib::Request& req,
                httplib::Response& res) {
  auto w = std::make_shared<WatchState>();
  w->store = &store;
  w->config = config;
  w->type = &type;
  w->ns = ns;
  w->filter = std::move(filter);
  std::string rv = req.get_param_value("resourceVersion");
  if (rv.empty() || rv == "0") {
    w->initial_list = true;
  } else {
    auto parsed = k8s::ParseResourceVersion(rv);
    if (!parsed) {
      return ReplyError(res, k8s::ApiError{400, k8s::kReasonBadRequest,
                                           "resourceVersion " + Quote(rv) + ": not a number"});
    }
    w->since = *parsed;
  }
  std::string b = req.get_param_value("allowWatchBookmarks");
  w->bookmarks = b == "true" || b == "1";
  // kube-apiserver ends watches after a random 30-60 minutes unless timeoutSeconds is given.
  auto timeout = std::chrono::seconds(1800);
  if (req.has_param("timeoutSeconds")) {
    auto t = ParseInt64(req.get_param_value("timeoutSeconds"));
    if (!t || *t < 0) {
      return ReplyError(
          res, k8s::ApiError{400, k8s::kReasonBadRequest,
                             "timeoutSeconds " + Quote(req.get_param_value("timeoutSeconds")) +
                                 ": not a non-negative integer"});
    }
    if (*t > 0) timeout = std::chrono::seconds(*t);
  }
  w->deadline = Clock::now() + timeout;
  res.status = 200;
  // Not plain "application/json": httplib would gzip that for Go clients and, compressing,
  // hold every event back until the stream ends.
  res.set_chunked_content_provider(
      "application/json;stream=watch",
      [w](size_t, httplib::DataSink& sink) { return RunWatch(*w, sink); });
}

}  // namespace hami::sim
