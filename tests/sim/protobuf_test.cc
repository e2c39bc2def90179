#include "sim/apiserver/protobuf.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "common/clock.h"
#include "net/http_request.h"
#include "sim/apiserver/handlers.h"
#include "sim/apiserver/store.h"

namespace hami::sim {
namespace {

using Json = nlohmann::json;

// A protobuf writer for the test messages: fields in the order given, as Go's encoder writes.
std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
  return out;
}
std::string Bytes(uint32_t field, const std::string& payload) {
  return Varint(field << 3 | 2) + Varint(payload.size()) + payload;
}
std::string Int(uint32_t field, uint64_t v) { return Varint(field << 3) + Varint(v); }
std::string Entry(uint32_t field, const std::string& k, const std::string& v) {
  return Bytes(field, Bytes(1, k) + Bytes(2, v));
}
std::string Envelope(const std::string& api_version, const std::string& kind,
                     const std::string& raw) {
  return std::string("k8s\0", 4) + Bytes(1, Bytes(1, api_version) + Bytes(2, kind)) +
         Bytes(2, raw) + Bytes(3, "") + Bytes(4, "");
}

// helm's release Secret as client-go encodes it (empty optional strings included, a
// creationTimestamp message and a fixed64 field the decoder must skip).
std::string HelmSecret(const std::string& name) {
  std::string meta = Bytes(1, name) + Bytes(2, "") + Bytes(3, "ns") + Bytes(5, "") + Bytes(6, "") +
                     Int(7, 0) + Bytes(8, Int(1, 0)) + Entry(11, "name", "r") +
                     Entry(11, "owner", "helm") + Entry(11, "status", "deployed");
  std::string secret = Bytes(1, meta) + Entry(2, "release", std::string("\x1f\x8b\x00\xff", 4)) +
                       Bytes(3, "helm.sh/release.v1") + Varint(99 << 3 | 1) + std::string(8, 'x');
  return Envelope("v1", "Secret", secret);
}

TEST(DecodeProtobuf, HelmReleaseSecret) {
  auto obj = DecodeProtobuf(HelmSecret("sh.helm.release.v1.r.v1"));
  ASSERT_TRUE(obj) << obj.error().ToString();
  EXPECT_EQ(*obj, Json::parse(R"({"apiVersion": "v1", "kind": "Secret",
      "metadata": {"name": "sh.helm.release.v1.r.v1", "namespace": "ns",
                   "labels": {"name": "r", "owner": "helm", "status": "deployed"}},
      "data": {"release": "H4sA/w=="}, "type": "helm.sh/release.v1"})"));
}

TEST(DecodeProtobuf, ConfigMapAndDeleteOptions) {
  auto cm = DecodeProtobuf(Envelope("v1", "ConfigMap",
                                    Bytes(1, Bytes(1, "c") + Entry(12, "a", "b")) +
                                        Entry(2, "k", "v") + Entry(3, "bin", "\x01") + Int(4, 1)));
  ASSERT_TRUE(cm) << cm.error().ToString();
  EXPECT_EQ(*cm, Json::parse(R"({"apiVersion": "v1", "kind": "ConfigMap",
      "metadata": {"name": "c", "annotations": {"a": "b"}}, "data": {"k": "v"},
      "binaryData": {"bin": "AQ=="}, "immutable": true})"));
  auto del = DecodeProtobuf(
      Envelope("v1", "DeleteOptions",
               Int(1, 0) + Bytes(2, Bytes(1, "u-1") + Bytes(2, "7")) + Bytes(4, "Background")));
  ASSERT_TRUE(del) << del.error().ToString();
  EXPECT_EQ(*del, Json::parse(R"({"apiVersion": "v1", "kind": "DeleteOptions",
      "gracePeriodSeconds": 0, "preconditions": {"uid": "u-1", "resourceVersion": "7"},
      "propagationPolicy": "Background"})"));
}

TEST(DecodeProtobuf, Errors) {
  EXPECT_EQ(DecodeProtobuf("{}").error().code, 400);  // no k8s\0 prefix
  auto pod = DecodeProtobuf(Envelope("v1", "Pod", ""));
  EXPECT_EQ(pod.error().code, 415);
  EXPECT_NE(pod.error().message.find("\"Pod\""), std::string::npos) << pod.error().message;
  std::string secret = HelmSecret("s");
  for (size_t cut : {5u, 9u, 20u, 40u}) {  // truncated anywhere: 400, never a crash
    auto r = DecodeProtobuf(secret.substr(0, secret.size() - cut));
    ASSERT_FALSE(r) << cut;
    EXPECT_EQ(r.error().code, 400) << cut;
  }
  auto wire = DecodeProtobuf(Envelope("v1", "Secret", Bytes(1, Int(1, 5))));  // name as varint
  EXPECT_EQ(wire.error().code, 400);
  EXPECT_NE(wire.error().message.find("metadata.name"), std::string::npos) << wire.error().message;
  auto utf8 = DecodeProtobuf(Envelope("v1", "Secret", Bytes(1, Bytes(1, "\xff"))));
  EXPECT_EQ(utf8.error().code, 400);
  auto gzip =
      DecodeProtobuf(std::string("k8s\0", 4) + Bytes(1, Bytes(2, "Secret")) + Bytes(3, "gzip"));
  EXPECT_EQ(gzip.error().code, 400);
}

// Through the HTTP handlers, as helm sends it: POST and PUT the Secret in protobuf, DELETE with
// a protobuf DeleteOptions body; replies are JSON.
TEST(DecodeProtobuf, HandlersServeProtobufWrites) {
  FakeClock clock;
  Store store(clock);
  ASSERT_TRUE(store.Create(NamespaceType(), "", Json{{"metadata", {{"name", "ns"}}}}));
  std::atomic<bool> stopping{false};
  HandlerConfig config{std::chrono::milliseconds(1000), 0, &stopping};
  auto call = [&](const std::string& method, const std::string& path, const std::string& body) {
    net::Request http;
    http.method = method;
    http.target = http.path = path;
    http.body = body;
    http.headers.emplace_back("content-type", "application/vnd.kubernetes.protobuf");
    return HandleResourceRequest(store, config, ApiRequest(std::move(http)));
  };
  auto res = call("POST", "/api/v1/namespaces/ns/secrets", HelmSecret("rel"));
  ASSERT_EQ(res.status, 201) << res.body;
  const ResourceType& secrets = *FindResourceType("", "v1", "secrets");
  auto stored = store.Get(secrets, "ns", "rel");
  ASSERT_TRUE(stored);
  EXPECT_EQ((*stored)->json["type"], "helm.sh/release.v1");
  EXPECT_EQ((*stored)->json["metadata"]["labels"]["owner"], "helm");
  EXPECT_FALSE((*stored)->json["metadata"].contains("generateName"));
  res = call("PUT", "/api/v1/namespaces/ns/secrets/rel", HelmSecret("rel"));
  EXPECT_EQ(res.status, 200) << res.body;
  std::string wrong_uid = Envelope("v1", "DeleteOptions", Bytes(2, Bytes(1, "nope")));
  EXPECT_EQ(call("DELETE", "/api/v1/namespaces/ns/secrets/rel", wrong_uid).status, 409);
  res = call("DELETE", "/api/v1/namespaces/ns/secrets/rel", Envelope("v1", "DeleteOptions", ""));
  EXPECT_EQ(res.status, 200) << res.body;
  EXPECT_FALSE(store.Get(secrets, "ns", "rel"));
  EXPECT_EQ(call("POST", "/api/v1/namespaces/ns/secrets", "garbage").status, 400);
  // A protobuf Content-Type without a body (a GET, a DELETE without options) is no body.
  EXPECT_EQ(call("GET", "/api/v1/namespaces/ns/secrets", "").status, 200);
  ASSERT_EQ(call("POST", "/api/v1/namespaces/ns/secrets", HelmSecret("rel")).status, 201);
  EXPECT_EQ(call("DELETE", "/api/v1/namespaces/ns/secrets/rel", "").status, 200);
}

}  // namespace
}  // namespace hami::sim
