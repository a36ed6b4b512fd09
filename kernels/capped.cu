// global_capped transport (§4.4-4.8): priorities, pooled pack with int32 header bit-cast and
// scale-normalized eviction, owner-side routing from the headers, assemble, repack, unpack.
// Every size is a plan constant; nothing here synchronizes with the host.
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/check.cuh"
#include "kernels/common.cuh"
#include "kernels/ops.hpp"

namespace dionsim::kernels {
namespace {

constexpr int kRowThreads = 256;

// prio[d][q], q = j*L + row: norm / max(thresh, 1e-12) for this rank's winners of matrix d*pr+j,
// -inf otherwise (never kept: stable_topk keeps min(B, len) and every candidate outranks -inf).
__global__ void capped_prio_kernel(CappedShape sh, const float* norms, const std::uint8_t* winners,
                                   const float* thresh, float* prio) {
  const long long per = sh.pr * sh.L;
  const long long d = blockIdx.y;
  for (long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; q < per;
       q += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long j = q / sh.L, row = q % sh.L, m = d * sh.pr + j;
    float p = -INFINITY;
    if (m < sh.N && winners[m * (sh.w * sh.pl) + sh.rank * sh.pl + row]) p = norms[m * sh.L + row] / fmaxf(thresh[m], 1e-12F);
    prio[d * per + q] = p;
  }
}

__global__ void keep_candidates_kernel(long long n, const float* prio, std::uint8_t* keep) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    keep[i] = (keep[i] && prio[i] != -INFINITY) ? 1 : 0;
}

// grid (B, w): payload slot t of chunk d; slots beyond the chunk's count are zeroed here (the
// payload is not cleared beforehand).
__global__ void capped_fill_kernel(CappedShape sh, const void* M, bool bf16, const std::int32_t* index,
                                   const std::int32_t* count, std::uint16_t* send, std::int32_t* slot_src) {
  const long long t = blockIdx.x, d = blockIdx.y, per = sh.pr * sh.L;
  std::uint16_t* o = send + (d * (1 + sh.B) + 1 + t) * sh.C;
  if (t >= count[d]) {
    if (threadIdx.x == 0) slot_src[d * sh.B + t] = -1;
    detail::zero_row(o, sh.C);
    return;
  }
  const long long q = index[d * per + t];
  const long long m = d * sh.pr + q / sh.L, row = q % sh.L, src = m * sh.L + row;
  if (threadIdx.x == 0) slot_src[d * sh.B + t] = static_cast<std::int32_t>(src);
  detail::convert_row(o, M, bf16, src * sh.C, sh.C);
}

// grid (w): header row of chunk d (counts per pooled matrix, bit-cast; the rest of the row zero),
// and the deferral counters. Kept rows are counted with the whole block (__syncthreads_count) —
// a thread per matrix looping over the shard's rows took 0.22 ms per call.
__global__ void capped_header_kernel(CappedShape sh, const float* prio, const std::uint8_t* keep,
                                     const std::int32_t* count, std::uint16_t* send, unsigned long long* stats) {
  const long long d = blockIdx.x, per = sh.pr * sh.L;
  std::uint16_t* header = send + d * (1 + sh.B) * sh.C;
  detail::zero_row(header, sh.C);
  __syncthreads();  // the counts below overwrite zeros, never the reverse
  for (long long j = 0; j < sh.pr; ++j) {
    std::int32_t kept = 0;
    for (long long row0 = 0; row0 < sh.L; row0 += blockDim.x) {
      const long long row = row0 + threadIdx.x;
      kept += __syncthreads_count(row < sh.L && keep[d * per + j * sh.L + row] != 0);
    }
    if (threadIdx.x == 0) {
      const auto bits = static_cast<std::uint32_t>(kept);
      header[2 * j] = static_cast<std::uint16_t>(bits & 0xffffu);
      header[2 * j + 1] = static_cast<std::uint16_t>(bits >> 16);
    }
  }
  int winners = 0;
  for (long long q = threadIdx.x; q < per; q += blockDim.x) winners += prio[d * per + q] != -INFINITY ? 1 : 0;
  const float total = detail::block_sum(static_cast<float>(winners));  // exact: counts < 2^24
  if (threadIdx.x == 0) {
    const auto w = static_cast<unsigned long long>(total);
    atomicAdd(&stats[0], w);
    atomicAdd(&stats[1], w - static_cast<unsigned long long>(count[d]));
  }
}

__device__ inline std::int32_t header_count(const std::uint16_t* header, long long j) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(header[2 * j]) |
                                   (static_cast<std::uint32_t>(header[2 * j + 1]) << 16));
}

