#include "protocol/pod_devices.h"

#include "common/strings.h"

namespace hami::protocol {

namespace {

// Go's strconv.ParseInt(s, 10, 32): one optional sign ('+' or '-'), then digits.
std::optional<int32_t> ParseGoInt32(std::string_view s) {
  if (s.size() > 1 && s[0] == '+' && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
  return ParseInt32(s);
}

Status DecodeDevice(std::string_view part, const std::string& where, ContainerDevice* d) {
  std::vector<std::string_view> f = Split(part, ',');
  std::string entry = where + " " + Quote(part);
  if (f.size() < 4) {
    return Error{entry + ": want 4 comma-separated fields (UUID,Type,UsedMem,UsedCores), got " +
                 std::to_string(f.size())};
  }
  // A negative size would free memory or cores that are in use (anyone who creates pods writes
  // this annotation), so it is malformed here although Go's ParseInt takes it.
  auto mem = ParseGoInt32(f[2]);
  if (!mem) return Error{entry + ": field \"usedmem\": want an int32, got " + Quote(f[2])};
  if (*mem < 0)
    return Error{entry + ": field \"usedmem\": must not be negative, got " + Quote(f[2])};
  auto cores = ParseGoInt32(f[3]);
  if (!cores) return Error{entry + ": field \"usedcores\": want an int32, got " + Quote(f[3])};
  if (*cores < 0) {
    return Error{entry + ": field \"usedcores\": must not be negative, got " + Quote(f[3])};
  }
  d->uuid = std::string(f[0]);
  d->type = std::string(f[1]);
  d->usedmem = *mem;
  d->usedcores = *cores;
  return OkStatus();
}

Result<ContainerDevices> DecodeContainer(std::string_view value, const std::string& where) {
  ContainerDevices out;
  size_t index = 0;
  for (std::string_view part : Split(value, ':')) {
    if (part.find(',') == std::string_view::npos) continue;
    Status s = DecodeDevice(part, where + "device " + std::to_string(index), &out.emplace_back());
    if (!s) return std::move(s).take_error();
    ++index;
  }
  return out;
}

}  // namespace

std::string EncodeContainerDevices(const ContainerDevices& devices) {
  std::string out;
  for (const auto& d : devices) {
    out += d.uuid + "," + d.type + "," + std::to_string(d.usedmem) + "," +
           std::to_string(d.usedcores) + ":";
  }
  return out;
}

std::string EncodePodDevices(const PodDevices& pod) {
  std::string out;
  for (const auto& c : pod) out += EncodeContainerDevices(c) + ";";
  return out;
}

Result<ContainerDevices> DecodeContainerDevices(std::string_view value) {
  return DecodeContainer(value, "");
}

Result<PodDevices> DecodePodDevices(std::string_view value) {
  PodDevices out;
  std::vector<std::string_view> segments = Split(value, ';');
  out.reserve(segments.size());
  for (size_t i = 0; i < segments.size(); ++i) {
    auto c = DecodeContainer(segments[i], "container " + std::to_string(i) + " ");
    if (!c) return std::move(c).take_error();
    out.push_back(std::move(c).value());
  }
  return out;
}

bool HasVendorDevice(std::string_view value, std::string_view vendor) {
  for (std::string_view segment : Split(value, ';')) {
    for (std::string_view part : Split(segment, ':')) {
      std::vector<std::string_view> f = Split(part, ',');
      if (f.size() >= 4 && f[1].find(vendor) != std::string_view::npos) return true;
    }
  }
  return false;
}

std::optional<size_t> FirstNonEmptyContainer(const PodDevices& pod) {
  for (size_t i = 0; i < pod.size(); ++i) {
    if (!pod[i].empty()) return i;
  }
  return std::nullopt;
}

std::optional<size_t> FirstNonEmptyContainer(std::string_view value) {
  std::vector<std::string_view> segments = Split(value, ';');
  for (size_t i = 0; i < segments.size(); ++i) {
    for (std::string_view part : Split(segments[i], ':')) {
      if (part.find(',') != std::string_view::npos) return i;
    }
  }
  return std::nullopt;
}

}  // namespace hami::protocol
