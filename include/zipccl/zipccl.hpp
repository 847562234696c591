// zipccl: umbrella header for the host-side library (no CUDA needed).
#pragma once

#include "codebook/analytic_gaussian.hpp"
#include "codebook/fixed.hpp"
#include "codebook/histogram.hpp"
#include "codebook/table.hpp"
#include "codec/chunk_codec.hpp"
#include "codec/codec.hpp"
#include "config.hpp"
#include "element.hpp"
#include "error.hpp"
#include "format/stream.hpp"
#include "host/compress.hpp"
#include "host/decompress.hpp"
#include "host/inspect.hpp"
