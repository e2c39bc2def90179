// The topology-aware pick's work bound (nvidia.h PickByTopology, search_budget.h): issue 30's
// hostile pod (8..28 vGPUs, topology-aware, on 8 A100s in MIG mode: 56 passing instances) is
// answered within the per-node cap, counted in steps; searches that fit the cap give HAMi's
// exhaustive answer; a Schedule call's budget is shared by its nodes and the chosen node keeps
// its pass's picks.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

#include "device/schedule.h"
#include "device/vendors/nvidia/nvidia.h"
#include "protocol/keys.h"

namespace hami::device {
namespace {

using nvidia::PickByTopology;
using protocol::MigPlacement;
using protocol::MigProfile;

std::vector<MigPlacement> Ones(std::initializer_list<uint32_t> starts) {
  std::vector<MigPlacement> out;
  for (uint32_t s : starts) out.push_back({s, 1});
  return out;
}

DeviceUsage MigA100(std::string id) {
  return DeviceUsage{.id = std::move(id),
                     .type = "NVIDIA A100-SXM4-40GB",
                     .vendor = "NVIDIA",
                     .health = true,
                     .mode = "mig",
                     .count = 7,
                     .totalmem = 40960,
                     .totalcore = 100,
                     .mig_profiles = {{"1g.5gb", 5120, 14, 1, Ones({0, 1, 2, 3, 4, 5, 6})},
                                      {"2g.10gb", 10240, 28, 2, {{0, 2}, {2, 2}, {4, 2}}},
                                      {"3g.20gb", 20480, 42, 3, {{0, 4}, {4, 4}}}}};
}

// Pair scores between GPU-0..GPU-7 as nvidia-smi topo would give an NVLink pair layout.
protocol::PairScores EightGpuScores() {
  protocol::PairScores out;
  for (int a = 0; a < 8; ++a) {
    protocol::DevicePairScore e{.uuid = "GPU-" + std::to_string(a)};
    for (int b = 0; b < 8; ++b) {
      if (a != b)
        e.score["GPU-" + std::to_string(b)] = (a / 2 == b / 2) ? 100 : (a / 4 == b / 4 ? 40 : 10);
    }
    out.push_back(std::move(e));
  }
  return out;
}

NodeUsage MigNode(std::string name) {
  NodeUsage node{.name = std::move(name)};
  for (int i = 0; i < 8; ++i) node.devices.push_back(MigA100("GPU-" + std::to_string(i)));
  node.pair_scores = EightGpuScores();
  return node;
}

// The hostile case at the unit level: every k in 8..28 answers, and what it spent is within one
// node's cap (the exhaustive search would be C(56, k) x k(k-1)/2 steps: 10^13 at k = 28).
TEST(TopologyBudget, EightMigA100sAnyCountAnswersWithinTheNodeCap) {
  const nvidia::NvidiaDevice dev{nvidia::NvidiaConfig{}};
  NodeUsage node = MigNode("n");
  std::vector<const DeviceUsage*> cands;
  for (const auto& d : node.devices) cands.push_back(&d);
  PodView pod;
  GpuPolicy policy;
  policy.topology_aware = true;
  for (int32_t k = 8; k <= 28; ++k) {
    SearchBudget budget(kFilterSearchSteps);
    FitContext ctx{.pod = &pod, .node = &node, .policy = policy, .search_budget = &budget};
    FitResult r = dev.Fit(cands, DeviceRequest{.nums = k, .type = "NVIDIA", .memreq = 1000}, ctx);
    ASSERT_TRUE(r.fit) << k << ": " << r.Reason();
    EXPECT_EQ(r.devices.size(), static_cast<size_t>(k));
    EXPECT_LE(kFilterSearchSteps - budget.left(), kNodeSearchSteps) << k;
    EXPECT_GT(kFilterSearchSteps - budget.left(), 0u) << k;
  }
}

// The same pod through Schedule over 200 such nodes: one budget for all of them; nodes it
// cannot pay for fail with the reason, and the chosen node's picks are those of its pass.
TEST(TopologyBudget, ScheduleSharesOneBudgetAcrossNodes) {
  Registry registry;
  registry.Register(std::make_unique<nvidia::NvidiaDevice>(nvidia::NvidiaConfig{}));
  std::vector<NodeUsage> nodes;
  for (int i = 0; i < 200; ++i) nodes.push_back(MigNode("node-" + std::to_string(1000 + i)));
  nlohmann::json pod_json = {
      {"metadata",
       {{"name", "p"},
        {"namespace", "ns"},
        {"annotations", {{"hami.io/gpu-scheduler-policy", "topology-aware"}}}}},
      {"spec",
       {{"containers",
         {{{"name", "c"},
           {"resources",
            {{"limits", {{"nvidia.com/gpu", "28"}, {"nvidia.com/gpumem", "1000"}}}}}}}}}}};
  auto pod = ParsePodView(pod_json);
  ASSERT_TRUE(pod) << pod.error();
  ScheduleOptions options;
  options.search_steps = 20000;  // a few nodes' greedy picks
  auto decision = Schedule(registry, *pod, nodes, {}, options);
  ASSERT_TRUE(decision) << decision.error();
  size_t fits = 0, spent = 0;
  for (const auto& n : decision->nodes) {
    if (n.fit) {
      ++fits;
    } else {
      ++spent;
      EXPECT_NE(n.reason.find("TopologySearchBudgetSpent"), std::string::npos) << n.reason;
    }
  }
  EXPECT_GT(fits, 0u);
  EXPECT_GT(spent, 0u);
  ASSERT_NE(decision->Chosen(), nullptr);
  size_t picked = 0;
  for (const auto& ctr : decision->Chosen()->devices.at("NVIDIA")) picked += ctr.size();
  EXPECT_EQ(picked, 28u);
}

// HAMi's exhaustive search, as it was (the reference the bounded pick must equal when small).
std::vector<size_t> Reference(const std::vector<const DeviceUsage*>& passed, size_t k,
                              const protocol::PairScores& scores) {
  auto score = [&](const std::string& a, const std::string& b) -> int64_t {
    const int64_t* ab = nullptr;
    const int64_t* ba = nullptr;
    for (const auto& e : scores) {
      if (e.uuid == a) {
        if (auto it = e.score.find(b); it != e.score.end()) ab = &it->second;
      } else if (e.uuid == b) {
        if (auto it = e.score.find(a); it != e.score.end()) ba = &it->second;
      }
    }
    return ab ? *ab : (ba ? *ba : 0);
  };
  size_t n = passed.size();
  std::vector<size_t> best, combo(k);
  if (k == 1) {
    int64_t lowest = 0;
    for (size_t i = 0; i < n; ++i) {
      int64_t sum = 0;
      for (size_t j = 0; j < n; ++j) {
        if (j != i) sum += score(passed[std::min(i, j)]->id, passed[std::max(i, j)]->id);
      }
      if (best.empty() || sum < lowest) best = {i}, lowest = sum;
    }
    return best;
  }
  for (size_t i = 0; i < k; ++i) combo[i] = i;
  int64_t highest = 0;
  while (true) {
    int64_t sum = 0;
    for (size_t a = 0; a < k; ++a) {
      for (size_t b = a + 1; b < k; ++b) sum += score(passed[combo[a]]->id, passed[combo[b]]->id);
    }
    if (best.empty() || sum > highest) best = combo, highest = sum;
    size_t i = k;
    while (i > 0 && combo[i - 1] == n - k + (i - 1)) --i;
    if (i == 0) break;
    ++combo[i - 1];
    for (size_t j = i; j < k; ++j) combo[j] = combo[j - 1] + 1;
  }
  return best;
}

// Small searches (up to 10 devices, MIG GPUs passing more than once, asymmetric and missing
// scores) give exactly the exhaustive answer.
TEST(TopologyBudget, SmallSearchesKeepTheExhaustiveAnswer) {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    size_t gpus = 2 + rng() % 7;
    std::vector<DeviceUsage> devs;
    for (size_t g = 0; g < gpus; ++g) devs.push_back(MigA100("GPU-" + std::to_string(g)));
    std::vector<const DeviceUsage*> passed;
    for (size_t g = 0; g < gpus; ++g) {
      size_t times = 1 + (rng() % 3 == 0 ? rng() % 2 : 0);
      for (size_t t = 0; t < times && passed.size() < 10; ++t) passed.push_back(&devs[g]);
    }
    if (round % 2) std::shuffle(passed.begin(), passed.end(), rng);  // any order of positions
    protocol::PairScores scores;
    for (size_t a = 0; a < gpus; ++a) {
      if (rng() % 5 == 0) continue;
      protocol::DevicePairScore e{.uuid = devs[a].id};
      for (size_t b = 0; b < gpus; ++b) {
        if (rng() % 4 != 0) e.score[devs[b].id] = static_cast<int64_t>(rng() % 5) * 10;
      }
      scores.push_back(std::move(e));
    }
    for (size_t k = 1; k < passed.size(); ++k) {
      SearchBudget budget(kFilterSearchSteps);
      EXPECT_EQ(PickByTopology(passed, static_cast<int32_t>(k), scores, &budget),
                Reference(passed, k, scores))
          << "round " << round << " k " << k;
    }
  }
}

// Beyond the cap the pick is greedy: the best pair, then the GPUs closest to it.
TEST(TopologyBudget, GreedyBeyondTheCapPrefersLinkedGpus) {
  std::vector<DeviceUsage> devs;
  for (int i = 0; i < 8; ++i) devs.push_back(MigA100("GPU-" + std::to_string(i)));
  std::vector<const DeviceUsage*> passed;
  for (const auto& d : devs) {
    for (int t = 0; t < 7; ++t) passed.push_back(&d);  // 56 positions
  }
  SearchBudget budget(kFilterSearchSteps);
  auto pick = PickByTopology(passed, 4, EightGpuScores(), &budget);
  ASSERT_EQ(pick.size(), 4u);
  // C(56, 4) x 6 = 2.2M steps is over the cap: greedy takes GPU-0 and GPU-1 (score 100), then
  // the position adding most: another instance of GPU-0 (100 to GPU-1, HAMi scores no pair of
  // one GPU) before GPU-2 (40 + 40), and so on.
  std::vector<std::string> ids;
  for (size_t p : pick) ids.push_back(passed[p]->id);
  EXPECT_EQ(ids, (std::vector<std::string>{"GPU-0", "GPU-0", "GPU-1", "GPU-1"}));
  EXPECT_LE(kFilterSearchSteps - budget.left(), kNodeSearchSteps);
  // No budget left at all: no pick (the Fit then fails the node with its reason).
  SearchBudget empty(0);
  EXPECT_TRUE(PickByTopology(passed, 4, EightGpuScores(), &empty).empty());
}

}  // namespace
}  // namespace hami::device
