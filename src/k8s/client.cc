#include "k8s/client.h"

#include <curl/curl.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <optional>

#include "common/json.h"
#include "common/strings.h"
#include "k8s/event_correlator.h"
#include "k8s/exec_credential.h"
#include "k8s/rate_limiter.h"

namespace hami::k8s {

std::string Resource::Path(std::string_view ns, std::string_view name,
                           std::string_view subresource) const {
  std::string p = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  if (namespaced && !ns.empty()) {
    p += "/namespaces/";
    p += ns;
  }
  p += "/" + plural;
  if (!name.empty()) {
    p += '/';
    p += name;
    if (!subresource.empty()) {
      p += '/';
      p += subresource;
    }
  }
  return p;
}

namespace resources {
const Resource kPods{"", "v1", "pods", true};
const Resource kNodes{"", "v1", "nodes", false};
const Resource kNamespaces{"", "v1", "namespaces", false};
const Resource kConfigMaps{"", "v1", "configmaps", true};
const Resource kSecrets{"", "v1", "secrets", true};
const Resource kEvents{"", "v1", "events", true};
const Resource kResourceQuotas{"", "v1", "resourcequotas", true};
const Resource kServices{"", "v1", "services", true};
const Resource kLeases{"coordination.k8s.io", "v1", "leases", true};
const Resource kEventsV1{"events.k8s.io", "v1", "events", true};
const Resource kDeviceClasses{"resource.k8s.io", "v1", "deviceclasses", false};
const Resource kResourceSlices{"resource.k8s.io", "v1", "resourceslices", false};
const Resource kResourceClaims{"resource.k8s.io", "v1", "resourceclaims", true};
const Resource kResourceClaimTemplates{"resource.k8s.io", "v1", "resourceclaimtemplates", true};
}  // namespace resources

std::string QueryEscape(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

namespace {

void AddParam(std::string& query, std::string_view key, std::string_view value) {
  if (value.empty()) return;
  query += query.empty() ? '?' : '&';
  query += key;
  query += '=';
  query += QueryEscape(value);
}

std::string ListQuery(const ListOptions& o) {
  std::string q;
  AddParam(q, "labelSelector", o.label_selector);
  AddParam(q, "fieldSelector", o.field_selector);
  if (o.limit > 0) AddParam(q, "limit", std::to_string(o.limit));
  AddParam(q, "continue", o.continue_token);
  AddParam(q, "resourceVersion", o.resource_version);
  return q;
}

// The ApiError for a non-2xx answer: the Status the server sent, or the raw body.
ApiError ErrorFromResponse(long code, const std::string& body) {
  ApiError e;
  e.code = static_cast<int>(code);
  Json status = hami::ParseJsonOrNull<Json>(body, kMaxJsonListDepth);
  if (status.is_object() && status.value("kind", "") == "Status") {
    e.reason = status.value("reason", "");
    e.message = status.value("message", "");
  } else {
    e.message = body.substr(0, 512);
  }
  if (e.reason.empty()) {
    e.reason = code == 404   ? kReasonNotFound
               : code == 409 ? kReasonConflict
               : code == 410 ? kReasonGone
               : code == 422 ? kReasonInvalid
               : code == 429 ? kReasonTooManyRequests
               : code == 401 ? kReasonUnauthorized
               : code >= 500 ? kReasonInternalError
                             : kReasonBadRequest;
  }
  return e;
}

ApiResult<Json> ParseJson(const std::string& body) {
  Result<Json> j = hami::ParseJson<Json>(body, kMaxJsonListDepth);
  if (!j) return ApiError{0, kReasonTransport, "response is " + j.error() + ": " + Quote(body)};
  return std::move(*j);
}

size_t CollectBody(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

struct WatchSink {
  std::string buffer;
  const std::function<bool(const WatchEvent&)>* on_event = nullptr;
  const std::atomic<bool>* cancel = nullptr;
  bool stopped = false;           // on_event asked to stop
  std::optional<ApiError> error;  // an ERROR event or an unparsable line
};

size_t WatchWrite(char* data, size_t size, size_t n, void* user) {
  auto* sink = static_cast<WatchSink*>(user);
  sink->buffer.append(data, size * n);
  size_t start = 0;
  size_t nl;
  while ((nl = sink->buffer.find('\n', start)) != std::string::npos) {
    std::string_view line(sink->buffer.data() + start, nl - start);
    start = nl + 1;
    if (Trim(line).empty()) continue;
    Json j = hami::ParseJsonOrNull<Json>(line, kMaxJsonListDepth);
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
      sink->error = ApiError{0, kReasonTransport, "watch: malformed event " + Quote(line)};
      return 0;
    }
    WatchEvent ev{j["type"].get<std::string>(), std::move(j["object"])};
    if (ev.type == "ERROR") {
      int code = ev.object.is_object() ? ev.object.value("code", 500) : 500;
      sink->error = ErrorFromResponse(code, ev.object.dump());
      return 0;
    }
    if (!(*sink->on_event)(ev)) {
      sink->stopped = true;
      return 0;
    }
  }
  sink->buffer.erase(0, start);
  return size * n;
}

int WatchProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* sink = static_cast<WatchSink*>(user);
  return sink->cancel != nullptr && sink->cancel->load() ? 1 : 0;
}

}  // namespace

class Client::Impl {
 public:
  Impl(const RestConfig& config, const Clock& clock)
      : config_(config), limiter_(config.qps, config.burst, clock) {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    if (config.exec) exec_.emplace(*config.exec, clock);
    // tls-server-name: curl checks the certificate against (and sends as SNI) the URL's host, so
    // the URL names tls-server-name and CURLOPT_CONNECT_TO sends the connection to the real host.
    if (!config.tls_server_name.empty()) {
      size_t scheme = config.server.find("://");
      size_t host_start = scheme == std::string::npos ? 0 : scheme + 3;
      size_t host_end = config.server.find('/', host_start);
      std::string authority = config.server.substr(host_start, host_end - host_start);
      std::string host = authority;
      std::string port = config.server.starts_with("http://") ? "80" : "443";
      if (size_t colon = authority.rfind(':');
          colon != std::string::npos && authority.find(']', colon) == std::string::npos) {
        host = authority.substr(0, colon);
        port = authority.substr(colon + 1);
      }
      if (host.starts_with("[")) host = host.substr(1, host.size() - 2);
      base_url_ = config.server.substr(0, host_start) + config.tls_server_name + ":" + port +
                  (host_end == std::string::npos ? "" : config.server.substr(host_end));
      connect_to_ = curl_slist_append(
          nullptr, (config.tls_server_name + ":" + port + ":" + host + ":" + port).c_str());
    } else {
      base_url_ = config.server;
    }
  }
  ~Impl() {
    for (CURL* h : pool_) curl_easy_cleanup(h);
    curl_slist_free_all(connect_to_);
  }

