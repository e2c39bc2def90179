#include "deviceplugin/container_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/strings.h"

namespace hami::deviceplugin {

Status WriteFileAtomically(const FileSpec& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(file.host_path).parent_path(), ec);
  if (ec) return Error{"create directory of " + Quote(file.host_path) + ": " + ec.message()};
  const std::string tmp = file.host_path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, file.mode & 0777);
  if (fd < 0) return Error{"write " + Quote(tmp) + ": " + std::strerror(errno)};
  ::fchmod(fd, file.mode & 0777);  // whatever the plugin's umask
  size_t done = 0;
  while (done < file.content.size()) {
    ssize_t n = ::write(fd, file.content.data() + done, file.content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return Error{"write " + Quote(tmp) + ": " + why};
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Error{"write " + Quote(tmp) + ": " + why};
  }
  if (::rename(tmp.c_str(), file.host_path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Error{"rename " + Quote(tmp) + " to " + Quote(file.host_path) + ": " + why};
  }
  return OkStatus();
}

Status WriteContainerFiles(const std::vector<ContainerAllocation>& containers) {
  for (const ContainerAllocation& c : containers) {
    for (const FileSpec& f : c.files) {
      if (Status s = WriteFileAtomically(f); !s) return s;
    }
  }
  return OkStatus();
}

}  // namespace hami::deviceplugin
