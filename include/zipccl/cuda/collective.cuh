// zipccl: the device collectives, one header each (cuda/collective/): all_gather, reduce_scatter,
// all_reduce, all_to_all, send / recv, on device buffers and the caller's stream over a device
// transport (transport/device.hpp). The rules they share (streams, the outcome in *status_dev,
// errors, workspace, graphs) are in cuda/collective/common.cuh.
//
//   using C = zipccl::codec<zipccl::bf16, zipccl::codebook::analytic_gaussian>;
//   std::uint64_t bytes = zipccl::cuda::all_reduce_workspace<C>(count, t.size());
//   ... cudaMalloc(&ws, bytes) once ...
//   zipccl::cuda::all_reduce<C>(grad, grad_out, count, zipccl::op::sum, t, ws, bytes, status_dev, stream);
#pragma once

#include "collective/all_gather.cuh"
#include "collective/all_reduce.cuh"
#include "collective/all_to_all.cuh"
#include "collective/common.cuh"
#include "collective/reduce_scatter.cuh"
#include "collective/send_recv.cuh"
