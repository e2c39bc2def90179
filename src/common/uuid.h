// RFC 4122 version 4 UUIDs, as the API server writes metadata.uid and kube-scheduler a shareID.
#ifndef HAMI_COMMON_UUID_H_
#define HAMI_COMMON_UUID_H_

#include <cstdint>
#include <string>

namespace hami {

// "xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx" from 128 random bits `hi`, `lo` (the version and
// variant bits are set over them).
std::string FormatUuidV4(uint64_t hi, uint64_t lo);

}  // namespace hami

#endif  // HAMI_COMMON_UUID_H_
