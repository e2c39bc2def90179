// Pins the kubelet device plugin API v1beta1 (docs/protocol.md#device-plugin-api-and-allocate):
// package, services, method paths, and every message's field names, numbers and types, read from
// the compiled descriptor of api/deviceplugin/v1beta1/api.proto.
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "deviceplugin/v1beta1/api.pb.h"

namespace hami::deviceplugin {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;

struct FieldRow {
  const char* message;
  const char* field;
  int number;
  FieldDescriptor::Type type;
  bool repeated;
};

constexpr auto kString = FieldDescriptor::TYPE_STRING;
constexpr auto kBool = FieldDescriptor::TYPE_BOOL;
constexpr auto kMsg = FieldDescriptor::TYPE_MESSAGE;
constexpr auto kInt64 = FieldDescriptor::TYPE_INT64;
constexpr auto kInt32 = FieldDescriptor::TYPE_INT32;

const std::vector<FieldRow>& Rows() {
  static const std::vector<FieldRow> rows = {
      {"DevicePluginOptions", "pre_start_required", 1, kBool, false},
      {"DevicePluginOptions", "get_preferred_allocation_available", 2, kBool, false},
      {"RegisterRequest", "version", 1, kString, false},
      {"RegisterRequest", "endpoint", 2, kString, false},
      {"RegisterRequest", "resource_name", 3, kString, false},
      {"RegisterRequest", "options", 4, kMsg, false},
      {"ListAndWatchResponse", "devices", 1, kMsg, true},
      {"Device", "ID", 1, kString, false},
      {"Device", "health", 2, kString, false},
      {"Device", "topology", 3, kMsg, false},
      {"TopologyInfo", "nodes", 1, kMsg, true},
      {"NUMANode", "ID", 1, kInt64, false},
      {"PreStartContainerRequest", "devices_ids", 1, kString, true},
      {"PreferredAllocationRequest", "container_requests", 1, kMsg, true},
      {"ContainerPreferredAllocationRequest", "available_deviceIDs", 1, kString, true},
      {"ContainerPreferredAllocationRequest", "must_include_deviceIDs", 2, kString, true},
      {"ContainerPreferredAllocationRequest", "allocation_size", 3, kInt32, false},
      {"PreferredAllocationResponse", "container_responses", 1, kMsg, true},
      {"ContainerPreferredAllocationResponse", "deviceIDs", 1, kString, true},
      {"AllocateRequest", "container_requests", 1, kMsg, true},
      {"ContainerAllocateRequest", "devices_ids", 1, kString, true},
      {"AllocateResponse", "container_responses", 1, kMsg, true},
      {"ContainerAllocateResponse", "envs", 1, kMsg, true},
      {"ContainerAllocateResponse", "mounts", 2, kMsg, true},
      {"ContainerAllocateResponse", "devices", 3, kMsg, true},
      {"ContainerAllocateResponse", "annotations", 4, kMsg, true},
      {"ContainerAllocateResponse", "cdi_devices", 5, kMsg, true},
      {"Mount", "container_path", 1, kString, false},
      {"Mount", "host_path", 2, kString, false},
      {"Mount", "read_only", 3, kBool, false},
      {"DeviceSpec", "container_path", 1, kString, false},
      {"DeviceSpec", "host_path", 2, kString, false},
      {"DeviceSpec", "permissions", 3, kString, false},
      {"CDIDevice", "name", 1, kString, false},
  };
  return rows;
}

const Descriptor* Message(const std::string& name) {
  v1beta1::Empty force_link;  // makes sure the generated descriptors are registered
  (void)force_link;
  return DescriptorPool::generated_pool()->FindMessageTypeByName("v1beta1." + name);
}

TEST(Api, EveryFieldHasItsContractNumberAndType) {
  for (const FieldRow& row : Rows()) {
    const Descriptor* m = Message(row.message);
    ASSERT_NE(m, nullptr) << row.message;
    const FieldDescriptor* f = m->FindFieldByName(row.field);
    ASSERT_NE(f, nullptr) << row.message << "." << row.field;
    EXPECT_EQ(f->number(), row.number) << row.message << "." << row.field;
    EXPECT_EQ(f->type(), row.type) << row.message << "." << row.field;
    EXPECT_EQ(f->is_repeated(), row.repeated) << row.message << "." << row.field;
  }
}

TEST(Api, MessagesHaveNoExtraFields) {
  std::map<std::string, int> counts;
  for (const FieldRow& row : Rows()) counts[row.message]++;
  counts["Empty"] = 0;
  counts["PreStartContainerResponse"] = 0;
  for (const auto& [name, count] : counts) {
    const Descriptor* m = Message(name);
    ASSERT_NE(m, nullptr) << name;
    EXPECT_EQ(m->field_count(), count) << name;
  }
}

TEST(Api, MapsAreStringToString) {
  const Descriptor* m = Message("ContainerAllocateResponse");
  ASSERT_NE(m, nullptr);
  for (const char* name : {"envs", "annotations"}) {
    const FieldDescriptor* f = m->FindFieldByName(name);
    ASSERT_NE(f, nullptr);
    ASSERT_TRUE(f->is_map()) << name;
    EXPECT_EQ(f->message_type()->map_key()->type(), kString);
    EXPECT_EQ(f->message_type()->map_value()->type(), kString);
  }
}

TEST(Api, ServicesAndMethodPaths) {
  const auto* pool = DescriptorPool::generated_pool();
  Message("Empty");
  const auto* reg = pool->FindServiceByName("v1beta1.Registration");
  ASSERT_NE(reg, nullptr);
  ASSERT_EQ(reg->method_count(), 1);
  EXPECT_EQ(reg->method(0)->name(), "Register");
  EXPECT_EQ(reg->method(0)->input_type()->name(), "RegisterRequest");
  EXPECT_EQ(reg->method(0)->output_type()->name(), "Empty");

  const auto* dp = pool->FindServiceByName("v1beta1.DevicePlugin");
  ASSERT_NE(dp, nullptr);
  const std::vector<std::tuple<std::string, std::string, std::string, bool>> want = {
      {"GetDevicePluginOptions", "Empty", "DevicePluginOptions", false},
      {"ListAndWatch", "Empty", "ListAndWatchResponse", true},
      {"GetPreferredAllocation", "PreferredAllocationRequest", "PreferredAllocationResponse",
       false},
      {"Allocate", "AllocateRequest", "AllocateResponse", false},
      {"PreStartContainer", "PreStartContainerRequest", "PreStartContainerResponse", false},
  };
  ASSERT_EQ(dp->method_count(), static_cast<int>(want.size()));
  for (const auto& [name, in, out, streaming] : want) {
    const auto* method = dp->FindMethodByName(name);
    ASSERT_NE(method, nullptr) << name;
    EXPECT_EQ(method->input_type()->name(), in) << name;
    EXPECT_EQ(method->output_type()->name(), out) << name;
    EXPECT_EQ(method->server_streaming(), streaming) << name;
    EXPECT_FALSE(method->client_streaming()) << name;
  }
}

}  // namespace
}  // namespace hami::deviceplugin
