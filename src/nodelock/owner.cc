#include "nodelock/owner.h"

#include <string>

#include "common/strings.h"
#include "k8s/object.h"
#include "nodelock/call.h"
#include "protocol/keys.h"

namespace hami::nodelock {

namespace internal {

Result<k8s::Json> GetNode(k8s::Client& client, std::string_view node,
                          const k8s::RetryPolicy& retry) {
  auto n = k8s::RetryTransient<k8s::Json>(
      retry, [&] { return client.Get(k8s::resources::kNodes, "", node); });
  if (!n) return Error{"get node " + Quote(node) + ": " + Describe(n.error(), retry)};
  return std::move(*n);
}

}  // namespace internal

bool Holder::Expired(SystemTime now, std::chrono::nanoseconds timeout) const {
  return protocol::NodeLockExpired(lock, now, timeout);
}

Result<Holder> ParseHolder(std::string_view value) {
  auto parsed = protocol::ParseNodeLock(value);
  if (!parsed) return std::move(parsed).take_error();
  return Holder{std::string(value), std::move(*parsed)};
}

Result<std::optional<Holder>> LookupOwner(k8s::Client& client, std::string_view node,
                                          const k8s::RetryPolicy& retry) {
  auto n = internal::GetNode(client, node, retry);
  if (!n) return std::move(n).take_error();
  std::optional<std::string> value = k8s::Annotation(*n, protocol::kNodeLockKey);
  if (!value) return std::optional<Holder>();
  auto holder = ParseHolder(*value);
  if (!holder) return Error{"node " + Quote(node) + ": " + holder.error()};
  return std::optional<Holder>(std::move(*holder));
}

}  // namespace hami::nodelock
