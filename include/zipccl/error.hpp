// zipccl: status codes and the exception type of the throwing convenience wrappers.
#pragma once

#include <stdexcept>
#include <string>

#include "config.hpp"

namespace zipccl {

// Every call that may see bad input returns a status. Codes are stable: they may be stored, and
// the same codes are reported per tensor by the device executor.
enum class [[nodiscard]] status : int {
  success = 0,
  invalid_argument = 1,      // null pointer with a non-zero size, bad option value
  buffer_too_small = 2,      // the caller's output buffer cannot hold the result
  truncated = 3,             // the input ends before the stream does
  bad_magic = 4,             // not a zipccl stream
  unsupported_version = 5,   // a stream of a newer format version
  corrupt = 6,               // a field or offset is inconsistent
  checksum_mismatch = 7,     // a header or chunk check value does not match its bytes
  type_mismatch = 8,         // the stream holds a different element type than requested
  cuda_error = 9,            // a CUDA runtime call failed (device executor)
  peer_failed = 10,          // another rank of the communicator failed or aborted
  size_mismatch = 11,        // a message's size differs between sender and receiver
  timed_out = 12,            // a transport operation did not complete in time
  config_mismatch = 13,      // the peer was set up differently (a subspace codec's seed, dims)
  wire_overflow = 14,        // a compressed segment did not fit its fixed-size wire budget
                             // (collective_options::device_wire.spill_permille)
  unsupported_mode = 15,     // a valid chunk this decoder was built without (rANS in a block_decode with
                             // Entropy = false, or in the per-thread device decode_chunk)
};

ZIPCCL_HOST_DEVICE const char* to_string(status s) {
  switch (s) {
    case status::success: return "success";
    case status::invalid_argument: return "invalid argument";
    case status::buffer_too_small: return "output buffer too small";
    case status::truncated: return "truncated stream";
    case status::bad_magic: return "not a zipccl stream (bad magic)";
    case status::unsupported_version: return "unsupported stream version";
    case status::corrupt: return "corrupt stream";
    case status::checksum_mismatch: return "checksum mismatch";
    case status::type_mismatch: return "element type mismatch";
    case status::cuda_error: return "CUDA runtime error";
    case status::peer_failed: return "a peer rank failed";
    case status::size_mismatch: return "message size mismatch between ranks";
    case status::timed_out: return "transport operation timed out";
    case status::config_mismatch: return "the peer's configuration differs (seed or dimensions)";
    case status::wire_overflow:
      return "a compressed segment did not fit its fixed-size wire budget (raise device_wire.spill_permille)";
    case status::unsupported_mode:
      return "a chunk mode this decoder was built without (rANS: host::decompress, cuda::decompress, or "
             "cuda::block_decode with Entropy = true)";
  }
  return "unknown status";
}

// Thrown only by host convenience wrappers (functions returning containers, RAII objects).
class error : public std::runtime_error {
 public:
  error(status s, const std::string& what)
      : std::runtime_error(what + ": " + to_string(s)), status_(s) {}
  status code() const noexcept { return status_; }

 private:
  status status_;
};

inline void throw_if_error(status s, const char* what) {
  if (s != status::success) throw error(s, what);
}

}  // namespace zipccl
