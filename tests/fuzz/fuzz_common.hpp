// Shared by the fuzz target and its seed generator: the first input byte selects the mode.
#pragma once

#include <cstdint>

namespace zipccl::fuzzing {

enum mode : std::uint8_t {
  decode_raw = 0,       // the rest is a stream, decoded as it is
  decode_repaired = 1,  // the rest is a stream whose hashes are recomputed first (reaches deep checks)
  round_trip = 2,       // byte 1: type, byte 2: codebook (0..3, entropy last), byte 3: flags; the rest is
                        // element data (each input compressed with and without zero masks)
  wire = 3,             // byte 1: type, bytes 2-3: count (LE); the rest is a collective's wire segment
                        // (fixed section, then tail), checksums on, 256-element chunks
  npy = 4,              // the rest is a .npy file for the zipccl tool's reader (examples/tool/npy.hpp)
  mode_count = 5
};

}  // namespace zipccl::fuzzing