  CURL* Acquire() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!pool_.empty()) {
        CURL* h = pool_.back();
        pool_.pop_back();
        return h;
      }
    }
    return curl_easy_init();
  }
  void Release(CURL* h) {
    curl_easy_reset(h);  // keeps the handle's open connections for reuse
    std::lock_guard<std::mutex> lock(mu_);
    pool_.push_back(h);
  }

  // The credential a request carries: the config's, or the exec plugin's (cached) one.
  ApiResult<ExecCredentialStatus> Credential() {
    if (!exec_) {
      return ExecCredentialStatus{config_.token, config_.client_cert_pem, config_.client_key_pem,
                                  std::nullopt};
    }
    auto cred = exec_->Get();
    if (!cred) return ApiError{401, kReasonUnauthorized, "getting credentials: " + cred.error()};
    return std::move(*cred);
  }

  // Common options: URL, TLS, auth. `headers` is owned by the caller.
  void Setup(CURL* h, const std::string& url, const ExecCredentialStatus& cred,
             curl_slist*& headers) {
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    if (connect_to_ != nullptr) curl_easy_setopt(h, CURLOPT_CONNECT_TO, connect_to_);
    if (!config_.proxy_url.empty()) curl_easy_setopt(h, CURLOPT_PROXY, config_.proxy_url.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    if (!config_.ca_pem.empty()) {
      curl_blob blob{const_cast<char*>(config_.ca_pem.data()), config_.ca_pem.size(),
                     CURL_BLOB_COPY};
      curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
    }
    if (!cred.client_cert_pem.empty()) {
      curl_blob cert{const_cast<char*>(cred.client_cert_pem.data()), cred.client_cert_pem.size(),
                     CURL_BLOB_COPY};
      curl_blob key{const_cast<char*>(cred.client_key_pem.data()), cred.client_key_pem.size(),
                    CURL_BLOB_COPY};
      curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
      curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
      curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
      curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (config_.insecure_skip_tls_verify) {
      curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
      curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    headers = curl_slist_append(headers, "Accept: application/json");
    headers = curl_slist_append(headers, "User-Agent: hami/0.1");
    headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
    if (!cred.token.empty()) {
      headers = curl_slist_append(headers, ("Authorization: Bearer " + cred.token).c_str());
    } else if (!config_.username.empty() || !config_.password.empty()) {
      curl_easy_setopt(h, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
      curl_easy_setopt(h, CURLOPT_USERNAME, config_.username.c_str());
      curl_easy_setopt(h, CURLOPT_PASSWORD, config_.password.c_str());
    }
  }

  ApiResult<std::string> Do(std::string_view method, std::string_view path, std::string_view body,
                            std::string_view content_type) {
    auto cred = Credential();
    if (!cred) return std::move(cred).take_error();
    auto r = DoOnce(method, path, body, content_type, *cred);
    // An exec credential the server refuses (revoked, or expired early): run the plugin again,
    // once, as client-go does.
    if (exec_ && !r && r.error().code == 401) {
      exec_->Invalidate(*cred);
      cred = Credential();
      if (!cred) return std::move(cred).take_error();
      r = DoOnce(method, path, body, content_type, *cred);
    }
    return r;
  }

  ApiResult<std::string> DoOnce(std::string_view method, std::string_view path,
                                std::string_view body, std::string_view content_type,
                                const ExecCredentialStatus& cred) {
    limiter_.Wait();
    CURL* h = Acquire();
    curl_slist* headers = nullptr;
    std::string url = base_url_ + std::string(path);
    Setup(h, url, cred, headers);
    std::string m(method);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, m.c_str());
    if (!body.empty() || m == "POST" || m == "PUT" || m == "PATCH") {
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
      headers = curl_slist_append(headers, ("Content-Type: " + std::string(content_type)).c_str());
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(config_.timeout.count()));
    std::string response;
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, CollectBody);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &response);
    CURLcode rc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(headers);
    Release(h);
    if (rc != CURLE_OK) {
      return ApiError{0, rc == CURLE_OPERATION_TIMEDOUT ? kReasonTimeout : kReasonTransport,
                      m + " " + url + ": " + curl_easy_strerror(rc)};
    }
    if (code < 200 || code >= 300) return ErrorFromResponse(code, response);
    return response;
  }

  ApiStatus Watch(const std::string& path, const WatchOptions& o,
                  const std::function<bool(const WatchEvent&)>& on_event,
                  const std::atomic<bool>* cancel) {
    auto cred = Credential();
    if (!cred) return std::move(cred).take_error();
    limiter_.Wait();
    CURL* h = curl_easy_init();  // long-lived: not taken from the pool
    curl_slist* headers = nullptr;
    std::string url = base_url_ + path;
    Setup(h, url, *cred, headers);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    if (o.timeout_seconds > 0) {
      curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>((o.timeout_seconds + 30) * 1000));
    }
    WatchSink sink;
    sink.on_event = &on_event;
    sink.cancel = cancel;
    std::string error_body;
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, WatchWrite);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, WatchProgress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &sink);
    CURLcode rc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
    // A refused exec credential: the caller's next watch runs the plugin again.
    if (code == 401 && exec_) exec_->Invalidate(*cred);
    if (code >= 300) return ErrorFromResponse(code, sink.buffer);
    if (sink.error) return *sink.error;
    if (sink.stopped || rc == CURLE_OK || rc == CURLE_ABORTED_BY_CALLBACK) return ApiOk();
    return ApiError{0, rc == CURLE_OPERATION_TIMEDOUT ? kReasonTimeout : kReasonTransport,
                    "watch " + url + ": " + curl_easy_strerror(rc)};
  }

  EventCorrelator& events() { return events_; }

 private:
  const RestConfig& config_;
  std::optional<ExecAuthenticator> exec_;
  std::string base_url_;  // config_.server, its host replaced by tls-server-name when set
  curl_slist* connect_to_ = nullptr;
  RateLimiter limiter_;
  EventCorrelator events_;
  std::mutex mu_;
  std::vector<CURL*> pool_;
};

