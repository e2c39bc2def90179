// A Binding's metadata.uid is a precondition on the pod (issue 19 item 4): a bind meant for a
// deleted pod gets 409 from the sim apiserver, as from kube-apiserver, and never binds the pod
// created again under the same name.
#include <gtest/gtest.h>

#include "k8s/client.h"
#include "k8s/object.h"
#include "sim/apiserver/apiserver.h"

namespace hami::k8s {
namespace {

Json Pod(const std::string& name) {
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}}},
              {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
}

TEST(BindPrecondition, AnOldUidIsAConflictAndBindsNothing) {
  sim::ApiServer api{sim::ApiServerOptions{}};
  ASSERT_TRUE(api.Start());
  RestConfig cfg;
  cfg.server = api.url();
  cfg.qps = 0;
  Client client(cfg);
  auto first = client.Create(resources::kPods, "default", Pod("sts-0"));
  ASSERT_TRUE(first);
  const std::string old_uid = Uid(*first);
  ASSERT_TRUE(client.Delete(resources::kPods, "default", "sts-0"));
  auto second = client.Create(resources::kPods, "default", Pod("sts-0"));
  ASSERT_TRUE(second);
  ASSERT_NE(Uid(*second), old_uid);

  ApiStatus stale = client.Bind("default", "sts-0", "node-1", old_uid);
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().code, 409);
  EXPECT_EQ(stale.error().reason, kReasonConflict);
  EXPECT_NE(stale.error().message.find("Precondition failed: UID in precondition: " + old_uid),
            std::string::npos)
      << stale.error().message;
  EXPECT_EQ(FieldString(*client.Get(resources::kPods, "default", "sts-0"), "spec.nodeName"), "");

  ASSERT_TRUE(client.Bind("default", "sts-0", "node-1", Uid(*second)));
  EXPECT_EQ(FieldString(*client.Get(resources::kPods, "default", "sts-0"), "spec.nodeName"),
            "node-1");
}

}  // namespace
}  // namespace hami::k8s
