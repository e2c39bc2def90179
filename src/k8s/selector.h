// Label and field selectors in the apiserver's string syntax, parsed once and matched many
// times. Used by the sim apiserver to filter lists and watches and by informers.
//
// Label selector: comma-separated requirements, each one of
//   key | !key | key=v | key==v | key!=v | key in (a,b) | key notin (a,b)
// Field selector: comma-separated `path=v`, `path==v` or `path!=v` over dotted JSON paths
// (metadata.name, metadata.namespace, spec.nodeName, status.phase, ...).
#ifndef HAMI_K8S_SELECTOR_H_
#define HAMI_K8S_SELECTOR_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "k8s/object.h"

namespace hami::k8s {

class LabelSelector {
 public:
  enum class Op { kEquals, kNotEquals, kIn, kNotIn, kExists, kDoesNotExist };
  struct Requirement {
    std::string key;
    Op op = Op::kExists;
    std::vector<std::string> values;
  };

  // The empty selector matches everything. Errors name the offending requirement.
  static Result<LabelSelector> Parse(std::string_view text);

  bool empty() const { return requirements_.empty(); }
  bool Matches(const StringMap& labels) const;
  // Matches metadata.labels of `obj`.
  bool MatchesObject(const Json& obj) const;
  const std::vector<Requirement>& requirements() const { return requirements_; }

 private:
  std::vector<Requirement> requirements_;
};

class FieldSelector {
 public:
  struct Requirement {
    std::string path;
    bool negate = false;
    std::string value;
  };

  static Result<FieldSelector> Parse(std::string_view text);

  bool empty() const { return requirements_.empty(); }
  bool Matches(const Json& obj) const;
  const std::vector<Requirement>& requirements() const { return requirements_; }

 private:
  std::vector<Requirement> requirements_;
};

}  // namespace hami::k8s

#endif  // HAMI_K8S_SELECTOR_H_
