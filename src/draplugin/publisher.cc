#include "draplugin/publisher.h"

#include <algorithm>
#include <map>

#include "common/strings.h"

namespace hami::draplugin {
namespace {

std::string NameOf(const Json& obj) {
  return obj.value("/metadata/name"_json_pointer, std::string());
}

int64_t GenerationOf(const Json& slice) {
  const auto ptr = "/spec/pool/generation"_json_pointer;
  return slice.contains(ptr) && slice.at(ptr).is_number_integer() ? slice.at(ptr).get<int64_t>()
                                                                  : 0;
}

}  // namespace

SlicePublisher::SlicePublisher(k8s::Client* client, SliceOptions options)
    : client_(client), options_(std::move(options)) {}

Result<std::vector<Json>> SlicePublisher::ListPool() {
  k8s::ListOptions list;
  list.field_selector =
      "spec.nodeName=" + options_.node_name + ",spec.driver=" + std::string(kDriverName);
  auto got = client_->ListAll(k8s::resources::kResourceSlices, "", list);
  if (!got) return Error{"list resourceslices: " + got.error().ToString()};
  std::vector<Json> pool;
  for (Json& s : got->items) {
    // The selector again here: a server that ignores field selectors lists every node's slices.
    if (s.value("/spec/driver"_json_pointer, std::string()) != kDriverName) continue;
    if (s.value("/spec/nodeName"_json_pointer, std::string()) != options_.node_name) continue;
    pool.push_back(std::move(s));
  }
  return pool;
}

Status SlicePublisher::Publish(const std::vector<GpuFacts>& gpus) {
  auto published = ListPool();
  if (!published) return std::move(published).take_error();
  int64_t previous = generation_;
  for (const Json& s : *published) previous = std::max(previous, GenerationOf(s));
  auto desired = BuildSlices(gpus, options_, previous + 1);
  if (!desired) return std::move(desired).take_error();
  if (!published->empty() && !PoolChanged(*published, *desired)) {
    generation_ = previous;
    return OkStatus();
  }
  std::map<std::string, const Json*> existing;
  for (const Json& s : *published) existing[NameOf(s)] = &s;
  for (Json& slice : *desired) {
    const std::string name = NameOf(slice);
    auto it = existing.find(name);
    if (it != existing.end()) {
      slice["metadata"]["resourceVersion"] =
          it->second->value("/metadata/resourceVersion"_json_pointer, std::string());
      auto updated = client_->Update(k8s::resources::kResourceSlices, slice);
      if (!updated)
        return Error{"update resourceslice " + Quote(name) + ": " + updated.error().ToString()};
      existing.erase(it);
    } else {
      auto created = client_->Create(k8s::resources::kResourceSlices, "", slice);
      if (!created)
        return Error{"create resourceslice " + Quote(name) + ": " + created.error().ToString()};
    }
    ++writes_;
  }
  generation_ = previous + 1;
  for (const auto& [name, slice] : existing) {
    auto deleted = client_->Delete(k8s::resources::kResourceSlices, "", name);
    if (!deleted && !k8s::IsNotFound(deleted.error())) {
      return Error{"delete resourceslice " + Quote(name) + ": " + deleted.error().ToString()};
    }
  }
  return OkStatus();
}

Status SlicePublisher::Withdraw() {
  auto published = ListPool();
  if (!published) return std::move(published).take_error();
  for (const Json& s : *published) {
    auto deleted = client_->Delete(k8s::resources::kResourceSlices, "", NameOf(s));
    if (!deleted && !k8s::IsNotFound(deleted.error())) {
      return Error{"delete resourceslice " + Quote(NameOf(s)) + ": " + deleted.error().ToString()};
    }
  }
  return OkStatus();
}

}  // namespace hami::draplugin
