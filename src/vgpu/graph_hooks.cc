// Hooks of CUDA graphs' memory allocation nodes. The driver reserves a graph's allocation-node
// memory for each executable graph, so an instantiation is charged the bytes of the graph's
// allocation nodes (on their device) until cuGraphExecDestroy; past the limit it is refused
// before the driver instantiates anything. docs/vgpu.md "Memory".
#include <pthread.h>

#include <cstdint>

#include "vgpu/charge.h"
#include "vgpu/hooks.h"
#include "vgpu/log.h"
#include "vgpu/runtime.h"

namespace hami::vgpu {
namespace {

std::uint64_t Key(const void* handle) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(handle));
}

void AddGraphBytes(Runtime* rt, CUgraph graph, const CudaMemAllocNodeParams& params) {
  int dev = params.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE
                ? NvmlIndexOf(rt, params.poolProps.location.id)
                : CurrentNvmlIndex(rt);
  pthread_mutex_lock(&rt->pool_mu);
  AllocEntry entry{Key(graph), 0, dev, 0};
  rt->graph_allocs.Erase(entry.key, &entry);
  entry.bytes += params.bytesize;
  rt->graph_allocs.Insert(entry);
  pthread_mutex_unlock(&rt->pool_mu);
}

AllocEntry GraphBytes(Runtime* rt, CUgraph graph) {
  pthread_mutex_lock(&rt->pool_mu);
  AllocEntry entry{Key(graph), 0, -1, 0};
  if (rt->graph_allocs.Erase(entry.key, &entry)) rt->graph_allocs.Insert(entry);
  pthread_mutex_unlock(&rt->pool_mu);
  return entry;
}

// Charges the graph's allocation-node bytes, instantiates, and records the charge under the
// executable graph (undone when the driver fails).
template <typename Call>
CUresult ChargedInstantiate(Runtime* rt, CUgraphExec* exec, CUgraph graph, Call call) {
  AllocEntry bytes = GraphBytes(rt, graph);
  if (bytes.bytes == 0) return call();
  bool charged = false;
  CUresult r = Precharge(rt, bytes.dev, bytes.bytes, &charged);
  if (r != CUDA_SUCCESS) return r;
  r = call();
  if (!charged) return r;
  if (r != CUDA_SUCCESS) {
    rt->region.Uncharge(bytes.dev, bytes.bytes, ChargeKind::kData);
  } else if (exec == nullptr || !Record(&rt->graph_execs, Key(*exec), bytes.dev, bytes.bytes, 0)) {
    if (exec != nullptr) VGPU_REAL_CUDA(cuGraphExecDestroy)(*exec);
    rt->region.Uncharge(bytes.dev, bytes.bytes, ChargeKind::kData);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return r;
}

}  // namespace

extern "C" {

CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                size_t num_deps, CudaMemAllocNodeParams* params) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuGraphAddMemAllocNode);
  if (real == nullptr) return kNoDriver;
  CUresult r = real(node, graph, deps, num_deps, params);
  if (r == CUDA_SUCCESS && params != nullptr) AddGraphBytes(rt, graph, *params);
  return r;
}

CUresult cuGraphAddNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t num_deps,
                        CudaGraphNodeParams* params) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuGraphAddNode);
  if (real == nullptr) return kNoDriver;
  CUresult r = real(node, graph, deps, num_deps, params);
  if (r == CUDA_SUCCESS && params != nullptr && params->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
    AddGraphBytes(rt, graph, params->alloc);
  }
  return r;
}

CUresult cuGraphAddNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                           const void* edge_data, size_t num_deps, CudaGraphNodeParams* params) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuGraphAddNode_v2);
  if (real == nullptr) return kNoDriver;
  CUresult r = real(node, graph, deps, edge_data, num_deps, params);
  if (r == CUDA_SUCCESS && params != nullptr && params->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
    AddGraphBytes(rt, graph, params->alloc);
  }
  return r;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuGraphInstantiateWithFlags);
  if (real == nullptr) return kNoDriver;
  return ChargedInstantiate(rt, exec, graph, [&] { return real(exec, graph, flags); });
}

CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph, void* params) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuGraphInstantiateWithParams);
  if (real == nullptr) return kNoDriver;
  return ChargedInstantiate(rt, exec, graph, [&] { return real(exec, graph, params); });
}

// What `--default-stream per-thread` builds call (cuda.h maps the name), and what
// cuGetProcAddress hands out with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph, void* params) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuGraphInstantiateWithParams_ptsz);
  if (real == nullptr) return kNoDriver;
  return ChargedInstantiate(rt, exec, graph, [&] { return real(exec, graph, params); });
}

// The instantiation entries of CUDA 10.0-11.x (dlsym, cuGetProcAddress below 12000).
CUresult cuGraphInstantiate(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log,
                            size_t log_size) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuGraphInstantiate);
  if (real == nullptr) return kNoDriver;
  return ChargedInstantiate(rt, exec, graph,
                            [&] { return real(exec, graph, error_node, log, log_size); });
}

CUresult cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log,
                               size_t log_size) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuGraphInstantiate_v2);
  if (real == nullptr) return kNoDriver;
  return ChargedInstantiate(rt, exec, graph,
                            [&] { return real(exec, graph, error_node, log, log_size); });
}

CUresult cuGraphExecDestroy(CUgraphExec exec) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuGraphExecDestroy);
  if (real == nullptr) return kNoDriver;
  return TrackedRelease(rt, &rt->graph_execs, Key(exec), [&] { return real(exec); });
}

CUresult cuGraphDestroy(CUgraph graph) {
  Runtime* rt = Rt();
  auto real = VGPU_REAL_CUDA(cuGraphDestroy);
  if (real == nullptr) return kNoDriver;
  CUresult r = real(graph);
  if (r == CUDA_SUCCESS) {
    AllocEntry entry{};
    pthread_mutex_lock(&rt->pool_mu);
    rt->graph_allocs.Erase(Key(graph), &entry);
    pthread_mutex_unlock(&rt->pool_mu);
  }
  return r;
}

}  // extern "C"
}  // namespace hami::vgpu
