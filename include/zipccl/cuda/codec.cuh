// zipccl: umbrella header for the device executor (needs nvcc).
#pragma once

#include "../zipccl.hpp"
#include "compress.cuh"
#include "decompress.cuh"
#include "tuning.cuh"
