// Filter failure reason strings (HAMi `GenReason` / `ParseReason`), e.g.
//   "1/3 CardInsufficientMemory, 2/3 CardTypeMismatch"
// Entries are "<count>/<devices considered> <Reason>", sorted lexicographically as strings,
// joined by ", ". This is the value kube-scheduler shows in FailedNodes and in pod events.
#ifndef HAMI_PROTOCOL_REASON_H_
#define HAMI_PROTOCOL_REASON_H_

#include <map>
#include <string>
#include <string_view>

#include "common/result.h"

namespace hami::protocol {

// The reason names HAMi's NVIDIA fit uses (docs/protocol.md#nvidias-fit), for callers that build
// counters.
inline constexpr std::string_view kCardNotHealth = "CardNotHealth";
inline constexpr std::string_view kCardCordoned = "CardCordoned";
inline constexpr std::string_view kCardTypeMismatch = "CardTypeMismatch";
inline constexpr std::string_view kNumaNotFit = "NumaNotFit";
inline constexpr std::string_view kCardUuidMismatch = "CardUuidMismatch";
inline constexpr std::string_view kCardTimeSlicingExhausted = "CardTimeSlicingExhausted";
inline constexpr std::string_view kExclusiveDeviceAllocateConflict =
    "ExclusiveDeviceAllocateConflict";
inline constexpr std::string_view kResourceQuotaNotFit = "ResourceQuotaNotFit";
inline constexpr std::string_view kCardInsufficientMemory = "CardInsufficientMemory";
inline constexpr std::string_view kCardInsufficientCore = "CardInsufficientCore";
inline constexpr std::string_view kCardComputeUnitsExhausted = "CardComputeUnitsExhausted";
inline constexpr std::string_view kCardMigTopologyInfeasible = "CardMigTopologyInfeasible";
inline constexpr std::string_view kNodeInsufficientDevice = "NodeInsufficientDevice";
inline constexpr std::string_view kAllocatedCardsInsufficientRequest =
    "AllocatedCardsInsufficientRequest";

// Reason name -> number of devices rejected for it.
using ReasonCounts = std::map<std::string, int>;

// GenReason({{"CardInsufficientMemory",1},{"CardTypeMismatch",2}}, 3)
//   = "1/3 CardInsufficientMemory, 2/3 CardTypeMismatch". Zero counts are left out.
std::string EncodeReason(const ReasonCounts& counts, int devices_considered);

struct DecodedReason {
  ReasonCounts counts;
  int devices_considered = 0;  // the denominator; all entries must agree on it
};

// Inverse of EncodeReason. "" decodes to no entries. Errors name the entry that is malformed.
Result<DecodedReason> DecodeReason(std::string_view value);

}  // namespace hami::protocol

#endif  // HAMI_PROTOCOL_REASON_H_
