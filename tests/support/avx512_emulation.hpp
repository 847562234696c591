// Test support: the AVX-512 intrinsics that zipccl's AVX-512 paths use (host/detail/avx512.hpp,
// avx512_rans.hpp), written as plain C++ loops after Intel's definitions, so that those paths run
// and are compared with the reference on any x86 machine with AVX2 (test_host_simd_avx512_emulated).
//
// Include this before anything of zipccl's: it includes <immintrin.h>, sets ZIPCCL_HAS_AVX512 to 1
// and renames each intrinsic to its loop below. GCC's 64-byte vector types (__m512i, the mask
// types) exist without the AVX-512 flags; only its intrinsic functions need them. Masked loads and
// stores touch exactly the masked elements, as the instructions do (a masked-off element may lie
// past the end of a buffer), and gathers read exactly their sixteen elements, so the sanitizer
// build checks the paths' memory accesses too (but for the AVX2 gathers that the AVX-512 rANS
// decoder issues, gather16, which are real instructions here and invisible to the sanitizer; their
// indices are masked to the 4096-entry slot table). Speed means nothing here: the real instructions run
// in test_host_simd_avx512, on CPUs that have them.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"  // (64-byte vectors passed by value without AVX-512)
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(ZIPCCL_HAS_AVX512)
#error "avx512_emulation.hpp must come before every zipccl header"
#endif
#define ZIPCCL_HAS_AVX512 1