// grid (w): sender s's slots -> owner buffer rows (§4.7, sender-major, receiver clip at kw).
__global__ void capped_route_kernel(CappedShape sh, const std::uint16_t* recv, std::int32_t* route) {
  extern __shared__ long long sm[];
  long long* seg_start = sm;            // [pr]: segment j's first slot in sender s's payload
  long long* dst_base = sm + sh.pr;     // [pr]: rows of matrix j that senders < s put before s's
  const long long s = blockIdx.x;
  if (threadIdx.x == 0) {
    long long start = 0;
    for (long long j = 0; j < sh.pr; ++j) {
      seg_start[j] = start;
      start += header_count(recv + s * (1 + sh.B) * sh.C, j);
      long long base = 0;
      for (long long s2 = 0; s2 < s; ++s2) base += header_count(recv + s2 * (1 + sh.B) * sh.C, j);
      dst_base[j] = base;
    }
  }
  __syncthreads();
  const std::uint16_t* header = recv + s * (1 + sh.B) * sh.C;
  for (long long slot = threadIdx.x; slot < sh.B; slot += blockDim.x) {
    std::int32_t r = -1;
    for (long long j = 0; j < sh.pr; ++j) {
      const long long cnt = header_count(header, j);
      if (slot >= seg_start[j] && slot < seg_start[j] + cnt) {
        const long long dst = dst_base[j] + (slot - seg_start[j]);
        if (dst < sh.kw) r = static_cast<std::int32_t>(j * sh.kw + dst);
        break;
      }
    }
    route[s * sh.B + slot] = r;
  }
}

// grid (B, w)
__global__ void capped_assemble_kernel(CappedShape sh, const std::uint16_t* recv, const std::int32_t* route,
                                       std::uint16_t* buf) {
  const long long slot = blockIdx.x, s = blockIdx.y;
  const std::int32_t r = route[s * sh.B + slot];
  if (r < 0) return;
  detail::copy_row(buf + static_cast<long long>(r) * sh.C, recv + (s * (1 + sh.B) + 1 + slot) * sh.C, sh.C);
}
__global__ void capped_repack_kernel(CappedShape sh, const std::uint16_t* buf, const std::int32_t* route,
                                     std::uint16_t* ret) {
  const long long slot = blockIdx.x, s = blockIdx.y;
  const std::int32_t r = route[s * sh.B + slot];
  std::uint16_t* o = ret + (s * sh.B + slot) * sh.C;
  if (r < 0) detail::zero_row(o, sh.C);
  else detail::copy_row(o, buf + static_cast<long long>(r) * sh.C, sh.C);
}
__global__ void capped_unpack_kernel(CappedShape sh, const std::uint16_t* back, const std::int32_t* slot_src,
                                     std::uint16_t* U) {
  const long long slot = blockIdx.x, d = blockIdx.y;
  const std::int32_t r = slot_src[d * sh.B + slot];
  if (r < 0) return;
  detail::copy_row(U + static_cast<long long>(r) * sh.C, back + (d * sh.B + slot) * sh.C, sh.C);
}

unsigned u32(long long v) { return static_cast<unsigned>(v); }

}  // namespace

void CappedShape::validate() const {
  auto bad = [](const std::string& field, long long v, const char* expected) {
    throw std::invalid_argument("CappedShape: " + field + ": got '" + std::to_string(v) + "', expected " + expected);
  };
  if (w < 1) bad("w", w, ">= 1");
  if (rank < 0 || rank >= w) bad("rank", rank, "0 <= rank < w");
  if (N < 0 || N > static_cast<long long>(pr) * w) bad("N", N, "0 <= N <= pr*w");
  if (pl < 1) bad("pl", pl, ">= 1");
  if (L < 0 || L > pl) bad("L", L, "0 <= L <= pl (FSDP2 contiguous chunks)");
  if (C < 2 * static_cast<long long>(pr)) bad("C", C, ">= 2*pr (the int32 header must fit in one row)");
  if (B < 1 || B >= (1LL << 31)) bad("B", B, "1 <= B < 2^31");
  if (kw < 1 || k_tot < 1 || k_tot > kw) bad("k_tot", k_tot, "1 <= k_tot <= kw");
  if (pr * L >= (1LL << 31)) bad("pr*L", pr * L, "< 2^31");
}

