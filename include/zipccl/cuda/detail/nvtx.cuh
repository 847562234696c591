// zipccl: NVTX ranges in a "zipccl" domain, so the codec's launches are named in Nsight Systems.
// Define ZIPCCL_DISABLE_NVTX to compile them out.
#pragma once

#if !defined(ZIPCCL_DISABLE_NVTX) && __has_include(<nvtx3/nvtx3.hpp>)
#include <nvtx3/nvtx3.hpp>
#define ZIPCCL_HAS_NVTX 1
#else
#define ZIPCCL_HAS_NVTX 0
#endif

namespace zipccl::cuda::detail {

#if ZIPCCL_HAS_NVTX
struct nvtx_domain {
  static constexpr const char* name{"zipccl"};
};
using nvtx_range = nvtx3::scoped_range_in<nvtx_domain>;
#else
struct nvtx_range {
  explicit nvtx_range(const char*) {}
};
#endif

}  // namespace zipccl::cuda::detail
