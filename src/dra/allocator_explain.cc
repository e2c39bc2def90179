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
  for (const Claim& claim : claims_) {
    for (const Request& request : claim.requests) {
      for (const Req& r : request.alts) {
        const std::string prefix = Prefix(r);
        if (devices_.empty()) {
          failure.details.push_back(prefix + "no device of class " + Quote(r.class_name) +
                                    " on the node");
          continue;
        }
        std::vector<std::string> fit;
        for (size_t d = 0; d < devices_.size(); ++d) {
          const Check c = Fits(r, d, /*alone=*/true);
          if (c.verdict == Verdict::kOk) {
            fit.push_back(devices_[d].name);
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
        if (fit.empty()) continue;
        const size_t need = r.all ? r.all_devices.size() : static_cast<size_t>(r.count);
        std::string line = prefix + "wants " + std::to_string(need) +
                           (need == 1 ? " device: " : " devices: ") + Join(fit, ", ") +
                           (fit.size() == 1 ? " fits" : " fit") +
                           " alone, not together with the pod's other requests";
        std::vector<std::string> constraints;
        for (const Constraint& con : claim.constraints) {
          if (!con.AppliesTo(r)) continue;
          constraints.push_back((con.match ? "matchAttribute " : "distinctAttribute ") +
                                con.attribute);
        }
        if (!constraints.empty()) line += " and the constraints " + Join(constraints, ", ");
        failure.details.push_back(std::move(line));
      }
    }
  }
}

}  // namespace hami::dra::internal
