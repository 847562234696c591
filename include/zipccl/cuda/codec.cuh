// zipccl: umbrella header for the device executor (needs nvcc).
#pragma once

#include "../zipccl.hpp"
#include "block_decode.cuh"
#include "block_encode.cuh"
#include "compress.cuh"
#include "context.cuh"
#include "decompress.cuh"
#include "memory.cuh"
#include "runtime.cuh"
#include "tuning.cuh"
