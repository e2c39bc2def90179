// Why a pod's claims do not fit a node (NodeFailure in allocator.h): per claim and request, why
// each device of the node was rejected on its own, and when enough devices fit one at a time,
// that they do not fit together.
#include "common/strings.h"
#include "dra/allocator_internal.h"

namespace hami::dra::internal {

NodeFailure Run::Failure() {
  NodeFailure failure;
  failure.reason = "cannot allocate all claims";
  failure.details = pool_notes_;
  if (!errors_.empty()) {
    failure.details.insert(failure.details.end(), errors_.begin(), errors_.end());
    return failure;
  }
  Explain(failure);
  return failure;
}

void Run::Explain(NodeFailure& failure) {
  struct Summary {
    const Req* req;
    std::vector<std::string> fit;  // devices that can serve it on their own
  };
  std::vector<Summary> summaries;
  bool hopeless = false;  // some request has no device at all: the failure is there
  for (const Claim& claim : claims_) {
    for (const Request& request : claim.requests) {
      bool any = false;
      for (const Req& r : request.alts) {
        const std::string prefix = Prefix(r);
        if (devices_.empty()) {
          failure.details.push_back(prefix + "no device of class " + Quote(r.class_name) +
                                    " on the node");
          continue;
        }
        Summary s{&r, {}};
        for (size_t d = 0; d < devices_.size(); ++d) {
          const Check c = Fits(r, d, /*alone=*/true);
          if (c.verdict == Verdict::kOk) {
            s.fit.push_back(devices_[d].name);
          } else if (c.verdict == Verdict::kError) {
            failure.details.push_back(prefix + c.why);
          } else {
            failure.details.push_back(prefix + devices_[d].name + ": " + c.why);
          }
        }
        if (r.all && r.all_devices.empty()) {
          failure.details.push_back(prefix + "allocationMode All: no device matches");
          continue;
        }
        if (s.fit.empty()) continue;
        any = true;
        summaries.push_back(std::move(s));
      }
      hopeless = hopeless || !any;
    }
  }
  if (hopeless) return;
  // Every request has devices that serve it alone: they do not serve all of them together.
  for (const Summary& s : summaries) {
    const Req& r = *s.req;
    const size_t need = r.all ? r.all_devices.size() : static_cast<size_t>(r.count);
    std::string line = Prefix(r) + "wants " + std::to_string(need) +
                       (need == 1 ? " device: " : " devices: ") + Join(s.fit, ", ") +
                       (s.fit.size() == 1 ? " fits" : " fit") +
                       " alone, not together with the pod's other requests";
    std::vector<std::string> constraints;
    for (const Constraint& con : claims_[r.claim].constraints) {
      if (!con.AppliesTo(r)) continue;
      constraints.push_back((con.match ? "matchAttribute " : "distinctAttribute ") + con.attribute);
    }
    if (!constraints.empty()) line += " and the constraints " + Join(constraints, ", ");
    failure.details.push_back(std::move(line));
  }
}

}  // namespace hami::dra::internal
