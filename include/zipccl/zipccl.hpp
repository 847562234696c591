// zipccl: umbrella header for everything that needs only a C++17 compiler and the standard
// library: the lossless codec (host executor), the host collectives, the host transport concept
// and transport::local. Not here, because they need more than that: transport/mpi.hpp (MPI),
// subspace/ (a CBLAS), cuda/ and subspace/cuda/ (nvcc, CUDA runtime, cuBLAS).
#pragma once

#include "codebook/analytic_gaussian.hpp"
#include "codebook/entropy.hpp"
#include "codebook/fixed.hpp"
#include "codebook/histogram.hpp"
#include "codebook/table.hpp"
#include "codec/chunk_codec.hpp"
#include "codec/codec.hpp"
#include "collective.hpp"
#include "communicator.hpp"
#include "config.hpp"
#include "convert.hpp"
#include "element.hpp"
#include "error.hpp"
#include "format/stream.hpp"
#include "host/compress.hpp"
#include "host/decompress.hpp"
#include "host/inspect.hpp"
