// Issue 30 item 11/5: text from cluster objects (device types, the node lock, annotations,
// Events, UUIDs, pod and node names) never reaches the operator's terminal as control characters.
// Every field of every text writer (inspect, pods, explain, top) is fed ESC, BEL, CR, a newline,
// DEL, a C1 CSI (U+009B) and a stray byte; the output keeps none of them, with or without colour.
#include <gtest/gtest.h>

#include <string>

#include "cli/kubectl_hami_explain.h"
#include "cli/kubectl_hami_top.h"
#include "cli/kubectl_hami_view.h"

namespace hami::cli {
namespace {

// "\e]0;owned\a" sets the window title; "\e[2J" clears the screen; "\r" overwrites a line.
const std::string kEvil =
    "x\x1b]0;owned\x07\x1b[2J\rfake\nline\x7f\xc2\x9b"
    "31m\x9b|";

// What the writers may print themselves: their own colour codes.
std::string WithoutOwnColours(std::string s) {
  for (const char* code : {"\033[0m", "\033[1m", "\033[31m", "\033[32m", "\033[33m"}) {
    for (size_t at; (at = s.find(code)) != std::string::npos;)
      s.erase(at, std::string(code).size());
  }
  return s;
}

// No C0 but '\n', no DEL, no C1 (as UTF-8 or raw), and the field's text is there, escaped.
void ExpectSafe(const std::string& out, const char* what) {
  SCOPED_TRACE(what);
  std::string s = WithoutOwnColours(out);
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    ASSERT_FALSE(c < 0x20 && c != '\n') << "byte " << int(c) << " at " << i << " in\n" << out;
    ASSERT_NE(c, 0x7f) << out;
    ASSERT_FALSE(c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) < 0xa0)
        << out;
    ASSERT_FALSE(c >= 0x80 && c < 0xa0 && (i == 0 || static_cast<unsigned char>(s[i - 1]) != 0xc2))
        << out;
  }
  EXPECT_NE(s.find("x\\u001b]0;owned\\u0007\\u001b[2J\\rfake"), std::string::npos) << out;
}

TEST(KubectlHamiTerminal, InspectEscapesEveryField) {
  InspectView view;
  NodeRow n;
  n.name = kEvil;
  n.handshake = kEvil;
  n.lock = kEvil;
  n.lock_holder = kEvil;
  DeviceRow d;
  d.uuid = kEvil;
  d.type = kEvil;
  d.vendor = kEvil;
  d.mode = kEvil;
  d.pods = {kEvil, kEvil};
  n.devices = {d};
  view.nodes = {n};
  for (bool colour : {false, true}) {
    ExpectSafe(InspectTable(view, {.colour = colour}), "inspect");
    ExpectSafe(InspectTable(view, {.wide = true, .colour = colour}), "inspect -o wide");
  }
  // The node's lock without a holder is printed as written.
  view.nodes[0].lock_holder.clear();
  ExpectSafe(InspectTable(view, {}), "inspect, legacy lock");
}

TEST(KubectlHamiTerminal, PodsEscapesEveryField) {
  PodsView view;
  PodRow p;
  p.ns = kEvil;
  p.name = kEvil;
  p.node = kEvil;
  p.bind_phase = kEvil;
  p.phase = kEvil;
  p.reason = kEvil;
  p.devices = {{kEvil, kEvil, 1, 2}};
  view.pods = {p};
  for (bool colour : {false, true}) {
    ExpectSafe(PodsTable(view, {.colour = colour}), "pods");
    ExpectSafe(PodsTable(view, {.wide = true, .colour = colour}), "pods -o wide");
  }
}

TEST(KubectlHamiTerminal, ExplainEscapesEveryField) {
  ExplainView view;
  view.ns = view.name = view.phase = kEvil;
  view.node = kEvil;
  view.bind_phase = kEvil;
  ExplainRequest req;
  req.container = req.vendor = kEvil;
  view.requests = {req};
  view.annotations = {{kEvil, kEvil}};
  view.devices = {{kEvil, kEvil, 1, 2}};
  view.scheduling = kEvil;
  ExplainNode node;
  node.name = node.reason = node.words = kEvil;
  view.nodes = {node};
  ExplainLock lock;
  lock.node = lock.value = lock.holder = kEvil;
  view.lock = lock;
  view.history = {
      {.time = kEvil, .type = kEvil, .reason = kEvil, .message = kEvil, .source = kEvil}};
  view.summary = kEvil;
  for (bool colour : {false, true}) ExpectSafe(ExplainText(view, {.colour = colour}), "explain");
  view.lock->holder.clear();  // the lock value itself is printed
  ExpectSafe(ExplainText(view, {}), "explain, legacy lock");
}

TEST(KubectlHamiTerminal, TopEscapesEveryField) {
  TopView view;
  TopNode n;
  n.name = kEvil;
  n.error = kEvil;
  TopRow row;
  row.ns = row.pod = row.container = row.uuid = kEvil;
  n.rows = {row};
  view.nodes = {n};
  for (bool colour : {false, true}) ExpectSafe(TopTable(view, {.colour = colour}), "top");
}

TEST(KubectlHamiTerminal, DraFieldsAreEscapedToo) {
  DraShare share;
  share.claim = share.request = share.node = share.device = share.uuid = share.share_id = kEvil;
  share.pods = {kEvil};
  InspectView inspect;
  NodeRow n;
  n.name = kEvil;
  DeviceRow d;
  d.uuid = d.type = d.vendor = d.mode = d.driver = d.device = kEvil;
  d.shares = {share};
  n.devices = {d};
  inspect.nodes = {n};
  PodsView pods;
  PodRow p;
  p.ns = p.name = kEvil;
  p.claims = {{kEvil, kEvil, true, {share}}, {kEvil, std::nullopt, false, {}}};
  pods.pods = {p};
  ExplainView explain;
  explain.ns = explain.name = explain.summary = kEvil;
  ExplainClaim claim;
  claim.name = claim.state = kEvil;
  claim.claim = claim.template_name = kEvil;
  claim.containers = {kEvil};
  claim.shares = {share};
  explain.claims = {claim};
  explain.dra_nodes = {{kEvil, false, kEvil, {kEvil, kEvil}}, {kEvil, true, "", {kEvil}}};
  TopView top;
  TopNode tn;
  tn.name = kEvil;
  TopRow row;
  row.ns = row.pod = row.container = row.uuid = kEvil;
  row.claims = {kEvil};
  tn.rows = {row};
  top.nodes = {tn};
  for (bool colour : {false, true}) {
    ExpectSafe(InspectTable(inspect, {.colour = colour}), "inspect, DRA");
    ExpectSafe(InspectTable(inspect, {.wide = true, .colour = colour}), "inspect -o wide, DRA");
    ExpectSafe(PodsTable(pods, {.colour = colour}), "pods, DRA");
    ExpectSafe(ExplainText(explain, {.colour = colour}), "explain, DRA");
    ExpectSafe(TopTable(top, {.colour = colour}), "top, DRA");
  }
}

}  // namespace
}  // namespace hami::cli
