// Issue 30 items 10 and 12 against the real hami-scheduler. A /filter or /bind body that is not
// JSON gets HAMi v2.10's answer, HTTP 200 with the error in the result's Error field (its route
// tests TestPredicateRoute_DecodeError and TestBind_DecodeError), where we answered 400; a body
// past the nesting limit keeps its 400 (parse_nesting_test.cc). HEAD /healthz used to get a 405
// with a body that a keep-alive client read as the reply to its next request.
#include <string>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "../net/http_test_client.h"
#include "binary_fixture.h"

namespace hami {
namespace {

using nlohmann::json;

class ParseWireTest : public scheduler::testing::SchedulerBinaryTest {};

TEST_F(ParseWireTest, UndecodableFilterAndBindBodiesGetHamisErrorResult) {
  StartScheduler();
  for (const char* body : {"not json", "{", "[]", R"({"NodeNames": 7})"}) {
    auto filter = http_->Post("/filter", body, "application/json");
    ASSERT_TRUE(filter) << sched_->log();
    EXPECT_EQ(filter->status, 200) << body;
    json result = json::parse(filter->body, nullptr, false);
    ASSERT_TRUE(result.is_object()) << filter->body;
    EXPECT_FALSE(result.value("Error", "").empty()) << filter->body;
    EXPECT_TRUE(result["NodeNames"].is_null()) << filter->body;

    auto bind = http_->Post("/bind", body, "application/json");
    ASSERT_TRUE(bind) << sched_->log();
    EXPECT_EQ(bind->status, 200) << body;
    result = json::parse(bind->body, nullptr, false);
    ASSERT_TRUE(result.is_object()) << bind->body;
    EXPECT_FALSE(result.value("Error", "").empty()) << bind->body;
  }
}

TEST_F(ParseWireTest, HeadIsAnsweredWithoutABodyOnAKeptAliveConnection) {
  StartScheduler();
  net::testing::RawClient c(sched_->WaitForPort());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(
      c.Send("HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
             "HEAD /readyz HTTP/1.1\r\nHost: x\r\n\r\n"
             "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  for (const char* path : {"/healthz", "/readyz"}) {
    auto head = c.ReadUntil("\r\n\r\n");
    ASSERT_TRUE(head) << path << "\n" << sched_->log();
    // /readyz may still say 503 (not synced yet); either way the reply has no body.
    EXPECT_TRUE(head->rfind("HTTP/1.1 200", 0) == 0 || head->rfind("HTTP/1.1 503", 0) == 0)
        << path << ": " << *head;
    EXPECT_NE(head->find("Content-Length: "), std::string::npos) << path << ": " << *head;
  }
  auto get = c.Read();
  ASSERT_TRUE(get) << sched_->log();
  EXPECT_EQ(get->status, 200);
  EXPECT_EQ(get->head.find("HTTP/1.1 200"), 0u) << get->head;
}

}  // namespace
}  // namespace hami