Client::Client(RestConfig config, const Clock& clock)
    : config_(std::move(config)), impl_(std::make_unique<Impl>(config_, clock)) {}
Client::~Client() = default;

ApiResult<std::string> Client::Request(std::string_view method, std::string_view path,
                                       std::string_view body, std::string_view content_type) {
  return impl_->Do(method, path, body, content_type);
}

ApiResult<Json> Client::Get(const Resource& r, std::string_view ns, std::string_view name) {
  auto body = Request("GET", r.Path(ns, name));
  if (!body) return std::move(body).take_error();
  return ParseJson(*body);
}

ApiResult<ObjectList> Client::List(const Resource& r, std::string_view ns,
                                   const ListOptions& options) {
  auto body = Request("GET", r.Path(ns) + ListQuery(options));
  if (!body) return std::move(body).take_error();
  auto j = ParseJson(*body);
  if (!j) return std::move(j).take_error();
  ObjectList list;
  if (j->contains("metadata") && (*j)["metadata"].is_object()) {
    list.resource_version = (*j)["metadata"].value("resourceVersion", "");
    list.continue_token = (*j)["metadata"].value("continue", "");
  }
  if (j->contains("items") && (*j)["items"].is_array()) {
    list.items.reserve((*j)["items"].size());
    for (auto& item : (*j)["items"]) list.items.push_back(std::move(item));
  }
  return list;
}

