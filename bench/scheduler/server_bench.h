// bench_scheduler subcommands: the figures of issue 4 item 7 that need an API server.
#ifndef HAMI_BENCH_SCHEDULER_SERVER_BENCH_H_
#define HAMI_BENCH_SCHEDULER_SERVER_BENCH_H_

#include <string>

namespace hami::bench {

// Figure 2: POST /filter over loopback against an in-process scheduler::Server whose informers
// sync from an in-process sim apiserver holding `nodes` nodes and `pods` bound pods; `events`
// false turns off the FilteringSucceed event (to show its share of the latency). Each filter
// carries `candidates` node names (< 0: every node; 0: kube-scheduler's default share).
// `api_latency_ms`: added by the sim API server to every request (a remote kube-apiserver).
// `simulation`: also time the Nodes form (the simulation filter) after the NodeNames one.
int RunHttp(int nodes, int pods, int iters, bool events, int candidates, bool async_write = false,
            bool simulation = true, int api_latency_ms = 0);

// Figure 5: Registrar::RunOnce over `nodes` nodes in an in-process sim apiserver.
int RunRegister(int nodes, int passes);

// Figure 4 helpers: fill an external `hami-sim apiserver` at `server` (http URL) over its API,
// and wait until the scheduler at 127.0.0.1:`port` answers a /filter (i.e. has synced).
int RunPopulate(const std::string& server, int nodes, int pods, int threads);
// Waits until the scheduler answers a /filter (it parks filters until its first sync), then
// times `filters` filters with the node names (0: only the wait).
int RunProbe(int port, int nodes, int timeout_s, int filters);

}  // namespace hami::bench

#endif  // HAMI_BENCH_SCHEDULER_SERVER_BENCH_H_
