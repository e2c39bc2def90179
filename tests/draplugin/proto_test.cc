// Pins the kubelet DRA gRPC API (docs/DRA.md#kubelet-grpc) as compiled from api/dra/v1,
// api/dra/v1beta1, api/drahealth/v1alpha1, api/drahealth/v1 and api/pluginregistration/v1:
// packages, services, methods (gRPC paths, streaming), every message's fields (name, number,
// type, label, proto3 optional) and enum values, read from the generated descriptors. These are
// Kubernetes' numbers; a change here breaks every kubelet.
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "deviceplugin/v1beta1/api.pb.h"
#include "dra/v1/api.pb.h"
#include "dra/v1beta1/api.pb.h"
#include "drahealth/v1/api.pb.h"
#include "drahealth/v1alpha1/api.pb.h"
#include "pluginregistration/v1/api.pb.h"

namespace hami::draplugin {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;

constexpr auto kString = FieldDescriptor::TYPE_STRING;
constexpr auto kBool = FieldDescriptor::TYPE_BOOL;
constexpr auto kMsg = FieldDescriptor::TYPE_MESSAGE;
constexpr auto kInt64 = FieldDescriptor::TYPE_INT64;
constexpr auto kEnum = FieldDescriptor::TYPE_ENUM;

enum Label { kSingular, kRepeated, kOptional };  // kOptional: proto3 `optional` (has-presence)

struct FieldRow {
  const char* message;  // full name
  const char* field;
  int number;
  FieldDescriptor::Type type;
  Label label;
  const char* type_name = "";  // full name of a message or enum field's type
};

constexpr char kDraV1[] = "k8s.io.kubelet.pkg.apis.dra.v1.";
constexpr char kDraV1beta1[] = "k8s.io.kubelet.pkg.apis.dra.v1beta1.";

// The DRAPlugin messages of one package; v1 has Device.share_id on top.
std::vector<FieldRow> DraRows(const std::string& pkg, bool with_share_id) {
  static std::set<std::string> names;  // keeps the c_str()s alive
  auto n = [&](const std::string& s) { return names.insert(pkg + s).first->c_str(); };
  std::vector<FieldRow> rows = {
      {n("NodePrepareResourcesRequest"), "claims", 1, kMsg, kRepeated, n("Claim")},
      {n("NodePrepareResourcesResponse"), "claims", 1, kMsg, kRepeated,
       n("NodePrepareResourcesResponse.ClaimsEntry")},
      {n("NodePrepareResourceResponse"), "devices", 1, kMsg, kRepeated, n("Device")},
      {n("NodePrepareResourceResponse"), "error", 2, kString, kSingular},
      {n("Device"), "request_names", 1, kString, kRepeated},
      {n("Device"), "pool_name", 2, kString, kSingular},
      {n("Device"), "device_name", 3, kString, kSingular},
      {n("Device"), "cdi_device_ids", 4, kString, kRepeated},
      {n("NodeUnprepareResourcesRequest"), "claims", 1, kMsg, kRepeated, n("Claim")},
      {n("NodeUnprepareResourcesResponse"), "claims", 1, kMsg, kRepeated,
       n("NodeUnprepareResourcesResponse.ClaimsEntry")},
      {n("NodeUnprepareResourceResponse"), "error", 1, kString, kSingular},
      {n("Claim"), "namespace", 1, kString, kSingular},
      {n("Claim"), "uid", 2, kString, kSingular},
      {n("Claim"), "name", 3, kString, kSingular},
  };
  if (with_share_id) rows.push_back({n("Device"), "share_id", 5, kString, kOptional});
  return rows;
}

std::vector<FieldRow> HealthRows(const std::string& pkg) {
  static std::set<std::string> names;
  auto n = [&](const std::string& s) { return names.insert(pkg + s).first->c_str(); };
  return {
      {n("DeviceIdentifier"), "pool_name", 1, kString, kSingular},
      {n("DeviceIdentifier"), "device_name", 2, kString, kSingular},
      {n("DeviceHealth"), "device", 1, kMsg, kSingular, n("DeviceIdentifier")},
      {n("DeviceHealth"), "health", 2, kEnum, kSingular, n("HealthStatus")},
      {n("DeviceHealth"), "last_updated_time", 3, kInt64, kSingular},
      {n("DeviceHealth"), "health_check_timeout_seconds", 4, kInt64, kSingular},
      {n("DeviceHealth"), "message", 5, kString, kSingular},
      {n("NodeWatchResourcesResponse"), "devices", 1, kMsg, kRepeated, n("DeviceHealth")},
  };
}

std::vector<FieldRow> RegistrationRows() {
  return {
      {"pluginregistration.PluginInfo", "type", 1, kString, kSingular},
      {"pluginregistration.PluginInfo", "name", 2, kString, kSingular},
      {"pluginregistration.PluginInfo", "endpoint", 3, kString, kSingular},
      {"pluginregistration.PluginInfo", "supported_versions", 4, kString, kRepeated},
      {"pluginregistration.RegistrationStatus", "plugin_registered", 1, kBool, kSingular},
      {"pluginregistration.RegistrationStatus", "error", 2, kString, kSingular},
  };
}

std::vector<FieldRow> AllRows() {
  std::vector<FieldRow> all;
  for (const auto& part : {DraRows(kDraV1, true), DraRows(kDraV1beta1, false),
                           HealthRows("v1alpha1."), HealthRows("v1."), RegistrationRows()}) {
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

// Makes sure every generated file is linked and registered in the generated pool.
const DescriptorPool* Pool() {
  (void)::k8s::io::kubelet::pkg::apis::dra::v1::Claim::descriptor();
  (void)::k8s::io::kubelet::pkg::apis::dra::v1beta1::Claim::descriptor();
  (void)::v1alpha1::DeviceHealth::descriptor();
  (void)::v1::DeviceHealth::descriptor();
  (void)::pluginregistration::PluginInfo::descriptor();
  return DescriptorPool::generated_pool();
}

TEST(DraProto, EveryFieldHasKubernetesNumberTypeAndLabel) {
  for (const FieldRow& row : AllRows()) {
    SCOPED_TRACE(std::string(row.message) + "." + row.field);
    const Descriptor* m = Pool()->FindMessageTypeByName(row.message);
    ASSERT_NE(m, nullptr);
    const FieldDescriptor* f = m->FindFieldByName(row.field);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->number(), row.number);
    EXPECT_EQ(f->type(), row.type);
    EXPECT_EQ(f->is_repeated(), row.label == kRepeated);
    EXPECT_EQ(f->has_presence(), row.label == kOptional || (row.type == kMsg && !f->is_repeated()));
    if (row.label == kOptional) {
      ASSERT_NE(f->containing_oneof(), nullptr);  // proto3 optional = synthetic oneof
      EXPECT_EQ(f->containing_oneof()->name(), std::string("_") + row.field);
    }
    if (row.type == kMsg) {
      EXPECT_EQ(f->message_type()->full_name(), row.type_name);
    }
    if (row.type == kEnum) {
      EXPECT_EQ(f->enum_type()->full_name(), row.type_name);
    }
  }
}

TEST(DraProto, MessagesHaveNoOtherFields) {
  std::map<std::string, int> counts;
  for (const FieldRow& row : AllRows()) counts[row.message]++;
  for (const char* empty :
       {"pluginregistration.RegistrationStatusResponse", "pluginregistration.InfoRequest",
        "v1alpha1.NodeWatchResourcesRequest", "v1.NodeWatchResourcesRequest"}) {
    counts[empty] = 0;
  }
  for (const auto& [name, count] : counts) {
    if (name.find("ClaimsEntry") != std::string::npos) continue;  // map entries, checked below
    const Descriptor* m = Pool()->FindMessageTypeByName(name);
    ASSERT_NE(m, nullptr) << name;
    EXPECT_EQ(m->field_count(), count) << name;
  }
  // And no message beyond those: a new upstream message must be added here on purpose.
  const std::map<std::string, int> messages_per_file = {{"dra/v1/api.proto", 8},
                                                        {"dra/v1beta1/api.proto", 8},
                                                        {"drahealth/v1alpha1/api.proto", 4},
                                                        {"drahealth/v1/api.proto", 4},
                                                        {"pluginregistration/v1/api.proto", 4}};
  for (const auto& [file, n] : messages_per_file) {
    const FileDescriptor* fd = Pool()->FindFileByName(file);
    ASSERT_NE(fd, nullptr) << file;
    EXPECT_EQ(fd->message_type_count(), n) << file;
  }
}

TEST(DraProto, ClaimMapsAreKeyedByStringUid) {
  for (const std::string pkg : {kDraV1, kDraV1beta1}) {
    for (const auto& [message, value] : std::vector<std::pair<std::string, std::string>>{
             {"NodePrepareResourcesResponse", "NodePrepareResourceResponse"},
             {"NodeUnprepareResourcesResponse", "NodeUnprepareResourceResponse"}}) {
      SCOPED_TRACE(pkg + message);
      const Descriptor* m = Pool()->FindMessageTypeByName(pkg + message);
      ASSERT_NE(m, nullptr);
      const FieldDescriptor* f = m->FindFieldByName("claims");
      ASSERT_NE(f, nullptr);
      ASSERT_TRUE(f->is_map());
      EXPECT_EQ(f->message_type()->map_key()->type(), kString);
      EXPECT_EQ(f->message_type()->map_value()->type(), kMsg);
      EXPECT_EQ(f->message_type()->map_value()->message_type()->full_name(), pkg + value);
    }
  }
}

TEST(DraProto, HealthStatusValues) {
  for (const std::string pkg : {"v1alpha1.", "v1."}) {
    const EnumDescriptor* e = Pool()->FindEnumTypeByName(pkg + "HealthStatus");
    ASSERT_NE(e, nullptr) << pkg;
    ASSERT_EQ(e->value_count(), 3) << pkg;
    const std::vector<std::pair<std::string, int>> want = {
        {"UNKNOWN", 0}, {"HEALTHY", 1}, {"UNHEALTHY", 2}};
    for (const auto& [name, number] : want) {
      ASSERT_NE(e->FindValueByName(name), nullptr) << pkg << name;
      EXPECT_EQ(e->FindValueByName(name)->number(), number) << pkg << name;
    }
  }
}

struct MethodRow {
  const char* service;  // full name
  const char* method;
  const char* input;  // full names
  const char* output;
  bool server_streaming;
};

TEST(DraProto, ServicesMethodsAndGrpcPaths) {
  const std::vector<MethodRow> want = {
      {"k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin", "NodePrepareResources",
       "k8s.io.kubelet.pkg.apis.dra.v1.NodePrepareResourcesRequest",
       "k8s.io.kubelet.pkg.apis.dra.v1.NodePrepareResourcesResponse", false},
      {"k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin", "NodeUnprepareResources",
       "k8s.io.kubelet.pkg.apis.dra.v1.NodeUnprepareResourcesRequest",
       "k8s.io.kubelet.pkg.apis.dra.v1.NodeUnprepareResourcesResponse", false},
      {"k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin", "NodePrepareResources",
       "k8s.io.kubelet.pkg.apis.dra.v1beta1.NodePrepareResourcesRequest",
       "k8s.io.kubelet.pkg.apis.dra.v1beta1.NodePrepareResourcesResponse", false},
      {"k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin", "NodeUnprepareResources",
       "k8s.io.kubelet.pkg.apis.dra.v1beta1.NodeUnprepareResourcesRequest",
       "k8s.io.kubelet.pkg.apis.dra.v1beta1.NodeUnprepareResourcesResponse", false},
      {"v1alpha1.DRAResourceHealth", "NodeWatchResources", "v1alpha1.NodeWatchResourcesRequest",
       "v1alpha1.NodeWatchResourcesResponse", true},
      {"v1.DRAResourceHealth", "NodeWatchResources", "v1.NodeWatchResourcesRequest",
       "v1.NodeWatchResourcesResponse", true},
      {"pluginregistration.Registration", "GetInfo", "pluginregistration.InfoRequest",
       "pluginregistration.PluginInfo", false},
      {"pluginregistration.Registration", "NotifyRegistrationStatus",
       "pluginregistration.RegistrationStatus", "pluginregistration.RegistrationStatusResponse",
       false},
  };
  std::map<std::string, int> methods_per_service;
  for (const MethodRow& row : want) {
    SCOPED_TRACE(std::string(row.service) + "/" + row.method);
    methods_per_service[row.service]++;
    const auto* service = Pool()->FindServiceByName(row.service);
    ASSERT_NE(service, nullptr);
    const auto* method = service->FindMethodByName(row.method);
    ASSERT_NE(method, nullptr);
    EXPECT_EQ(method->input_type()->full_name(), row.input);
    EXPECT_EQ(method->output_type()->full_name(), row.output);
    EXPECT_EQ(method->server_streaming(), row.server_streaming);
    EXPECT_FALSE(method->client_streaming());
  }
  for (const auto& [service, n] : methods_per_service) {
    EXPECT_EQ(Pool()->FindServiceByName(service)->method_count(), n) << service;
  }
  // The names plugins list in supported_versions for health are the full service names.
  EXPECT_NE(Pool()->FindServiceByName("v1alpha1.DRAResourceHealth"), nullptr);
  EXPECT_NE(Pool()->FindServiceByName("v1.DRAResourceHealth"), nullptr);
}

TEST(DraProto, PackagesAndFileNamesCoexistWithTheDevicePluginApi) {
  const std::map<std::string, std::string> package_of = {
      {"dra/v1/api.proto", "k8s.io.kubelet.pkg.apis.dra.v1"},
      {"dra/v1beta1/api.proto", "k8s.io.kubelet.pkg.apis.dra.v1beta1"},
      {"drahealth/v1alpha1/api.proto", "v1alpha1"},
      {"drahealth/v1/api.proto", "v1"},
      {"pluginregistration/v1/api.proto", "pluginregistration"},
  };
  for (const auto& [file, package] : package_of) {
    const FileDescriptor* fd = Pool()->FindFileByName(file);
    ASSERT_NE(fd, nullptr) << file;
    EXPECT_EQ(fd->package(), package) << file;
    EXPECT_EQ(fd->syntax(), FileDescriptor::SYNTAX_PROTO3) << file;
  }
  // Both APIs live in one process (one binary may serve both): the device plugin's file keeps
  // its own name and package.
  (void)::v1beta1::Empty::descriptor();
  const FileDescriptor* dp = Pool()->FindFileByName("api.proto");
  ASSERT_NE(dp, nullptr);
  EXPECT_EQ(dp->package(), "v1beta1");
}

}  // namespace
}  // namespace hami::draplugin
