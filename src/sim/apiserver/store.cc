#include "sim/apiserver/store.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <optional>

#include "common/strings.h"
#include "common/uuid.h"
#include "k8s/object.h"
#include "sim/apiserver/dra_validation.h"

namespace hami::sim {
namespace {

using k8s::ApiError;

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
    if (!ok) return false;
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  return alnum(name.front()) && alnum(name.back());
}

// RBAC objects are named by path segment (kube-apiserver's ValidateRBACName), so the bootstrap
// roles can be called system:kube-scheduler.
bool ValidPathSegmentName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of("/%") == std::string_view::npos;
}

ApiError Invalid(const ResourceType& type, const std::string& name, const std::string& detail) {
  return ApiError{422, k8s::kReasonInvalid,
                  type.kind + " " + Quote(name) + " is invalid: " + detail};
}

ApiError BadRequest(std::string message) {
  return ApiError{400, k8s::kReasonBadRequest, std::move(message)};
}

ApiError ConflictError(const ResourceType& type, const std::string& name) {
  return ApiError{409, k8s::kReasonConflict,
                  "Operation cannot be fulfilled on " + type.QualifiedName() + " " + Quote(name) +
                      ": the object has been modified; please apply your changes to the latest "
                      "version and try again"};
}

// Decodes a continue token (the hex-encoded key of the last item returned).
bool DecodeContinue(std::string_view token, std::string& key) {
  if (token.size() % 2 != 0) return false;
  key.clear();
  for (size_t i = 0; i < token.size(); i += 2) {
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    int hi = hex(token[i]);
    int lo = hex(token[i + 1]);
    if (hi < 0 || lo < 0) return false;
    key += static_cast<char>(hi * 16 + lo);
  }
  return true;
}

bool IsEventType(const ResourceType& type) { return type.plural == "events"; }

// metadata.annotations over kMaxAnnotationBytes (keys and values): kube-apiserver's 422.
std::optional<ApiError> CheckAnnotationSize(const ResourceType& type, const std::string& name,
                                            const Json& obj) {
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object()) return std::nullopt;
  auto annotations = meta->find("annotations");
  if (annotations == meta->end() || !annotations->is_object()) return std::nullopt;
  size_t total = 0;
  for (const auto& [k, v] : annotations->items()) {
    total += k.size() + (v.is_string() ? v.get_ref<const std::string&>().size() : 0);
  }
  if (total <= kMaxAnnotationBytes) return std::nullopt;
  return Invalid(type, name,
                 "metadata.annotations: Too long: must have at most " +
                     std::to_string(kMaxAnnotationBytes) + " bytes");
}

// The counter sets that the ResourceSlices in `slices` other than `name` declare for the driver
// and pool of `slice` (what its devices may consume).
CounterSets PoolCounterSets(const std::map<std::string, ObjectPtr>& slices, const Json& slice,
                            const std::string& name) {
  CounterSets sets;
  const std::string driver = k8s::FieldString(slice, "spec.driver");
  const std::string pool = k8s::FieldString(slice, "spec.pool.name");
  for (const auto& [key, other] : slices) {
    if (k8s::Name(other->json) == name || k8s::FieldString(other->json, "spec.driver") != driver ||
        k8s::FieldString(other->json, "spec.pool.name") != pool) {
      continue;
    }
    for (auto& [set, counters] : SharedCounterSets(other->json))
      sets[set].insert(counters.begin(), counters.end());
  }
  return sets;
}

std::string EncodeContinue(std::string_view key) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : key) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

}  // namespace

const char* EventTypeName(EventType t) {
  switch (t) {
    case EventType::kAdded:
      return "ADDED";
    case EventType::kModified:
      return "MODIFIED";
    case EventType::kDeleted:
      return "DELETED";
  }
  return "ERROR";
}

Json StatusJson(const ApiError& e) {
  return Json{{"kind", "Status"},    {"apiVersion", "v1"},   {"metadata", Json::object()},
              {"status", "Failure"}, {"message", e.message}, {"reason", e.reason},
              {"code", e.code}};
}

ApiError NotFoundError(const ResourceType& type, const std::string& name) {
  return ApiError{404, k8s::kReasonNotFound,
                  type.QualifiedName() + " " + Quote(name) + " not found"};
}

Store::Store(const Clock& clock, size_t event_window)
    : clock_(clock),
      event_window_(std::max<size_t>(event_window, 1)),
      rng_(std::random_device{}()) {}

const Store::Objects* Store::FindObjects(const ResourceType& type) const {
  auto it = data_.find(&type);
  return it == data_.end() ? nullptr : &it->second;
}