ApiResult<ObjectList> Client::ListAll(const Resource& r, std::string_view ns, ListOptions options) {
  ObjectList all;
  do {
    auto page = List(r, ns, options);
    if (!page) return std::move(page).take_error();
    for (auto& item : page->items) all.items.push_back(std::move(item));
    if (all.resource_version.empty()) all.resource_version = page->resource_version;
    options.continue_token = page->continue_token;
  } while (!options.continue_token.empty());
  return all;
}

ApiResult<Json> Client::Create(const Resource& r, std::string_view ns, const Json& obj) {
  auto body = Request("POST", r.Path(ns), obj.dump());
  if (!body) return std::move(body).take_error();
  return ParseJson(*body);
}

ApiResult<Json> Client::Update(const Resource& r, const Json& obj) {
  auto body = Request("PUT", r.Path(Namespace(obj), Name(obj)), obj.dump());
  if (!body) return std::move(body).take_error();
  return ParseJson(*body);
}

ApiResult<Json> Client::UpdateStatus(const Resource& r, const Json& obj) {
  auto body = Request("PUT", r.Path(Namespace(obj), Name(obj), "status"), obj.dump());
  if (!body) return std::move(body).take_error();
  return ParseJson(*body);
}

ApiResult<Json> Client::Patch(const Resource& r, std::string_view ns, std::string_view name,
                              PatchType type, const Json& patch, std::string_view subresource) {
  const char* ct = type == PatchType::kMerge            ? "application/merge-patch+json"
                   : type == PatchType::kStrategicMerge ? "application/strategic-merge-patch+json"
                                                        : "application/json-patch+json";
  auto body = Request("PATCH", r.Path(ns, name, subresource), patch.dump(), ct);
  if (!body) return std::move(body).take_error();
  return ParseJson(*body);
}