namespace zipccl_emu {

using u8 = std::uint8_t;
using u16 = std::uint16_t;
using u32 = std::uint32_t;
using u64 = std::uint64_t;
using i32 = std::int32_t;

template <class T, unsigned Bytes = 64>
struct lanes {
  static constexpr unsigned n = Bytes / sizeof(T);
  T v[n];
  T& operator[](unsigned i) { return v[i]; }
  const T& operator[](unsigned i) const { return v[i]; }
};
template <class T, class V>
inline lanes<T, sizeof(V)> of(const V& a) {
  lanes<T, sizeof(V)> l;
  std::memcpy(l.v, &a, sizeof(V));
  return l;
}
template <class V, class T, unsigned B>
inline V to(const lanes<T, B>& l) {
  static_assert(sizeof(V) == B, "lane count");
  V a;
  std::memcpy(&a, l.v, B);
  return a;
}
inline bool bit(u64 k, unsigned i) { return (k >> i) & 1u; }

// loads and stores
inline __m512i loadu(const void* p) {
  __m512i a;
  std::memcpy(&a, p, 64);
  return a;
}
inline __m512i load(const void* p) {  // (vmovdqa64 faults on a misaligned address)
  if (reinterpret_cast<std::uintptr_t>(p) % 64 != 0) std::abort();
  return loadu(p);
}
inline void storeu(void* p, __m512i a) { std::memcpy(p, &a, 64); }
template <class T, class V>
inline V maskz_load(u64 k, const void* p) {
  lanes<T, sizeof(V)> r{};
  for (unsigned i = 0; i < r.n; ++i)
    if (bit(k, i)) std::memcpy(&r[i], static_cast<const u8*>(p) + i * sizeof(T), sizeof(T));
  return to<V>(r);
}
template <class T>
inline void mask_store(void* p, u64 k, __m512i a) {
  const auto l = of<T>(a);
  for (unsigned i = 0; i < l.n; ++i)
    if (bit(k, i)) std::memcpy(static_cast<u8*>(p) + i * sizeof(T), &l[i], sizeof(T));
}
template <class T>
inline void mask_cvtepi32_store(void* p, u64 k, __m512i a) {
  const auto l = of<u32>(a);
  for (unsigned i = 0; i < 16; ++i)
    if (bit(k, i)) {
      const T t = static_cast<T>(l[i]);
      std::memcpy(static_cast<u8*>(p) + i * sizeof(T), &t, sizeof(T));
    }
}
inline __m512i maskz_expandloadu_epi8(u64 k, const void* p) {
  lanes<u8> r{};
  const u8* s = static_cast<const u8*>(p);
  for (unsigned i = 0; i < 64; ++i)
    if (bit(k, i)) r[i] = *s++;
  return to<__m512i>(r);
}
inline __m512i i32gather_epi32(__m512i idx, const void* base, int scale) {
  const auto x = of<i32>(idx);
  lanes<u32> r;
  for (unsigned i = 0; i < 16; ++i)
    std::memcpy(&r[i], static_cast<const u8*>(base) + static_cast<std::int64_t>(x[i]) * scale, 4);
  return to<__m512i>(r);
}

// element-wise operations
template <class T, class F>
inline __m512i map(__m512i a, F f) {
  auto l = of<T>(a);
  for (unsigned i = 0; i < l.n; ++i) l[i] = static_cast<T>(f(l[i]));
  return to<__m512i>(l);
}
template <class T, class F>
inline __m512i zip(__m512i a, __m512i b, F f) {
  auto l = of<T>(a);
  const auto r = of<T>(b);
  for (unsigned i = 0; i < l.n; ++i) l[i] = static_cast<T>(f(l[i], r[i]));
  return to<__m512i>(l);
}
template <class T>
inline __m512i set1(T x) {
  lanes<T> l;
  for (unsigned i = 0; i < l.n; ++i) l[i] = x;
  return to<__m512i>(l);
}
template <class T>
inline __m512i srli(__m512i a, unsigned c) {
  return map<T>(a, [c](T x) { return c >= 8 * sizeof(T) ? T(0) : T(x >> c); });
}
template <class T>
inline __m512i slli(__m512i a, unsigned c) {
  return map<T>(a, [c](T x) { return c >= 8 * sizeof(T) ? T(0) : T(x << c); });
}
template <class T>
inline __m512i select(u64 k, __m512i a, __m512i b) {  // b where k is set, else a
  auto l = of<T>(a);
  const auto r = of<T>(b);
  for (unsigned i = 0; i < l.n; ++i)
    if (bit(k, i)) l[i] = r[i];
  return to<__m512i>(l);
}
template <class T, class F>
inline u64 compare(__m512i a, __m512i b, F f) {
  const auto l = of<T>(a), r = of<T>(b);
  u64 k = 0;
  for (unsigned i = 0; i < l.n; ++i)
    if (f(l[i], r[i])) k |= u64(1) << i;
  return k;
}
inline __m512i add_epi32(__m512i a, __m512i b) { return zip<u32>(a, b, [](u32 x, u32 y) { return x + y; }); }
inline __m512i add_epi64(__m512i a, __m512i b) { return zip<u64>(a, b, [](u64 x, u64 y) { return x + y; }); }
inline __m512i sub_epi32(__m512i a, __m512i b) { return zip<u32>(a, b, [](u32 x, u32 y) { return x - y; }); }
inline __m512i sub_epi8(__m512i a, __m512i b) { return zip<u8>(a, b, [](u8 x, u8 y) { return x - y; }); }
inline __m512i and_si512(__m512i a, __m512i b) { return zip<u64>(a, b, [](u64 x, u64 y) { return x & y; }); }
inline __m512i or_si512(__m512i a, __m512i b) { return zip<u64>(a, b, [](u64 x, u64 y) { return x | y; }); }
inline __m512i add_epi16(__m512i a, __m512i b) { return zip<u16>(a, b, [](u16 x, u16 y) { return x + y; }); }
inline __m512i sub_epi16(__m512i a, __m512i b) { return zip<u16>(a, b, [](u16 x, u16 y) { return x - y; }); }
inline __m512i mullo_epi16(__m512i a, __m512i b) { return zip<u16>(a, b, [](u16 x, u16 y) { return u32(x) * y; }); }
inline __m512i mulhi_epu16(__m512i a, __m512i b) { return zip<u16>(a, b, [](u16 x, u16 y) { return (u32(x) * y) >> 16; }); }
inline __m512i mask_add_epi16(__m512i src, __mmask32 k, __m512i a, __m512i b) { return select<u16>(k, src, add_epi16(a, b)); }
inline __m512i mask_blend_epi16(__mmask32 k, __m512i a, __m512i b) { return select<u16>(k, a, b); }
inline __m512i mask_mov_epi16(__m512i src, __mmask32 k, __m512i a) { return select<u16>(k, src, a); }
inline __m512i mask_mov_epi32(__m512i src, __mmask16 k, __m512i a) { return select<u32>(k, src, a); }
// (vpshufd: each 32-bit lane takes the lane of its 128-bit quarter that imm's two bits for it name;
// src's lanes where k is clear)
inline __m512i mask_shuffle_epi32(__m512i src, __mmask16 k, __m512i a, int imm) {
  const auto x = of<u32>(a);
  lanes<u32> r{};
  for (unsigned i = 0; i < 16; ++i) r[i] = x[(i & ~3u) | ((static_cast<unsigned>(imm) >> (2 * (i & 3u))) & 3u)];
  return select<u32>(k, src, to<__m512i>(r));
}
// (a's lanes shifted left by c, filled from the top of b's)
inline __m512i shldi_epi16(__m512i a, __m512i b, unsigned c) {
  return zip<u16>(a, b, [c](u16 x, u16 y) { return ((u32(x) << 16 | y) << (c & 15u)) >> 16; });
}
inline __mmask32 cmpge_epu16_mask(__m512i a, __m512i b) {
  return static_cast<__mmask32>(compare<u16>(a, b, [](u16 x, u16 y) { return x >= y; }));
}
inline __mmask32 cmplt_epu16_mask(__m512i a, __m512i b) {
  return static_cast<__mmask32>(compare<u16>(a, b, [](u16 x, u16 y) { return x < y; }));
}
inline __mmask32 test_epi16_mask(__m512i a, __m512i b) {
  return static_cast<__mmask32>(compare<u16>(a, b, [](u16 x, u16 y) { return (x & y) != 0; }));
}
inline __mmask32 testn_epi16_mask(__m512i a, __m512i b) {
  return static_cast<__mmask32>(compare<u16>(a, b, [](u16 x, u16 y) { return (x & y) == 0; }));
}
// _mm512_set_epi8/16/32: the arguments from the highest lane down
template <class T, class... A>
inline __m512i set_lanes(A... a) {
  static_assert(sizeof...(A) * sizeof(T) == 64, "set: one argument per lane");
  const T high_first[] = {static_cast<T>(a)...};
  lanes<T> r;
  for (unsigned i = 0; i < r.n; ++i) r[i] = high_first[r.n - 1 - i];
  return to<__m512i>(r);
}
inline __m512i mullo_epi32(__m512i a, __m512i b) { return zip<u32>(a, b, [](u32 x, u32 y) { return x * y; }); }
inline __m512i mul_epu32(__m512i a, __m512i b) {
  return zip<u64>(a, b, [](u64 x, u64 y) { return (x & 0xFFFFFFFFu) * (y & 0xFFFFFFFFu); });
}
inline __m512i srli_epi16(__m512i a, unsigned c) { return srli<u16>(a, c); }
inline __m512i srli_epi32(__m512i a, unsigned c) { return srli<u32>(a, c); }
inline __m512i srli_epi64(__m512i a, unsigned c) { return srli<u64>(a, c); }
inline __m512i slli_epi16(__m512i a, unsigned c) { return slli<u16>(a, c); }
inline __m512i slli_epi32(__m512i a, unsigned c) { return slli<u32>(a, c); }
inline __m512i slli_epi64(__m512i a, unsigned c) { return slli<u64>(a, c); }
inline __m512i mask_srli_epi32(__m512i src, __mmask16 k, __m512i a, unsigned c) {
  return select<u32>(k, src, srli<u32>(a, c));
}
inline __m512i mask_add_epi32(__m512i src, __mmask16 k, __m512i a, __m512i b) {
  return select<u32>(k, src, add_epi32(a, b));
}
inline __m512i mask_sub_epi32(__m512i src, __mmask16 k, __m512i a, __m512i b) {
  return select<u32>(k, src, sub_epi32(a, b));
}
inline __m512i mask_or_epi32(__m512i src, __mmask16 k, __m512i a, __m512i b) {
  return select<u32>(k, src, or_si512(a, b));
}
inline __m512i mask_add_epi8(__m512i src, __mmask64 k, __m512i a, __m512i b) {
  return select<u8>(k, src, zip<u8>(a, b, [](u8 x, u8 y) { return static_cast<u8>(x + y); }));
}
inline __m512i mask_blend_epi32(__mmask16 k, __m512i a, __m512i b) { return select<u32>(k, a, b); }
inline __m512i mask_mov_epi8(__m512i src, __mmask64 k, __m512i a) { return select<u8>(k, src, a); }
inline __m512i maskz_mov_epi8(__mmask64 k, __m512i a) { return select<u8>(k, set1<u8>(0), a); }
inline __m512i ternarylogic_epi32(__m512i a, __m512i b, __m512i c, int imm) {
  const auto x = of<u32>(a), y = of<u32>(b), z = of<u32>(c);
  lanes<u32> r{};
  for (unsigned i = 0; i < 16; ++i)
    for (unsigned j = 0; j < 32; ++j) {
      const unsigned sel = (((x[i] >> j) & 1u) << 2) | (((y[i] >> j) & 1u) << 1) | ((z[i] >> j) & 1u);
      r[i] |= static_cast<u32>((imm >> sel) & 1) << j;
    }
  return to<__m512i>(r);
}
inline __m512i sad_epu8(__m512i a, __m512i b) {
  const auto x = of<u8>(a), y = of<u8>(b);
  lanes<u64> r{};
  for (unsigned i = 0; i < 64; ++i) r[i / 8] += x[i] > y[i] ? x[i] - y[i] : y[i] - x[i];
  return to<__m512i>(r);
}
inline long long reduce_add_epi64(__m512i a) {
  const auto l = of<u64>(a);
  u64 s = 0;
  for (unsigned i = 0; i < 8; ++i) s += l[i];
  return static_cast<long long>(s);
}

// comparisons and tests, into masks
inline __mmask64 cmp_epu8_mask(__m512i a, __m512i b, int pred) {
  return compare<u8>(a, b, [pred](u8 x, u8 y) {
    switch (pred & 7) {
      case 0: return x == y;
      case 1: return x < y;
      case 2: return x <= y;
      case 3: return false;
      case 4: return x != y;
      case 5: return x >= y;
      case 6: return x > y;
      default: return true;
    }
  });
}
inline __mmask64 mask_cmpeq_epi8_mask(__mmask64 k, __m512i a, __m512i b) {
  return k & compare<u8>(a, b, [](u8 x, u8 y) { return x == y; });
}
inline __mmask64 mask_cmpge_epu8_mask(__mmask64 k, __m512i a, __m512i b) {
  return k & compare<u8>(a, b, [](u8 x, u8 y) { return x >= y; });
}
inline __mmask32 cmpeq_epi16_mask(__m512i a, __m512i b) {
  return static_cast<__mmask32>(compare<u16>(a, b, [](u16 x, u16 y) { return x == y; }));
}
inline __mmask16 cmpeq_epi32_mask(__m512i a, __m512i b) {
  return static_cast<__mmask16>(compare<u32>(a, b, [](u32 x, u32 y) { return x == y; }));
}
inline __mmask16 cmpge_epu32_mask(__m512i a, __m512i b) {
  return static_cast<__mmask16>(compare<u32>(a, b, [](u32 x, u32 y) { return x >= y; }));
}
inline __mmask16 cmpgt_epu32_mask(__m512i a, __m512i b) {
  return static_cast<__mmask16>(compare<u32>(a, b, [](u32 x, u32 y) { return x > y; }));
}
inline __mmask16 cmplt_epu32_mask(__m512i a, __m512i b) {
  return static_cast<__mmask16>(compare<u32>(a, b, [](u32 x, u32 y) { return x < y; }));
}
inline __mmask64 test_epi8_mask(__m512i a, __m512i b) {
  return compare<u8>(a, b, [](u8 x, u8 y) { return (x & y) != 0; });
}
inline __mmask64 mask_test_epi8_mask(__mmask64 k, __m512i a, __m512i b) { return k & test_epi8_mask(a, b); }
inline __mmask16 test_epi32_mask(__m512i a, __m512i b) {
  return static_cast<__mmask16>(compare<u32>(a, b, [](u32 x, u32 y) { return (x & y) != 0; }));
}
inline __mmask64 movepi8_mask(__m512i a) {
  return compare<u8>(a, a, [](u8 x, u8) { return (x & 0x80u) != 0; });
}

// permutes, compress and expand
// vpermb / vpermw (one table of 64 / 32 lanes) and vpermi2b / vpermi2w / vpermi2d (two tables,
// the index's next bit picking b)
template <class T>
inline __m512i permutexvar(__m512i idx, __m512i a) {
  const auto i = of<T>(idx), x = of<T>(a);
  lanes<T> r;
  for (unsigned j = 0; j < r.n; ++j) r[j] = x[i[j] & (r.n - 1u)];
  return to<__m512i>(r);
}
template <class T>
inline __m512i permutex2var(__m512i a, __m512i idx, __m512i b) {
  const auto i = of<T>(idx), x = of<T>(a), y = of<T>(b);
  lanes<T> r;
  for (unsigned j = 0; j < r.n; ++j) r[j] = (i[j] & r.n) ? y[i[j] & (r.n - 1u)] : x[i[j] & (r.n - 1u)];
  return to<__m512i>(r);
}
inline __m512i permutexvar_epi8(__m512i idx, __m512i a) { return permutexvar<u8>(idx, a); }
inline __m512i permutexvar_epi16(__m512i idx, __m512i a) { return permutexvar<u16>(idx, a); }
inline __m512i permutex2var_epi8(__m512i a, __m512i idx, __m512i b) { return permutex2var<u8>(a, idx, b); }
inline __m512i permutex2var_epi16(__m512i a, __m512i idx, __m512i b) { return permutex2var<u16>(a, idx, b); }
inline __m512i permutex2var_epi32(__m512i a, __m512i idx, __m512i b) { return permutex2var<u32>(a, idx, b); }
inline __m512i maskz_permutex2var_epi8(__mmask64 k, __m512i a, __m512i idx, __m512i b) {
  return select<u8>(~k, permutex2var_epi8(a, idx, b), set1<u8>(0));
}
template <class T>
inline __m512i maskz_compress(u64 k, __m512i a) {
  const auto x = of<T>(a);
  lanes<T> r{};
  unsigned n = 0;
  for (unsigned i = 0; i < x.n; ++i)
    if (bit(k, i)) r[n++] = x[i];
  return to<__m512i>(r);
}
template <class T>
inline __m512i maskz_expand(u64 k, __m512i a) {
  const auto x = of<T>(a);
  lanes<T> r{};
  unsigned n = 0;
  for (unsigned i = 0; i < x.n; ++i)
    if (bit(k, i)) r[i] = x[n++];
  return to<__m512i>(r);
}

// conversions, casts, inserts and extracts
template <class From, class To, class V>
inline V narrow(__m512i a) {
  const auto x = of<From>(a);
  lanes<To, sizeof(V)> r;
  for (unsigned i = 0; i < x.n; ++i) r[i] = static_cast<To>(x[i]);
  return to<V>(r);
}
template <class From, class To, class V>
inline __m512i widen(V a) {
  const auto x = of<From>(a);
  lanes<To> r;
  for (unsigned i = 0; i < r.n; ++i) r[i] = x[i];
  return to<__m512i>(r);
}
// packs with unsigned saturation, per 128-bit lane: the lane's narrowed elements of a, then of b
template <class From, class To>
inline __m512i packus(__m512i a, __m512i b) {
  const auto x = of<From>(a), y = of<From>(b);
  lanes<To> r{};
  constexpr unsigned per = 16 / sizeof(From);  // elements of one operand per lane
  const auto sat = [](From v) {
    constexpr long long top = (1ll << (8 * sizeof(To))) - 1;
    return static_cast<To>(v < 0 ? 0 : (static_cast<long long>(v) > top ? top : v));
  };
  for (unsigned l = 0; l < 4; ++l)
    for (unsigned i = 0; i < per; ++i) {
      r[2 * per * l + i] = sat(x[per * l + i]);
      r[2 * per * l + per + i] = sat(y[per * l + i]);
    }
  return to<__m512i>(r);
}
inline __m512i castsi256_si512(__m256i a) {
  __m512i r = set1<u8>(0xA5);  // (the upper half is undefined: a pattern that no code may rely on)
  std::memcpy(&r, &a, 32);
  return r;
}
inline __m128i castsi512_si128(__m512i a) {
  __m128i r;
  std::memcpy(&r, &a, 16);
  return r;
}
inline __m256i castsi512_si256(__m512i a) {
  __m256i r;
  std::memcpy(&r, &a, 32);
  return r;
}
inline __m128i extracti32x4_epi32(__m512i a, int imm) {
  __m128i r;
  std::memcpy(&r, reinterpret_cast<const u8*>(&a) + 16 * (imm & 3), 16);
  return r;
}
inline __m256i extracti64x4_epi64(__m512i a, int imm) {
  __m256i r;
  std::memcpy(&r, reinterpret_cast<const u8*>(&a) + 32 * (imm & 1), 32);
  return r;
}
inline __m512i inserti64x4(__m512i a, __m256i b, int imm) {
  std::memcpy(reinterpret_cast<u8*>(&a) + 32 * (imm & 1), &b, 32);
  return a;
}

}  // namespace zipccl_emu