ObjectPtr Store::Freeze(Json obj, int64_t rv) const {
  auto out = std::make_shared<StoredObject>();
  obj["metadata"]["resourceVersion"] = std::to_string(rv);
  out->raw = obj.dump();
  out->json = std::move(obj);
  out->rv = rv;
  out->written = clock_.Now();
  return out;
}

void Store::Emit(EventType type, const ResourceType& resource, const std::string& ns, ObjectPtr obj,
                 ObjectPtr previous) {
  log_.push_back(StoreEvent{type, obj->rv, &resource, ns, std::move(obj), std::move(previous)});
  while (log_.size() > event_window_) {
    evicted_rv_ = log_.front().rv;
    log_.pop_front();
  }
  type_rv_[&resource] = log_.back().rv;
  std::condition_variable* cv = &CvOf(resource);
  if (std::find(to_notify_.begin(), to_notify_.end(), cv) == to_notify_.end()) {
    to_notify_.push_back(cv);
  }
}

Store::WriteLock::~WriteLock() {
  std::vector<std::condition_variable*> cvs;
  cvs.swap(store_.to_notify_);
  lock_.unlock();
  for (std::condition_variable* cv : cvs) cv->notify_all();
}

std::string Store::NewUid() {
  uint64_t a = rng_();
  uint64_t b = rng_();
  return FormatUuidV4(a, b);
}