ApiStatus Client::Delete(const Resource& r, std::string_view ns, std::string_view name,
                         std::string_view resource_version) {
  std::string opts;
  if (!resource_version.empty()) {
    opts = Json{{"kind", "DeleteOptions"},
                {"apiVersion", "v1"},
                {"preconditions", {{"resourceVersion", std::string(resource_version)}}}}
               .dump();
  }
  auto body = Request("DELETE", r.Path(ns, name), opts);
  if (!body) return std::move(body).take_error();
  return ApiOk();
}

ApiStatus Client::Bind(std::string_view ns, std::string_view pod, std::string_view node,
                       std::string_view uid) {
  Json binding = {
      {"apiVersion", "v1"},
      {"kind", "Binding"},
      {"metadata", {{"name", std::string(pod)}, {"namespace", std::string(ns)}}},
      {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", std::string(node)}}}};
  if (!uid.empty()) binding["metadata"]["uid"] = std::string(uid);
  auto body = Request("POST", resources::kPods.Path(ns, pod, "binding"), binding.dump());
  if (!body) return std::move(body).take_error();
  return ApiOk();
}

bool Client::BoundTo(std::string_view ns, std::string_view pod, std::string_view node,
                     std::string_view uid) {
  auto got = RetryTransient<Json>([&] { return Get(resources::kPods, ns, pod); });
  return got && FieldString(*got, "spec.nodeName") == node && (uid.empty() || Uid(*got) == uid);
}

ApiResult<Json> Client::RecordEvent(const Json& involved, std::string_view type,
                                    std::string_view reason, std::string_view message,
                                    std::string_view component) {
  std::string ns = Namespace(involved);
  if (ns.empty()) ns = "default";
  auto now = std::chrono::system_clock::now();
  auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, ".%llx", static_cast<unsigned long long>(nanos));
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  Json ref = {{"kind", involved.value("kind", "")},
              {"apiVersion", involved.value("apiVersion", "")},
              {"name", Name(involved)},
              {"namespace", Namespace(involved)},
              {"uid", Uid(involved)},
              {"resourceVersion", ResourceVersion(involved)}};
  const std::string key = EventKey(
      component, ref["kind"].get<std::string>(), ref["namespace"].get<std::string>(),
      ref["name"].get<std::string>(), ref["uid"].get<std::string>(), type, reason, message);
  if (auto repeat = impl_->events().Observe(key)) {
    Json bump = {{"count", repeat->count}, {"lastTimestamp", stamp}};
    auto patched = Patch(resources::kEvents, repeat->ns, repeat->name, PatchType::kMerge, bump);
    if (patched || patched.error().code != 404) return patched;
    impl_->events().Forget(key);  // expired or deleted: record it afresh
  }
  Json event = {{"apiVersion", "v1"},
                {"kind", "Event"},
                {"metadata", {{"name", Name(involved) + suffix}, {"namespace", ns}}},
                {"involvedObject", ref},
                {"type", std::string(type)},
                {"reason", std::string(reason)},
                {"message", std::string(message)},
                {"source", {{"component", std::string(component)}}},
                {"firstTimestamp", stamp},
                {"lastTimestamp", stamp},
                {"count", 1}};
  auto created = Create(resources::kEvents, ns, event);
  if (created) impl_->events().Created(key, ns, Name(event));
  return created;
}

ApiStatus Client::Watch(const Resource& r, std::string_view ns, const WatchOptions& options,
                        const std::function<bool(const WatchEvent&)>& on_event,
                        const std::atomic<bool>* cancel) {
  std::string q = "?watch=true";
  AddParam(q, "labelSelector", options.label_selector);
  AddParam(q, "fieldSelector", options.field_selector);
  AddParam(q, "resourceVersion", options.resource_version);
  if (options.allow_bookmarks) q += "&allowWatchBookmarks=true";
  if (options.timeout_seconds > 0)
    AddParam(q, "timeoutSeconds", std::to_string(options.timeout_seconds));
  return impl_->Watch(r.Path(ns) + q, options, on_event, cancel);
}

}  // namespace hami::k8s