CappedScratch::CappedScratch(const CappedShape& sh)
    : prio_(static_cast<std::size_t>(sh.w) * sh.pr * std::max<long long>(sh.L, 1), "capped prio"),
      keep_(static_cast<std::size_t>(sh.w) * sh.pr * std::max<long long>(sh.L, 1), "capped keep"),
      index_(static_cast<std::size_t>(sh.w) * sh.pr * std::max<long long>(sh.L, 1), "capped index"),
      count_(static_cast<std::size_t>(sh.w), "capped count") {}

void capped_pack(const CappedShape& sh, const void* M, MomentumDtype dtype, const float* norms,
                 const std::uint8_t* winners, const float* thresh, CappedScratch& scratch, bf16_bits* send,
                 std::int32_t* slot_src, long long* stats, StreamHandle s) {
  sh.validate();
  const auto st = detail::stream(s);
  const long long per = sh.pr * sh.L;
  // No clearing of `send`: the fill kernel writes (or zeroes) every slot row and the header kernel
  // every header row.
  if (per > 0) {
    capped_prio_kernel<<<dim3(std::min(detail::blocks_for(per, 256), 1024u), u32(sh.w)), 256, 0, st>>>(
        sh, norms, winners, thresh, scratch.prio());
    DIONSIM_LAUNCH_CHECK("capped_pack (priorities)");
  }
  stable_topk_mask(scratch.prio(), sh.w, per, sh.B, scratch.keep(), nullptr, s);
  if (per > 0) {
    keep_candidates_kernel<<<std::min(detail::blocks_for(sh.w * per, 256), 4096u), 256, 0, st>>>(
        sh.w * per, scratch.prio(), scratch.keep());
    DIONSIM_LAUNCH_CHECK("capped_pack (keep)");
  }
  compact_mask(scratch.keep(), sh.w, per, scratch.slot_of(), scratch.kept_count(), s);
  capped_fill_kernel<<<dim3(u32(sh.B), u32(sh.w)), kRowThreads, 0, st>>>(sh, M, dtype == MomentumDtype::bf16,
                                                                        scratch.slot_of(), scratch.kept_count(),
                                                                        send, slot_src);
  DIONSIM_LAUNCH_CHECK("capped_pack (fill)");
  capped_header_kernel<<<u32(sh.w), kRowThreads, 0, st>>>(sh, scratch.prio(), scratch.keep(), scratch.kept_count(),
                                                          send, reinterpret_cast<unsigned long long*>(stats));
  DIONSIM_LAUNCH_CHECK("capped_pack (header)");
}

void capped_route(const CappedShape& sh, const bf16_bits* recv, std::int32_t* route, StreamHandle s) {
  sh.validate();
  capped_route_kernel<<<u32(sh.w), 256, 2 * sh.pr * sizeof(long long), detail::stream(s)>>>(sh, recv, route);
  DIONSIM_LAUNCH_CHECK("capped_route");
}

void capped_assemble(const CappedShape& sh, const bf16_bits* recv, const std::int32_t* route, bf16_bits* buf,
                     StreamHandle s) {
  sh.validate();
  memset_device(buf, 0, static_cast<std::size_t>(sh.pr) * sh.kw * sh.C * 2, s);
  capped_assemble_kernel<<<dim3(u32(sh.B), u32(sh.w)), kRowThreads, 0, detail::stream(s)>>>(sh, recv, route, buf);
  DIONSIM_LAUNCH_CHECK("capped_assemble");
}

void capped_repack(const CappedShape& sh, const bf16_bits* buf, const std::int32_t* route, bf16_bits* ret,
                   StreamHandle s) {
  sh.validate();
  capped_repack_kernel<<<dim3(u32(sh.B), u32(sh.w)), kRowThreads, 0, detail::stream(s)>>>(sh, buf, route, ret);
  DIONSIM_LAUNCH_CHECK("capped_repack");
}

void capped_unpack(const CappedShape& sh, const bf16_bits* back, const std::int32_t* slot_src, bf16_bits* U,
                   StreamHandle s) {
  sh.validate();
  memset_device(U, 0, static_cast<std::size_t>(sh.N) * sh.L * sh.C * 2, s);
  capped_unpack_kernel<<<dim3(u32(sh.B), u32(sh.w)), kRowThreads, 0, detail::stream(s)>>>(sh, back, slot_src, U);
  DIONSIM_LAUNCH_CHECK("capped_unpack");
}

void decode_header_counts(const bf16_bits* header_row, int pr, std::int32_t* counts) {
  for (int j = 0; j < pr; ++j)
    counts[j] = static_cast<std::int32_t>(static_cast<std::uint32_t>(header_row[2 * j]) |
                                          (static_cast<std::uint32_t>(header_row[2 * j + 1]) << 16));
}

}  // namespace dionsim::kernels