std::string Store::Now() const {
  std::time_t t = std::chrono::system_clock::to_time_t(clock_.Now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

k8s::ApiResult<ObjectPtr> Store::Create(const ResourceType& type, const std::string& ns, Json obj) {
  if (!obj.is_object()) return BadRequest("the body must be a JSON object");
  Json& meta = obj["metadata"];
  if (meta.is_null()) meta = Json::object();
  if (!meta.is_object()) return BadRequest("metadata must be an object");
  std::string name = k8s::Name(obj);
  std::string body_ns = k8s::Namespace(obj);
  if (type.namespaced) {
    if (!body_ns.empty() && body_ns != ns) {
      return BadRequest(
          "the namespace of the provided object does not match the namespace "
          "sent on the request");
    }
    meta["namespace"] = ns;
  } else {
    meta.erase("namespace");
  }
  WriteLock lock(*this);
  ExpireEventsLocked();
  if (name.empty()) {
    auto gen = meta.find("generateName");
    if (gen == meta.end() || !gen->is_string() || gen->get<std::string>().empty()) {
      return Invalid(type, "", "metadata.name: Required value: name or generateName is required");
    }
    static const char* kAlphabet = "bcdfghjklmnpqrstvwxz2456789";
    name = gen->get<std::string>();
    for (int i = 0; i < 5; ++i) name += kAlphabet[rng_() % 27];
    meta["name"] = name;
  }
  if (type.group == "rbac.authorization.k8s.io" ? !ValidPathSegmentName(name) : !ValidName(name)) {
    return Invalid(type, name,
                   "metadata.name: Invalid value: " + Quote(name) +
                       ": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                       "characters, '-' or '.'");
  }
  if (type.namespaced) {
    const Objects* namespaces = FindObjects(NamespaceType());
    if (namespaces == nullptr || namespaces->count(ns) == 0) {
      return NotFoundError(NamespaceType(), ns);
    }
  }
  if (auto e = CheckAnnotationSize(type, name, obj)) return *e;
  Objects& objects = ObjectsOf(type);
  if (IsDraType(type)) {
    FieldErrors errors = AdmitDraWrite(type, obj, nullptr, PoolCounterSets(objects, obj, name));
    if (!errors.empty()) return Invalid(type, name, JoinFieldErrors(errors));
  }
  std::string key = k8s::ObjectKey(type.namespaced ? ns : "", name);
  if (objects.count(key)) {
    return ApiError{409, k8s::kReasonAlreadyExists,
                    type.QualifiedName() + " " + Quote(name) + " already exists"};
  }
  obj["kind"] = type.kind;
  obj["apiVersion"] = type.ApiVersion();
  meta["uid"] = NewUid();
  meta["creationTimestamp"] = Now();
  meta.erase("deletionTimestamp");
  if (type.plural == "pods" && type.group.empty()) {
    if (!obj["status"].is_object()) obj["status"] = Json::object();
    if (!obj["status"].contains("phase")) obj["status"]["phase"] = "Pending";
  } else if (&type == &NamespaceType()) {
    obj["status"] = Json{{"phase", "Active"}};
  }
  ObjectPtr stored = Freeze(std::move(obj), ++rv_);
  objects[key] = stored;
  if (IsEventType(type)) event_writes_.push_back({stored->written, &type, key, stored->rv});
  Emit(EventType::kAdded, type, ns, stored, nullptr);
  return stored;
}

k8s::ApiResult<ObjectPtr> Store::Get(const ResourceType& type, const std::string& ns,
                                     const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Objects* objects = FindObjects(type);
  if (objects != nullptr) {
    auto it = objects->find(k8s::ObjectKey(type.namespaced ? ns : "", name));
    if (it != objects->end() && !Expired(type, *it->second)) return it->second;
  }
  return NotFoundError(type, name);
}

k8s::ApiResult<ListPage> Store::List(const ResourceType& type, const std::string& ns,
                                     const ListFilter& filter, int64_t limit,
                                     std::string_view continue_token) const {
  std::string after;
  if (!continue_token.empty() && !DecodeContinue(continue_token, after)) {
    return BadRequest("continue " + Quote(continue_token) + ": not a token this server issued");
  }
  ListPage page;
  std::lock_guard<std::mutex> lock(mu_);
  page.rv = rv_;
  const Objects* objects = FindObjects(type);
  if (objects == nullptr) return page;
  std::string prefix = type.namespaced && !ns.empty() ? ns + "/" : "";
  auto it = after.empty() ? objects->lower_bound(prefix) : objects->upper_bound(after);
  std::string last_key;
  for (; it != objects->end(); ++it) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) break;
    if (!filter.Matches(it->second->json) || Expired(type, *it->second)) continue;
    if (limit > 0 && static_cast<int64_t>(page.items.size()) == limit) {
      ++page.remaining;
      continue;
    }
    page.items.push_back(it->second);
    last_key = it->first;
  }
  if (page.remaining > 0) page.continue_token = EncodeContinue(last_key);
  return page;
}

k8s::ApiResult<ObjectPtr> Store::Update(const ResourceType& type, const std::string& ns,
                                        const std::string& name, const Mutation& mutate) {
  WriteLock lock(*this);
  ExpireEventsLocked();
  Objects::value_type* entry = FindLocked(type, ns, name);
  if (entry == nullptr) return NotFoundError(type, name);
  ObjectPtr cur = entry->second;
  auto next_or = mutate(cur->json);
  if (!next_or) return std::move(next_or).take_error();
  Json next = std::move(*next_or);
  if (!next.is_object()) return BadRequest("the body must be a JSON object");
  Json& meta = next["metadata"];
  if (meta.is_null()) meta = Json::object();
  if (!meta.is_object()) return BadRequest("metadata must be an object");
  std::string new_name = k8s::Name(next);
  if (!new_name.empty() && new_name != name) {
    return BadRequest("the name of the object (" + new_name +
                      ") does not match the name on the URL (" + name + ")");
  }
  std::string rv = k8s::ResourceVersion(next);
  if (meta.contains("resourceVersion") && !meta["resourceVersion"].is_string()) {
    return BadRequest("metadata.resourceVersion must be a string");
  }
  if (!rv.empty()) {
    if (!k8s::ParseResourceVersion(rv)) {
      return BadRequest("metadata.resourceVersion " + Quote(rv) + ": not a resource version");
    }
    if (rv != std::to_string(cur->rv)) return ConflictError(type, name);
  }
  const Json& cur_meta = cur->json["metadata"];
  for (const char* field : {"name", "namespace", "uid", "creationTimestamp"}) {
    if (cur_meta.contains(field)) {
      meta[field] = cur_meta[field];
    } else {
      meta.erase(field);
    }
  }
  next["kind"] = type.kind;
  next["apiVersion"] = type.ApiVersion();
  meta["resourceVersion"] = std::to_string(cur->rv);
  if (IsDraType(type)) {
    FieldErrors errors =
        AdmitDraWrite(type, next, &cur->json, PoolCounterSets(ObjectsOf(type), next, name));
    if (!errors.empty()) return Invalid(type, name, JoinFieldErrors(errors));
  }
  if (next == cur->json) return cur;
  if (auto e = CheckAnnotationSize(type, name, next)) return *e;
  ObjectPtr stored = Freeze(std::move(next), ++rv_);
  entry->second = stored;
  if (IsEventType(type))
    event_writes_.push_back({stored->written, &type, entry->first, stored->rv});
  Emit(EventType::kModified, type, ns, stored, cur);
  return stored;
}

Store::Objects::value_type* Store::FindLocked(const ResourceType& type, const std::string& ns,
                                              const std::string& name) {
  Objects& objects = ObjectsOf(type);
  auto it = objects.find(k8s::ObjectKey(type.namespaced ? ns : "", name));
  return it == objects.end() ? nullptr : &*it;
}

ObjectPtr Store::DeleteLocked(const ResourceType& type, const std::string& key,
                              const ObjectPtr& cur) {
  ObjectPtr gone = Freeze(cur->json, ++rv_);
  ObjectsOf(type).erase(key);
  Emit(EventType::kDeleted, type, type.namespaced ? k8s::Namespace(cur->json) : "", gone, cur);
  return gone;
}

k8s::ApiResult<ObjectPtr> Store::Delete(const ResourceType& type, const std::string& ns,
                                        const std::string& name, const DeletePreconditions& pre) {
  WriteLock lock(*this);
  ExpireEventsLocked();
  Objects::value_type* entry = FindLocked(type, ns, name);
  if (entry == nullptr) return NotFoundError(type, name);
  ObjectPtr cur = entry->second;
  std::string key = entry->first;
  if (!pre.uid.empty() && pre.uid != k8s::Uid(cur->json)) {
    return ApiError{409, k8s::kReasonConflict,
                    "Precondition failed: UID in precondition: " + pre.uid +
                        ", UID in object meta: " + k8s::Uid(cur->json)};
  }
  if (!pre.resource_version.empty() && pre.resource_version != std::to_string(cur->rv)) {
    return ConflictError(type, name);
  }
  if (&type == &NamespaceType()) {
    for (const auto& t : ResourceTypes()) {
      if (!t.namespaced) continue;
      Objects& inner = ObjectsOf(t);
      std::string prefix = name + "/";
      for (auto in = inner.lower_bound(prefix);
           in != inner.end() && in->first.compare(0, prefix.size(), prefix) == 0;) {
        ObjectPtr victim = in->second;
        ++in;
        DeleteLocked(t, k8s::ObjectKey(victim->json), victim);
      }
    }
  }
  return DeleteLocked(type, key, cur);
}

bool Store::Expired(const ResourceType& type, const StoredObject& obj) const {
  return IsEventType(type) && obj.written + kEventTtl <= clock_.Now();
}

void Store::ExpireEventsLocked() {
  SystemTime now = clock_.Now();
  while (!event_writes_.empty() && event_writes_.front().at + kEventTtl <= now) {
    EventWrite w = std::move(event_writes_.front());
    event_writes_.pop_front();
    Objects& objects = ObjectsOf(*w.type);
    auto it = objects.find(w.key);
    if (it == objects.end() || it->second->rv != w.rv) continue;  // rewritten or deleted since
    ObjectPtr cur = it->second;
    DeleteLocked(*w.type, w.key, cur);
  }
}

int64_t Store::resource_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rv_;
}

