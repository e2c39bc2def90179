// bench_scheduler: the scheduler figures of issue 4 item 7 that need an API server (the
// compute-only filter figures are bench_filter's). Usage:
//   bench_scheduler http     [nodes=1000] [pods=20000] [iters=200] [events|noevents]
//                            [candidates=-1: every node; 0: kube-scheduler's default share]
//                            [sync|async: the decision write before the answer or in the
//                             background (--async-decision-write); either skips the Nodes form]
//                            [api_latency_ms=0: added to each API request (a remote API server)]
//   bench_scheduler register [nodes=1000] [passes=5]
//   bench_scheduler populate URL [nodes=1000] [pods=20000]   (fills an external sim apiserver)
//   bench_scheduler probe PORT [nodes=1000] [timeout_s=600] [filters=100]
//                                         (waits for a scheduler's sync, then times filters)
// Latencies are wall clock per call; run on a quiet machine and repeat (see README.md).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "server_bench.h"

namespace {

int Arg(int argc, char** argv, int i, int fallback) {
  return i < argc ? std::atoi(argv[i]) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hami::bench;
  std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "http") {
    bool events = !(argc > 5 && std::string(argv[5]) == "noevents");
    const std::string mode = argc > 7 ? argv[7] : "";
    return RunHttp(Arg(argc, argv, 2, 1000), Arg(argc, argv, 3, 20000), Arg(argc, argv, 4, 200),
                   events, Arg(argc, argv, 6, -1), mode == "async", mode.empty(),
                   Arg(argc, argv, 8, 0));
  }
  if (cmd == "register") return RunRegister(Arg(argc, argv, 2, 1000), Arg(argc, argv, 3, 5));
  if (cmd == "populate" && argc > 2) {
    return RunPopulate(argv[2], Arg(argc, argv, 3, 1000), Arg(argc, argv, 4, 20000), 4);
  }
  if (cmd == "probe" && argc > 2) {
    return RunProbe(std::atoi(argv[2]), Arg(argc, argv, 3, 1000), Arg(argc, argv, 4, 600),
                    Arg(argc, argv, 5, 100));
  }
  std::fprintf(stderr, "usage: bench_scheduler http|register|populate URL|probe PORT ...\n");
  return 2;
}
