// Writes the files of an Allocate plan (allocate.h FileSpec: each container's limits file) on the
// host, before kubelet is answered and the container can start.
#ifndef HAMI_DEVICEPLUGIN_CONTAINER_FILES_H_
#define HAMI_DEVICEPLUGIN_CONTAINER_FILES_H_

#include <vector>

#include "common/result.h"
#include "deviceplugin/allocate.h"

namespace hami::deviceplugin {

// Writes every file of every container: parent directories created (0755), content written to
// a temporary file in the same directory with the file's mode (0644 for the limits file: readable
// by any container user, writable by nobody but the plugin; 0666 for the region file), then
// renamed over the target, so libvgpu never reads a half-written file. Errors name the path and
// the system's reason.
Status WriteContainerFiles(const std::vector<ContainerAllocation>& containers);

// One file the same way: parent directories created, written to "<path>.tmp" with its mode,
// synced, then renamed over the path.
Status WriteFileAtomically(const FileSpec& file);

}  // namespace hami::deviceplugin

#endif  // HAMI_DEVICEPLUGIN_CONTAINER_FILES_H_
