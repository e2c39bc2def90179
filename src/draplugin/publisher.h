// Keeps this node's pool of ResourceSlices (slices.h) in the API server: written at a new
// generation when what the node has changed (a GPU's health, memory scaling, a GPU gone or
// added), left alone otherwise, and withdrawn on shutdown (docs/DRA.md "ResourceSlices").
#ifndef HAMI_DRAPLUGIN_PUBLISHER_H_
#define HAMI_DRAPLUGIN_PUBLISHER_H_

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "draplugin/slices.h"
#include "k8s/client.h"

namespace hami::draplugin {

class SlicePublisher {
 public:
  // `client` must outlive the publisher.
  SlicePublisher(k8s::Client* client, SliceOptions options);

  // Lists the pool's slices (our driver, this node); when they differ from what `gpus` makes
  // (PoolChanged), writes every slice at the next generation (update in place, create what is
  // missing) and then deletes the pool's other slices. Errors name the slice and the API's answer.
  Status Publish(const std::vector<GpuFacts>& gpus);

  // Deletes every slice of the pool (shutdown: kube-scheduler must not place claims here).
  Status Withdraw();

  // The pool generation last written (0 before the first write).
  int64_t generation() const { return generation_; }
  // Slice writes (create or update) so far: a publish of an unchanged pool writes nothing.
  int64_t writes() const { return writes_; }

 private:
  Result<std::vector<Json>> ListPool();

  k8s::Client* client_;
  SliceOptions options_;
  int64_t generation_ = 0;
  int64_t writes_ = 0;
};

}  // namespace hami::draplugin

#endif  // HAMI_DRAPLUGIN_PUBLISHER_H_