k8s::ApiResult<Store::WatchBatch> Store::WaitEvents(const ResourceType& type, const std::string& ns,
                                                    int64_t since,
                                                    std::chrono::milliseconds wait) const {
  std::unique_lock<std::mutex> lock(mu_);
  auto expired = [&]() -> ApiError {
    return ApiError{410, k8s::kReasonExpired,
                    "too old resource version: " + std::to_string(since) + " (" +
                        std::to_string(evicted_rv_ + 1) + ")"};
  };
  if (since < evicted_rv_) return expired();
  auto type_rv = [&] {
    auto it = type_rv_.find(&type);
    return it == type_rv_.end() ? 0 : it->second;
  };
  CvOf(type).wait_for(lock, wait, [&] { return shutdown_ || type_rv() > since; });
  if (since < evicted_rv_) return expired();
  WatchBatch batch;
  batch.cursor = std::max(since, rv_);
  auto first = std::lower_bound(log_.begin(), log_.end(), since + 1,
                                [](const StoreEvent& e, int64_t rv) { return e.rv < rv; });
  for (auto it = first; it != log_.end(); ++it) {
    if (it->resource != &type) continue;
    if (!ns.empty() && it->ns != ns) continue;
    batch.events.push_back(*it);
  }
  return batch;
}

void Store::CompactHistory() {
  std::lock_guard<std::mutex> lock(mu_);
  evicted_rv_ = rv_;
  log_.clear();
  for (auto& [type, cv] : cvs_) cv.notify_all();
}

void Store::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutdown_ = true;
  for (auto& [type, cv] : cvs_) cv.notify_all();
}

bool Store::shut_down() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutdown_;
}

}  // namespace hami::sim
