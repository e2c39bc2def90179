// The client flags every binary shares: --kubeconfig, --kube-qps, --kube-burst, --kube-timeout.
// AddClientFlags is a template over the flag parser (CLI11's CLI::App) so that this header does
// not pull CLI11 in; only a binary's main.cc instantiates it.
#ifndef HAMI_K8S_CLIENT_FLAGS_H_
#define HAMI_K8S_CLIENT_FLAGS_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "k8s/kubeconfig.h"

namespace hami::k8s {

struct ClientFlags {
  std::string kubeconfig;
  double qps = 50;
  int burst = 100;
  std::string timeout = "30s";

  // LoadConfig(kubeconfig) with the limits applied. Errors name the flag.
  Result<RestConfig> Load() const;
};

template <typename App>
void AddClientFlags(App& app, ClientFlags& flags) {
  app.add_option("--kubeconfig", flags.kubeconfig,
                 "kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)");
  app.add_option("--kube-qps", flags.qps, "client-side API requests per second (0: unlimited)");
  app.add_option("--kube-burst", flags.burst, "client-side API request burst");
  app.add_option("--kube-timeout", flags.timeout,
                 "timeout of one API request, e.g. 30s; a bare number is seconds as in HAMi "
                 "(0: the default, 30s)");
}

// A Go duration: a sequence of <number><unit> with units h, m, s, ms, us, ns ("1m30s",
// "250ms"); "0" alone is zero. nullopt otherwise.
std::optional<std::chrono::nanoseconds> ParseGoDuration(std::string_view s);

}  // namespace hami::k8s

#endif  // HAMI_K8S_CLIENT_FLAGS_H_