// The renames (GCC defines some of these as macros when not optimising: they go first).
#undef _mm512_load_si512
#define _mm512_load_si512(p) zipccl_emu::load(p)
#undef _mm512_loadu_si512
#define _mm512_loadu_si512(p) zipccl_emu::loadu(p)
#undef _mm512_storeu_si512
#define _mm512_storeu_si512(p, a) zipccl_emu::storeu((p), (a))
#undef _mm512_maskz_loadu_epi8
#define _mm512_maskz_loadu_epi8(k, p) zipccl_emu::maskz_load<std::uint8_t, __m512i>((k), (p))
#undef _mm512_maskz_loadu_epi16
#define _mm512_maskz_loadu_epi16(k, p) zipccl_emu::maskz_load<std::uint16_t, __m512i>((k), (p))
#undef _mm512_maskz_loadu_epi32
#define _mm512_maskz_loadu_epi32(k, p) zipccl_emu::maskz_load<std::uint32_t, __m512i>((k), (p))
#undef _mm256_maskz_loadu_epi16
#define _mm256_maskz_loadu_epi16(k, p) zipccl_emu::maskz_load<std::uint16_t, __m256i>((k), (p))
#undef _mm_maskz_loadu_epi8
#define _mm_maskz_loadu_epi8(k, p) zipccl_emu::maskz_load<std::uint8_t, __m128i>((k), (p))
#undef _mm512_mask_storeu_epi8
#define _mm512_mask_storeu_epi8(p, k, a) zipccl_emu::mask_store<std::uint8_t>((p), (k), (a))
#undef _mm512_mask_storeu_epi16
#define _mm512_mask_storeu_epi16(p, k, a) zipccl_emu::mask_store<std::uint16_t>((p), (k), (a))
#undef _mm512_mask_storeu_epi32
#define _mm512_mask_storeu_epi32(p, k, a) zipccl_emu::mask_store<std::uint32_t>((p), (k), (a))
#undef _mm512_mask_cvtepi32_storeu_epi8
#define _mm512_mask_cvtepi32_storeu_epi8(p, k, a) zipccl_emu::mask_cvtepi32_store<std::uint8_t>((p), (k), (a))
#undef _mm512_mask_cvtepi32_storeu_epi16
#define _mm512_mask_cvtepi32_storeu_epi16(p, k, a) zipccl_emu::mask_cvtepi32_store<std::uint16_t>((p), (k), (a))
#undef _mm512_maskz_expandloadu_epi8
#define _mm512_maskz_expandloadu_epi8 zipccl_emu::maskz_expandloadu_epi8
#undef _mm512_i32gather_epi32
#define _mm512_i32gather_epi32 zipccl_emu::i32gather_epi32
#undef _mm512_set1_epi8
#define _mm512_set1_epi8(x) zipccl_emu::set1<std::uint8_t>(static_cast<std::uint8_t>(x))
#undef _mm512_set1_epi16
#define _mm512_set1_epi16(x) zipccl_emu::set1<std::uint16_t>(static_cast<std::uint16_t>(x))
#undef _mm512_set1_epi32
#define _mm512_set1_epi32(x) zipccl_emu::set1<std::uint32_t>(static_cast<std::uint32_t>(x))
#undef _mm512_setzero_si512
#define _mm512_setzero_si512() zipccl_emu::set1<std::uint8_t>(0)
#undef _mm512_add_epi32
#define _mm512_add_epi32 zipccl_emu::add_epi32
#undef _mm512_add_epi64
#define _mm512_add_epi64 zipccl_emu::add_epi64
#undef _mm512_sub_epi32
#define _mm512_sub_epi32 zipccl_emu::sub_epi32
#undef _mm512_sub_epi8
#define _mm512_sub_epi8 zipccl_emu::sub_epi8
#undef _mm512_and_si512
#define _mm512_and_si512 zipccl_emu::and_si512
#undef _mm512_or_si512
#define _mm512_or_si512 zipccl_emu::or_si512
#undef _mm512_mullo_epi32
#define _mm512_mullo_epi32 zipccl_emu::mullo_epi32
#undef _mm512_mul_epu32
#define _mm512_mul_epu32 zipccl_emu::mul_epu32
#undef _mm512_srli_epi16
#define _mm512_srli_epi16 zipccl_emu::srli_epi16
#undef _mm512_srli_epi32
#define _mm512_srli_epi32 zipccl_emu::srli_epi32
#undef _mm512_srli_epi64
#define _mm512_srli_epi64 zipccl_emu::srli_epi64
#undef _mm512_slli_epi16
#define _mm512_slli_epi16 zipccl_emu::slli_epi16
#undef _mm512_slli_epi32
#define _mm512_slli_epi32 zipccl_emu::slli_epi32
#undef _mm512_slli_epi64
#define _mm512_slli_epi64 zipccl_emu::slli_epi64
#undef _mm512_mask_srli_epi32
#define _mm512_mask_srli_epi32 zipccl_emu::mask_srli_epi32
#undef _mm512_mask_add_epi32
#define _mm512_mask_add_epi32 zipccl_emu::mask_add_epi32
#undef _mm512_mask_sub_epi32
#define _mm512_mask_sub_epi32 zipccl_emu::mask_sub_epi32
#undef _mm512_mask_or_epi32
#define _mm512_mask_or_epi32 zipccl_emu::mask_or_epi32
#undef _mm512_mask_add_epi8
#define _mm512_mask_add_epi8 zipccl_emu::mask_add_epi8
#undef _mm512_mask_blend_epi32
#define _mm512_mask_blend_epi32 zipccl_emu::mask_blend_epi32
#undef _mm512_mask_mov_epi8
#define _mm512_mask_mov_epi8 zipccl_emu::mask_mov_epi8
#undef _mm512_maskz_mov_epi8
#define _mm512_maskz_mov_epi8 zipccl_emu::maskz_mov_epi8
#undef _mm512_ternarylogic_epi32
#define _mm512_ternarylogic_epi32 zipccl_emu::ternarylogic_epi32
#undef _mm512_sad_epu8
#define _mm512_sad_epu8 zipccl_emu::sad_epu8
#undef _mm512_reduce_add_epi64
#define _mm512_reduce_add_epi64 zipccl_emu::reduce_add_epi64
#undef _mm512_cmp_epu8_mask
#define _mm512_cmp_epu8_mask zipccl_emu::cmp_epu8_mask
#undef _mm512_cmpeq_epi16_mask
#define _mm512_cmpeq_epi16_mask zipccl_emu::cmpeq_epi16_mask
#undef _mm512_cmpeq_epi32_mask
#define _mm512_cmpeq_epi32_mask zipccl_emu::cmpeq_epi32_mask
#undef _mm512_mask_cmpeq_epi8_mask
#define _mm512_mask_cmpeq_epi8_mask zipccl_emu::mask_cmpeq_epi8_mask
#undef _mm512_mask_cmpge_epu8_mask
#define _mm512_mask_cmpge_epu8_mask zipccl_emu::mask_cmpge_epu8_mask
#undef _mm512_cmpge_epu32_mask
#define _mm512_cmpge_epu32_mask zipccl_emu::cmpge_epu32_mask
#undef _mm512_cmpgt_epu32_mask
#define _mm512_cmpgt_epu32_mask zipccl_emu::cmpgt_epu32_mask
#undef _mm512_cmplt_epu32_mask
#define _mm512_cmplt_epu32_mask zipccl_emu::cmplt_epu32_mask
#undef _mm512_test_epi8_mask
#define _mm512_test_epi8_mask zipccl_emu::test_epi8_mask
#undef _mm512_mask_test_epi8_mask
#define _mm512_mask_test_epi8_mask zipccl_emu::mask_test_epi8_mask
#undef _mm512_test_epi32_mask
#define _mm512_test_epi32_mask zipccl_emu::test_epi32_mask
#undef _mm512_movepi8_mask
#define _mm512_movepi8_mask zipccl_emu::movepi8_mask
#undef _mm512_permutexvar_epi8
#define _mm512_permutexvar_epi8 zipccl_emu::permutexvar_epi8
#undef _mm512_permutex2var_epi8
#define _mm512_permutex2var_epi8 zipccl_emu::permutex2var_epi8
#undef _mm512_permutex2var_epi32
#define _mm512_permutex2var_epi32 zipccl_emu::permutex2var_epi32
#undef _mm512_maskz_compress_epi8
#define _mm512_maskz_compress_epi8(k, a) zipccl_emu::maskz_compress<std::uint8_t>((k), (a))
#undef _mm512_maskz_compress_epi32
#define _mm512_maskz_compress_epi32(k, a) zipccl_emu::maskz_compress<std::uint32_t>((k), (a))
#undef _mm512_maskz_compress_epi16
#define _mm512_maskz_compress_epi16(k, a) zipccl_emu::maskz_compress<std::uint16_t>((k), (a))
#undef _mm512_maskz_expand_epi16
#define _mm512_maskz_expand_epi16(k, a) zipccl_emu::maskz_expand<std::uint16_t>((k), (a))
#undef _mm512_maskz_expand_epi8
#define _mm512_maskz_expand_epi8(k, a) zipccl_emu::maskz_expand<std::uint8_t>((k), (a))
#undef _mm512_maskz_expand_epi32
#define _mm512_maskz_expand_epi32(k, a) zipccl_emu::maskz_expand<std::uint32_t>((k), (a))
#undef _mm512_cvtepi16_epi8
#define _mm512_cvtepi16_epi8(a) zipccl_emu::narrow<std::uint16_t, std::uint8_t, __m256i>(a)
#undef _mm512_cvtepi32_epi16
#define _mm512_cvtepi32_epi16(a) zipccl_emu::narrow<std::uint32_t, std::uint16_t, __m256i>(a)
#undef _mm512_cvtepi32_epi8
#define _mm512_cvtepi32_epi8(a) zipccl_emu::narrow<std::uint32_t, std::uint8_t, __m128i>(a)
#undef _mm512_cvtepu16_epi32
#define _mm512_cvtepu16_epi32(a) zipccl_emu::widen<std::uint16_t, std::uint32_t, __m256i>(a)
#undef _mm512_cvtepu8_epi32
#define _mm512_cvtepu8_epi32(a) zipccl_emu::widen<std::uint8_t, std::uint32_t, __m128i>(a)
#undef _mm512_packus_epi16
#define _mm512_packus_epi16(a, b) zipccl_emu::packus<std::int16_t, std::uint8_t>((a), (b))
#undef _mm512_packus_epi32
#define _mm512_packus_epi32(a, b) zipccl_emu::packus<std::int32_t, std::uint16_t>((a), (b))
#undef _mm512_castsi256_si512
#define _mm512_castsi256_si512 zipccl_emu::castsi256_si512
#undef _mm512_castsi512_si128
#define _mm512_castsi512_si128 zipccl_emu::castsi512_si128
#undef _mm512_castsi512_si256
#define _mm512_castsi512_si256 zipccl_emu::castsi512_si256
#undef _mm512_extracti32x4_epi32
#define _mm512_extracti32x4_epi32 zipccl_emu::extracti32x4_epi32
#undef _mm512_extracti64x4_epi64
#define _mm512_extracti64x4_epi64 zipccl_emu::extracti64x4_epi64
#undef _mm512_inserti64x4
#define _mm512_inserti64x4 zipccl_emu::inserti64x4
#undef _mm512_add_epi16
#define _mm512_add_epi16 zipccl_emu::add_epi16
#undef _mm512_sub_epi16
#define _mm512_sub_epi16 zipccl_emu::sub_epi16
#undef _mm512_mullo_epi16
#define _mm512_mullo_epi16 zipccl_emu::mullo_epi16
#undef _mm512_mulhi_epu16
#define _mm512_mulhi_epu16 zipccl_emu::mulhi_epu16
#undef _mm512_mask_add_epi16
#define _mm512_mask_add_epi16 zipccl_emu::mask_add_epi16
#undef _mm512_mask_blend_epi16
#define _mm512_mask_blend_epi16 zipccl_emu::mask_blend_epi16
#undef _mm512_shldi_epi16
#define _mm512_shldi_epi16 zipccl_emu::shldi_epi16
#undef _mm512_cmpge_epu16_mask
#define _mm512_cmpge_epu16_mask zipccl_emu::cmpge_epu16_mask
#undef _mm512_cmplt_epu16_mask
#define _mm512_cmplt_epu16_mask zipccl_emu::cmplt_epu16_mask
#undef _mm512_test_epi16_mask
#define _mm512_test_epi16_mask zipccl_emu::test_epi16_mask
#undef _mm512_testn_epi16_mask
#define _mm512_testn_epi16_mask zipccl_emu::testn_epi16_mask
#undef _mm512_maskz_permutex2var_epi8
#define _mm512_maskz_permutex2var_epi8 zipccl_emu::maskz_permutex2var_epi8
#undef _mm512_permutexvar_epi16
#define _mm512_permutexvar_epi16 zipccl_emu::permutexvar_epi16
#undef _mm512_permutex2var_epi16
#define _mm512_permutex2var_epi16 zipccl_emu::permutex2var_epi16
#undef _mm512_cvtepu8_epi16
#define _mm512_cvtepu8_epi16(a) zipccl_emu::widen<std::uint8_t, std::uint16_t, __m256i>(a)
#undef _mm512_set_epi8
#define _mm512_set_epi8(...) zipccl_emu::set_lanes<std::uint8_t>(__VA_ARGS__)
#undef _mm512_set_epi16
#define _mm512_set_epi16(...) zipccl_emu::set_lanes<std::uint16_t>(__VA_ARGS__)
#undef _mm512_set_epi32
#define _mm512_set_epi32(...) zipccl_emu::set_lanes<std::uint32_t>(__VA_ARGS__)
#undef _mm512_mask_mov_epi16
#define _mm512_mask_mov_epi16 zipccl_emu::mask_mov_epi16
#undef _mm512_mask_mov_epi32
#define _mm512_mask_mov_epi32 zipccl_emu::mask_mov_epi32
#undef _mm512_mask_shuffle_epi32
#define _mm512_mask_shuffle_epi32 zipccl_emu::mask_shuffle_epi32
