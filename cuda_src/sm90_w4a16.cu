// sm90_w4a16: C = A @ dequant(W) (+ bias) on Hopper, with wgmma and the weight dequantised in registers.
//
// wgmma reads a register operand only as its A side (K-major, 16-bit), and the weight is what has to pass
// through registers, so the kernel computes the transposed product C^T [N, M] = W^T [N, K] . A^T [K, M]:
// 64-column blocks of W are the m64 side of m64nBLOCK_Mk16, and the activations, K-major as stored, are the
// B operand in shared memory. M is the instruction's N (8..256): decode runs m64n8 and wastes no
// tensor-core rows past 8, prefill runs m64n256 like a plain GEMM.
//
// The packed weight (gn_mm/w4a16_formats.py, `prepare`) holds per lane and 16-column strip the m16n8k16 B
// fragments of W, which are the m16k16 A fragments of W^T in another order: registers {r0, r2, r1, r3} of
// DqZeros::word / DqScaled::word. Small tiles (FOLD) give the tensor cores exact (q - zero) and scale each
// stage's sums in fp32 as they retire: no multiply per weight (decode is bound by instructions per weight) and
// no rounding of w. Larger tiles cannot hold a second accumulator set: there the scales multiply in before the
// MMA (w rounded once to 16 bits, as an fp16 GEMM on the dequantised weight would have it).
//
// Warp specialisation in a persistent CTA: warpgroup 0 produces (one thread: TMA for activations, scales and
// zero points, a bulk copy for the weight strips, into a NUM_STAGES ring guarded by full / empty mbarriers);
// consumer warpgroups each own ROW_BLOCKS x 64 columns of the tile (KSPLIT: two share them and take alternate
// stages): per stage they dequantise their words into one of two register sets and issue the stage's wgmmas, so the
// previous stage's wgmmas run while the next is dequantised. Epilogue: stmatrix.trans turns the transposed
// accumulators into [M rows][64 columns] 128-byte swizzled chunks, stored by TMA (clipped at M and N). Small M
// (too few tiles for the SMs) runs stream-K: every CTA streams an equal share of all (tile, K stage) iterations;
// the parts of a tile that several CTAs summed meet in a workspace, where the last to arrive (an atomic ticket)
// adds them in part order (deterministic) and stores: one launch. Or (CLUSTER_K > 1) the CTAs of a cluster split one tile's K in equal
// aligned shares and the others push their sums into the first's shared memory (st.async, counted on its barrier),
// which adds them in rank order and stores: no workspace, no ticket, no L2 round trips (publish, ticket and read-back
// through L2 took 1.5-2 us at M = 16-64).

// Header section: editor defaults, replaced by codegen/sm90_w4a16.j2.
#include "common.cuh"
#define GN_ACT_KIND 1
#define GN_HAS_ZEROS 0
#define GN_WGMMA_REGS 4
#define GN_WGMMA_RA(d, a, desc_b, scale_d)
#define GN_WGMMA_TOUCH(d)
constexpr int GROUP_SIZE = 128;  // 0: one group spans K (per-channel scales)
constexpr int BLOCK_M = 8, CONSUMERS = 2, ROW_BLOCKS = 2, NUM_STAGES = 8, K_SUB = 1, CHUNK_ROWS = 8;
constexpr int GPS = 1;  // scale groups per stage (Sm90W4A16Config.groups_per_stage)
constexpr bool FOLD = true;  // per-stage fp32 scaling (Sm90W4A16Config.fold)
constexpr int CLUSTER_K = 1;  // > 1: a cluster of CLUSTER_K CTAs splits each tile's K (Sm90W4A16Config.cluster_k)
constexpr bool KSPLIT = false;  // the consumers share the tile's columns and split its K (Sm90W4A16Config.ksplit)
#define GN_CLUSTER            // __cluster_dims__(CLUSTER_K, 1, 1) when CLUSTER_K > 1
// ---- kernel ----
#include "int4_dequant.cuh"
#include "ptx/store.cuh"
#include "split_k.cuh"
#include "ptx/tma.cuh"
#include "ptx/wgmma.cuh"

namespace w4a16_sm90 {

constexpr int CONSUMER_N = 64 * ROW_BLOCKS;       // weight columns per consumer warpgroup
// KSPLIT: the consumers share one CONSUMER_N-column tile and take alternate K stages of it (each holds two slots of
// the ring, so it wants 8 stages): decode-sized 64-column tiles in clusters ran 2-4% faster so at N = 4096 and K up
// to 6144 than with one consumer, where a second consumer on other columns would halve the tiles (NOTES W4A16 64).
// Consumer 1 hands its sums to consumer 0 through shared memory; consumer 0 alone reduces and stores.
constexpr int COL_GROUPS = KSPLIT ? 1 : CONSUMERS;  // consumers with columns of their own
constexpr int BLOCK_N = COL_GROUPS * CONSUMER_N;
constexpr int STRIDE = KSPLIT ? CONSUMERS : 1;    // a consumer's step between the stages it takes
// Producer warps that issue the ring's stages, each every ISSUERS-th (lane 0 of warps 0..ISSUERS-1). KSPLIT drains
// the ring at twice a consumer's rate, and one thread issuing a 256-value stage (nine copies, ~125 instructions on
// the uniform datapath) fell behind it: one issuer per consumer, 4096 x 4096 M = 1 5.67 -> 5.40 us, 8192 x 4096
// 9.16 -> 8.04. Elsewhere the second issuer's spinning took issue slots from the consumers (M = 64 7.41 -> 8.03 us;
// NOTES W4A16 74).
constexpr u32 ISSUERS = KSPLIT ? CONSUMERS : 1;
constexpr int STRIPS = BLOCK_N / 16;              // 16-column strips of the packed weight per tile
// A stage holds K_SUB 64-value slices of K (one swizzle row of activations each). Each slice is dequantised
// into its own register set (wgmma reads them asynchronously); the barrier round trip and the scale loads are paid
// once per stage, the fold once per two slices, so two or four slices per stage cut that cost per weight (a wait on a
// landed stage still costs ~120 cycles: NOTES W4A16 59).
constexpr int A_SUB = BLOCK_M * 128;              // activations: BLOCK_M rows x 64 values
constexpr int W_SUB = STRIPS * 512;
constexpr int A_TILE = K_SUB * A_SUB;
constexpr int W_TILE = K_SUB * W_SUB;
constexpr int S_TILE = STRIPS * GPS * 32;         // per strip and group: 16 scales (or 8 zero-point pairs)
constexpr int STAGE_BYTES = (A_TILE + W_TILE + S_TILE * (GN_HAS_ZEROS ? 2 : 1) + 1023) / 1024 * 1024;
constexpr int NUM_THREADS = 128 * (1 + CONSUMERS);
// Registers per thread after setmaxnreg: with one or two consumers the producer gives most of its share to
// them (ptxas fills the launch bound's 168 / 255 registers there, so the pool covers the increase exactly);
// with more, the consumers (small decode tiles) keep the launch bound's share: an increase the pool cannot
// cover would block forever.
constexpr bool REBALANCE = CONSUMERS <= 2;
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = CONSUMERS == 2 ? 232 : 240;
// Output chunks: CHUNK_ROWS x 64 columns (128 bytes). CHUNK_ROWS comes from the host (Sm90W4A16Config.chunk_rows,
// which also sizes the shared memory and the store map's box): a TMA store box has one size, so tiles fitted to M,
// such as 144 or 224 rows, store 48- or 56-row chunks.
constexpr int CHUNK_SLOT = (CHUNK_ROWS * 128 + 1023) / 1024 * 1024;
constexpr int C_STAGE_BYTES = CONSUMERS * 2 * CHUNK_SLOT;
constexpr int V = ROW_BLOCKS * GN_WGMMA_REGS / 4;  // float4s of accumulators per thread
constexpr int OUT = GN_ACT_KIND == GN_ACT_F16 ? GN_OUT_F16 : GN_OUT_BF16;
// CLUSTER_K: the first CTA's receive slots, one per other CTA of the cluster: [rank - 1][consumer][V][128 threads]
// float4s, each consumer's counted on its own barrier.
constexpr int RECV_BYTES = (CLUSTER_K - 1) * COL_GROUPS * V * 128 * 16;
// KSPLIT: consumer 1's sums cross in its output chunk buffers, which it never stores from.
static_assert(!KSPLIT || (CONSUMERS == 2 && K_SUB == 4 && NUM_STAGES % 2 == 0 && V * 128 * 16 <= 2 * CHUNK_SLOT),
              "KSPLIT: two consumers, 256-value stages, an even ring (Sm90W4A16Config.problem), their sums fit");
static_assert(CLUSTER_K >= 1 && CLUSTER_K <= 8, "clusters of 1 to 8 CTAs (the portable limit)");
// reduce_parts: part 0 waits for the others rather than publish its sums where they are 32 KB or more per consumer
// (what publishing them costs outweighs the wait; smaller tiles measured 0.5-2.5% slower with the waiting code, even
// where it never waited).
constexpr bool WAIT = BLOCK_M * CONSUMER_N >= 128 * 64;
// FOLD (per-stage fp32 scaling, see the top) comes from the host (Sm90W4A16Config.fold): where a stage (with four
// slices, each half of one) spans one group and two accumulator sets fit beside the tile's sums.
static_assert(!FOLD || (GROUP_SIZE != 32 && BLOCK_M * ROW_BLOCKS <= 64), "FOLD: one group per stage, 3 x 32 sums");
static_assert(K_SUB == 1 || ((K_SUB == 2 || K_SUB == 4) && FOLD && GROUP_SIZE % 128 == 0 && GPS <= 2),
              "two or four slices per stage: FOLD tiles, a stage over one or two groups (G = 0 or a multiple of 128)");
static_assert(K_SUB < 4 || GROUP_SIZE == 0 || GROUP_SIZE == 128 || GROUP_SIZE % 256 == 0,
              "four slices per stage: a group boundary only between slices 1 and 2");
// FOLD scales per row block: rows g and g + 8 of each of the stage's groups.
constexpr int SC = FOLD ? 2 * GPS : 2;

static_assert(BLOCK_M % 8 == 0 && BLOCK_M <= 256, "BLOCK_M is the wgmma N: a multiple of 8, at most 256");
static_assert(CHUNK_ROWS % 8 == 0 && CHUNK_ROWS <= 64 && BLOCK_M % CHUNK_ROWS == 0 &&
              (BLOCK_M <= 64 || CHUNK_ROWS >= 32), "output chunks: a multiple of 8 rows up to 64 dividing BLOCK_M");
static_assert(CONSUMERS >= 1 && CONSUMERS <= 4, "1 to 4 consumer warpgroups");
static_assert(GROUP_SIZE == 0 || GROUP_SIZE % 32 == 0, "group size must be a multiple of 32");

// A CTA's segments of the flattened (tile, K stage) space, tile-major (tiles of one column block are
// consecutive, so CTAs that run together share weight tiles and, when it fits in L2, all of A).
// Data-parallel (stream 0): whole tiles b, b + G, ... of the G CTAs. Stream-K (stream 1, when there are fewer
// tiles than SMs): CTA b takes the stage iterations [b T / G, (b + 1) T / G) of all T = tiles x k_stages, so
// every CTA streams the same amount of weight; a tile is then summed in `parts` pieces by consecutive CTAs
// (`split`: this CTA's rank among them), which the last to finish adds up.
// CLUSTER_K: one segment per CTA, share `rank` of tile blockIdx.x / CLUSTER_K (a cluster: CLUSTER_K consecutive CTAs).
struct Work {
  int grid_m, tiles, k_stages, stream;
  u32 total;  // stream-K: tiles x k_stages, with total x gridDim.x < 2^32 (the host checks)
  // Position x: a tile (data-parallel) or a stage iteration (stream-K).
  GN_DEVICE int start(int b) const {
    return CLUSTER_K > 1 ? 0 : stream ? (int)((u32)b * total / gridDim.x) : b;
  }
  GN_DEVICE int end() const { return CLUSTER_K > 1 ? 1 : stream ? start(blockIdx.x + 1) : tiles; }
  GN_DEVICE int next(int x, int k_tiles) const { return CLUSTER_K > 1 ? 1 : stream ? x + k_tiles : x + gridDim.x; }
  GN_DEVICE int owner(int x) const { return (int)(((u32)(x + 1) * gridDim.x - 1) / total); }  // x's CTA
  GN_DEVICE void segment(int x, int end, int& tile, int& tm, int& tn, int& kt0, int& k_tiles, int& split,
                         int& parts) const {
    if constexpr (CLUSTER_K > 1) {
      tile = blockIdx.x / CLUSTER_K;
      split = blockIdx.x % CLUSTER_K;  // = %cluster_ctarank for clusters along x
      parts = CLUSTER_K;
      kt0 = split * k_stages / CLUSTER_K;
      k_tiles = (split + 1) * k_stages / CLUSTER_K - kt0;  // not empty: the host gives every CTA a stage at least
      tm = tile % grid_m;
      tn = tile / grid_m;
      return;
    }
    tile = stream ? x / k_stages : x;
    kt0 = stream ? x % k_stages : 0;
    k_tiles = stream ? gn_min(k_stages - kt0, end - x) : k_stages;
    tm = tile % grid_m;
    tn = tile / grid_m;
    const int first = tile * k_stages;
    split = stream ? (int)blockIdx.x - owner(first) : 0;
    parts = stream ? owner(first + k_stages - 1) - owner(first) + 1 : 1;
  }
};

// 64-value slice k64 of the packed weight's strips from column tile tn on ([k64][strips][512 bytes]).
GN_DEVICE const u8* weight_slice(const u8* W, int k64, int strips, int tn) {
  return W + ((i64)k64 * strips + tn * STRIPS) * 512;
}

// This CTA's first `pre` stages of weight, into L2 (see the kernel's dependent-launch comment).
GN_DEVICE void prefetch_weights(const Work& w, const u8* W, int strips, int pre) {
  int n = 0;
  const int end = w.end();
  for (int x = w.start(blockIdx.x); x < end && n < pre;) {
    int tile, tm, tn, kt0, k_tiles, split, parts;
    w.segment(x, end, tile, tm, tn, kt0, k_tiles, split, parts);
    x = w.next(x, k_tiles);
    const int strips_here = gn_min(STRIPS, strips - tn * STRIPS);
    for (int kt = kt0; kt < kt0 + k_tiles && n < pre; ++kt, ++n)
#pragma unroll
      for (int h = 0; h < K_SUB; ++h)
        bulk_prefetch_l2(weight_slice(W, kt * K_SUB + h, strips, tn), strips_here * 512);
  }
}

// The first group of stage kt (x of the scale / zero-point maps, in 32-byte units).
GN_DEVICE int stage_group(int kt) {
  return GROUP_SIZE == 0 ? 0 : kt * 64 * K_SUB / gn_max(GROUP_SIZE, 1);
}

// A stage's dequantisers per row block: exact (q - zero) with the scales kept for the fold (FOLD), or
// (q - zero) * scale per weight. sc gets the scales of this lane's rows g and g + 8 of each row block
// (fp16's second pair is 16 (q - zero)).
struct StageDq {
  DqZeros dz[ROW_BLOCKS][GPS];
  DqScaled dq[ROW_BLOCKS][GPS];
};

GN_DEVICE void stage_scales(StageDq& sd, float (&sc)[ROW_BLOCKS][SC], const u8* stage, int c, int warp, int lane,
                            u32 z_bits) {
  const int g = lane / 4;
  const u8* st = stage + A_TILE + W_TILE;
#pragma unroll
  for (int rb = 0; rb < ROW_BLOCKS; ++rb) {
    const int strip = (c * ROW_BLOCKS + rb) * 4 + warp;  // warp w of the warpgroup owns rows 16w..16w+15
#pragma unroll
    for (int q = 0; q < GPS; ++q) {
      const u8* s = st + (strip * GPS + q) * 32;
      const u32 z2 = GN_HAS_ZEROS ? *(const u32*)(s + S_TILE + g * 4) : z_bits;
      const u16 s_lo = *(const u16*)(s + g * 2), s_hi = *(const u16*)(s + 16 + g * 2);
      if constexpr (FOLD) {
        sd.dz[rb][q].set(z2);
        sc[rb][2 * q] = to_float<OUT>(s_lo);
        sc[rb][2 * q + 1] = to_float<OUT>(s_hi) * DQ_HI;
      } else {
        sd.dq[rb][q].set(z2, s_lo, s_hi);
      }
    }
  }
}

// This lane's packed words of slice h of a stage (one uint4 per row block: warp w of consumer c reads strip
// (c * ROW_BLOCKS + rb) * 4 + w).
GN_DEVICE void load_slice(uint4 (&wv)[ROW_BLOCKS], const u8* stage, int h, int c, int warp, int lane) {
  const u8* wt = stage + A_TILE + h * W_SUB;
#pragma unroll
  for (int rb = 0; rb < ROW_BLOCKS; ++rb)
    wv[rb] = *(const uint4*)(wt + ((((c * ROW_BLOCKS + rb) * 4 + warp) * 32 + lane) * 16));
}

// A consumer's words of slice h of a stage -> registers a[rb][step] (the A fragments of W^T), then the slice's
// wgmmas into d (desc: the stage's activation tile; the address field, bytes / 16, advances by plain addition).
// `first`: scale-d 0 (D = A*B, no zeroing) on the first step.
GN_DEVICE void slice_mma(float (&d)[ROW_BLOCKS][GN_WGMMA_REGS], u32 (&a)[ROW_BLOCKS][4][4], const StageDq& sd,
                         const uint4 (&words)[ROW_BLOCKS], int h, u64 desc, bool first) {
#pragma unroll
  for (int rb = 0; rb < ROW_BLOCKS; ++rb) {
    const uint4 wv = words[rb];
#pragma unroll
    for (int step = 0; step < 4; ++step) {
      const u32 w = step == 0 ? wv.x : step == 1 ? wv.y : step == 2 ? wv.z : wv.w;
      u32 r[4];
      if constexpr (FOLD)
        sd.dz[rb][GPS == 1 ? 0 : h * 64 / GROUP_SIZE].word(w, r);
      else
        sd.dq[rb][GPS == 2 ? step / 2 : 0].word(w, r);
      a[rb][step][0] = r[0];  // rows g, k 0-1 of the step
      a[rb][step][1] = r[2];  // rows g + 8, k 0-1
      a[rb][step][2] = r[1];  // rows g, k 8-9
      a[rb][step][3] = r[3];  // rows g + 8, k 8-9
    }
  }
  wgmma_fence();
  desc += h * (A_SUB / 16);
#pragma unroll
  for (int step = 0; step < 4; ++step)
#pragma unroll
    for (int rb = 0; rb < ROW_BLOCKS; ++rb)
      GN_WGMMA_RA(d[rb], a[rb][step], desc + 2 * step, (first && step == 0) ? 0 : 1);  // + 32 bytes of K
  wgmma_commit();
}

// FOLD: a retired stage's sums e, scaled per row, into the tile's sums d. Accumulator j holds row g (j % 4 < 2)
// or g + 8 of its row block.
GN_DEVICE void fold(float (&d)[ROW_BLOCKS][GN_WGMMA_REGS], float (&e)[ROW_BLOCKS][GN_WGMMA_REGS],
                    const float (&sc)[ROW_BLOCKS][SC], int q = 0) {
#pragma unroll
  for (int rb = 0; rb < ROW_BLOCKS; ++rb) {
    GN_WGMMA_TOUCH(e[rb]);  // read only after the wait that retired them
#pragma unroll
    for (int j = 0; j < GN_WGMMA_REGS; ++j) d[rb][j] += e[rb][j] * sc[rb][2 * q + (j / 2) % 2];
  }
}

// Float4 v (v < V) of a consumer's sums: how the fix-ups (workspace, cluster) move them.
GN_DEVICE float* sums4(float (&d)[ROW_BLOCKS][GN_WGMMA_REGS], int v) {
  return &d[v / (GN_WGMMA_REGS / 4)][(v % (GN_WGMMA_REGS / 4)) * 4];
}
GN_DEVICE const float* sums4(const float (&d)[ROW_BLOCKS][GN_WGMMA_REGS], int v) {
  return &d[v / (GN_WGMMA_REGS / 4)][(v % (GN_WGMMA_REGS / 4)) * 4];
}

// CLUSTER_K: byte offset, in the receive slots, of float4 0 of consumer c's thread t from the cluster's CTA `rank` > 0;
// its float4 v lies v x RECV_V bytes on (the layout of RECV_BYTES).
constexpr int RECV_V = 128 * 16;
GN_DEVICE u32 recv_offset(int rank, int c, int t) { return (((rank - 1) * COL_GROUPS + c) * V * 128 + t) * 16; }

// Stream-K fix-up: publish this consumer's sums of part `split`; the last of the tile's `parts` to arrive gets
// every part added in part order (returns true and leaves them in d), the others return false. With WAIT, part 0
// first waits for the others (others_arrived) and, once they have all arrived, adds theirs without publishing its
// own: in stream-K its share of the tile ends its CTA's range while the others' shares begin theirs, so it finishes
// last as a rule, and in aligned K splits the parts finish together.
GN_DEVICE bool reduce_parts(float (&d)[ROW_BLOCKS][GN_WGMMA_REGS], float4* ws, int* ticket, int parts, int split,
                             int max_parts, int c, int t, volatile int* flag) {
  float4* mine = ws;  // [part][V][128 threads]
  bool waited = false;
  if constexpr (WAIT) {
    if (split == 0) {
      // (Its own flag: a CTA has at most one such segment, its last, so no thread still reads an earlier value.)
      if (t == 0) flag[CONSUMERS] = others_arrived(ticket, parts, 1 << 14);
      named_barrier(1 + c, 128);
      waited = flag[CONSUMERS];
    }
  }
  if (!waited) {
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const float* r = sums4(d, v);
      __stcg(mine + ((i64)split * V + v) * 128 + t, make_float4(r[0], r[1], r[2], r[3]));
    }
    named_barrier(1 + c, 128);
    if (t == 0) *flag = ticket_arrive(ticket, parts);
    named_barrier(1 + c, 128);
    if (!*flag) return false;
  }
  // Fix-up loads in flight (as many as fit beside the tile's registers: the offline compile test checks). Part 0's
  // own sums come from registers (its turn is in the first batch), so it need not have published them.
  constexpr int LOADS = 16;
  sum_parts<V, LOADS>([&](int v) { return sums4(d, v); },
               [](int) { return true; }, mine + t, (i64)V * 128, 128, parts, split, max_parts);
  return true;
}

// CLUSTER_K, a CTA other than the cluster's first (rank > 0): this consumer's sums into their receive slot in the first
// CTA's shared memory, 16 bytes per st.async, each counted on that consumer's receive barrier there. Nothing to wait
// for here: the values leave from registers, and the first CTA does not exit before its barrier has counted them all.
GN_DEVICE void push_sums(const float (&d)[ROW_BLOCKS][GN_WGMMA_REGS], u32 recv0, u32 recv_bar, int rank, int c, int t) {
  const u32 slot = cluster_map(recv0 + recv_offset(rank, c, t), 0);
  const u32 bar = cluster_map(recv_bar, 0);
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const float* r = sums4(d, v);
    st_async(slot + v * RECV_V, make_float4(r[0], r[1], r[2], r[3]), bar);
  }
}

// CLUSTER_K, the cluster's first CTA: once this consumer's receive barrier has counted every other CTA's bytes, their
// sums added to its own in rank order (as reduce_parts adds parts: the same bits as a stream-K split of these shares).
GN_DEVICE void add_received(float (&d)[ROW_BLOCKS][GN_WGMMA_REGS], const u8* recv, u32 recv_bar, int c, int t) {
  mbar_wait_cluster(recv_bar, 0);
#pragma unroll
  for (int p = 1; p < CLUSTER_K; ++p)
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const float4 x = *(const float4*)(recv + recv_offset(p, c, t) + v * RECV_V);
      float* r = sums4(d, v);
      r[0] += x.x;
      r[1] += x.y;
      r[2] += x.z;
      r[3] += x.w;
    }
}

// One consumer's accumulators (+ bias) -> C through shared memory and TMA stores. Accumulator j of row block
// rb: lane (g, t) holds C^T rows (columns of C) g and g + 8, columns (rows of C) 8j + 2t, 8j + 2t + 1; as 16-bit
// pairs these are two 8x8 mma fragments, which stmatrix.trans writes as 8 rows of C x 8 columns. Chunk rows are
// 128-byte swizzled: 16-byte unit u of row r sits at u ^ (r % 8). `chunk`: this consumer's running chunk count
// (buffers alternate; the store issued two chunks ago must have read a buffer before it is rewritten).
GN_DEVICE void store_tile(const float (&d)[ROW_BLOCKS][GN_WGMMA_REGS], const TmaDesc* map_c, const u16* bias,
                          u32 buf0, int c, int t, int m0, int n0, int N, int has_bias, int& chunk) {
  const int warp = t / 32, lane = t % 32, g = lane / 4;
#pragma unroll
  for (int rb = 0; rb < ROW_BLOCKS; ++rb) {
    const int col = n0 + c * CONSUMER_N + rb * 64 + warp * 16 + g;  // this lane's columns col, col + 8
    float b0 = 0.f, b1 = 0.f;
    if (has_bias) {
      if (col < N) b0 = to_float<OUT>(bias[col]);
      if (col + 8 < N) b1 = to_float<OUT>(bias[col + 8]);
    }
#pragma unroll
    for (int q = 0; q < BLOCK_M / CHUNK_ROWS; ++q, ++chunk) {
      const u32 buf = buf0 + (chunk % 2) * CHUNK_SLOT;
      if (chunk >= 2) {
        if (t == 0) bulk_wait_read<1>();
        named_barrier(1 + c, 128);
      }
#pragma unroll
      for (int jj = 0; jj < CHUNK_ROWS / 8; ++jj) {
        const int j = q * (CHUNK_ROWS / 8) + jj;
        const float* v = &d[rb][4 * j];
        const u32 lo = OUT == GN_OUT_BF16 ? pack_bf16x2(v[0] + b0, v[1] + b0) : pack_f16x2(v[0] + b0, v[1] + b0);
        const u32 hi = OUT == GN_OUT_BF16 ? pack_bf16x2(v[2] + b1, v[3] + b1) : pack_f16x2(v[2] + b1, v[3] + b1);
        const int r = 8 * jj + lane % 8, unit = 2 * warp + (lane / 8) % 2;  // lanes 16-31: addresses unused
        stmatrix_x2_trans(buf + r * 128 + ((unit ^ (r % 8)) << 4), lo, hi);
      }
      fence_proxy_async_smem();  // each writer's stores -> visible to the TMA engine
      named_barrier(1 + c, 128);
      if (t == 0) {
        tma_store_2d(map_c, buf, (n0 + c * CONSUMER_N + rb * 64) * 2, m0 + q * CHUNK_ROWS);
        bulk_commit();
      }
    }
  }
}

}  // namespace w4a16_sm90

using namespace w4a16_sm90;

// map_a: activations as bytes [M, K * 2] (boxes of 128 bytes x BLOCK_M rows, 128-byte swizzle); map_at: the
// same with boxes of M % BLOCK_M rows (the last row tile when M is ragged; otherwise unused); map_s / map_z:
// scales / zero points as bytes [N / 16 strips, groups * 32] (boxes of GPS * 32 bytes x STRIPS rows, no
// swizzle); map_c: C as bytes [M, N * 2] (boxes of 128 bytes x CHUNK_ROWS rows, 128-byte swizzle). W: the packed
// weight [k_stages][strips][512 bytes]. bias: [N] (has_bias). stream: stream-K (Work); ws / tickets: its
// workspace (max_parts slots per tile and consumer) and per-(tile, consumer) counters (zero between launches:
// the last part resets its counter). z_bits: the zero-point pair
// of every column when there are no zero points (MAGIC + zp_bias, as in the packed format).
extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1) GN_CLUSTER sm90_w4a16(
    const __grid_constant__ TmaDesc map_a, const __grid_constant__ TmaDesc map_at,
    const __grid_constant__ TmaDesc map_s, const __grid_constant__ TmaDesc map_z,
    const __grid_constant__ TmaDesc map_c, const u8* __restrict__ W, const u16* __restrict__ bias,
    float4* __restrict__ ws, int* __restrict__ tickets, int M, int N, int k_stages, int strips, int stream,
    int max_parts, int z_bits, int has_bias, int pre_stages) {
  extern __shared__ u8 smem_raw[];
  __shared__ int flags[(WAIT ? 2 : 1) * CONSUMERS];  // reduce_parts: per consumer, the ticket's answer (and the wait's)
  // 128-byte swizzled tiles need 1024-byte alignment; the host allocates 1 KB of slack for this.
  const u32 raw0 = (u32)__cvta_generic_to_shared(smem_raw);
  const u32 smem0 = (raw0 + 1023) & ~1023u;
  u8* const smem = smem_raw + (smem0 - raw0);
  const u32 cbuf0 = smem0 + NUM_STAGES * STAGE_BYTES;
  const u32 recv0 = cbuf0 + C_STAGE_BYTES;  // CLUSTER_K: the receive slots (RECV_BYTES)
  const u32 full0 = recv0 + RECV_BYTES, empty0 = full0 + 8 * NUM_STAGES, recv_bar0 = empty0 + 8 * NUM_STAGES;
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < NUM_STAGES; ++s) {
      mbar_init(full0 + 8 * s, 1);                   // the producer's arrive + the copies' bytes
      mbar_init(empty0 + 8 * s, COL_GROUPS * 4);     // one arrival per warp of the consumers that read it
    }
    if constexpr (CLUSTER_K > 1)
      for (int c = 0; c < CONSUMERS; ++c) mbar_init(recv_bar0 + 8 * c, 1);  // the consumer's expect_tx + pushed bytes
    mbar_fence_init();  // (release at cluster scope: peers push onto the receive barriers)
  }
  __syncthreads();
  // CLUSTER_K: a peer may push onto the first CTA's receive barriers only once they are initialised. One whole cluster
  // barrier here (while a dependent launch waits for the previous kernel anyway), not an early arrival and a late wait:
  // a CTA holding a pending arrival through its main loop streamed ~8% slower (NOTES W4A16 58). No barrier at the end:
  // the first CTA leaves only after its receive barriers have counted every push, and no CTA reads a peer.
  if constexpr (CLUSTER_K > 1) cluster_sync_relaxed();

  const int grid_m = (M + BLOCK_M - 1) / BLOCK_M, grid_n = (N + BLOCK_N - 1) / BLOCK_N;
  const Work w{grid_m, grid_m * grid_n, k_stages, stream, (u32)(grid_m * grid_n * k_stages)};
  // Launched as a programmatic dependent: the previous kernel in the stream may still be running (its last
  // CTAs finishing while this grid's first ones start). Prefetching this CTA's first weight stages into L2 is
  // safe (L2 is where every SM's writes land: a prefetch cannot make anyone read stale data); every other
  // global access waits for that kernel to complete. The next kernel may then launch at once: it waits for
  // this one in the same way.
  if (threadIdx.x == 0) prefetch_weights(w, W, strips, pre_stages);
  griddep_wait();
  griddep_launch_dependents();

  if (wg == 0) {  // producer
    if constexpr (REBALANCE) setmaxnreg_dec<PRODUCER_REGS>();
    const u32 issuer = t / 32;
    if (t % 32 == 0 && issuer < ISSUERS) {
      tma_prefetch_desc(&map_a);
      tma_prefetch_desc(&map_at);
      tma_prefetch_desc(&map_s);
      if (GN_HAS_ZEROS) tma_prefetch_desc(&map_z);
      u32 it = 0;  // stages issued so far, across units: slot it % NUM_STAGES, round it / NUM_STAGES
      const int tail = M % BLOCK_M;
      const int end = w.end();
      for (int x = w.start(blockIdx.x); x < end;) {
        int tile, tm, tn, kt0, k_tiles, split, parts;
        w.segment(x, end, tile, tm, tn, kt0, k_tiles, split, parts);
        x = w.next(x, k_tiles);
        const int strips_here = gn_min(STRIPS, strips - tn * STRIPS);
        // A ragged last row tile loads only its rows, through map_at (boxes of M % BLOCK_M rows): a box partly
        // past M would be zero-filled by the TMA unit, which measured up to 40% slower for the whole kernel. The
        // ring's rows past M keep stale data; they only feed columns of C^T that are never stored.
        const bool short_rows = tail != 0 && tm == grid_m - 1;
        const TmaDesc* a_map = short_rows ? &map_at : &map_a;
        const u32 bytes = K_SUB * ((short_rows ? tail * 128 : A_SUB) + strips_here * 512) +
                          S_TILE * (GN_HAS_ZEROS ? 2 : 1);
        for (int kt = kt0; kt < kt0 + k_tiles; ++kt, ++it) {
          if (ISSUERS > 1 && it % ISSUERS != issuer) continue;  // (a slot is one issuer's: ISSUERS divides NUM_STAGES)
          const u32 s = it % NUM_STAGES;
          if (it >= NUM_STAGES) mbar_wait(empty0 + 8 * s, ((it / NUM_STAGES) + 1) & 1);  // slot drained
          const u32 stage = smem0 + s * STAGE_BYTES, full = full0 + 8 * s;
          mbar_arrive_expect_tx(full, bytes);
#pragma unroll
          for (int h = 0; h < K_SUB; ++h) {
            const int k64 = kt * K_SUB + h;  // 64-value slice of K
            tma_load_2d(stage + h * A_SUB, a_map, k64 * 128, tm * BLOCK_M, full);
            bulk_load(stage + A_TILE + h * W_SUB, weight_slice(W, k64, strips, tn), strips_here * 512, full);
          }
          tma_load_2d(stage + A_TILE + W_TILE, &map_s, stage_group(kt) * 32, tn * STRIPS, full);
          if (GN_HAS_ZEROS)
            tma_load_2d(stage + A_TILE + W_TILE + S_TILE, &map_z, stage_group(kt) * 32, tn * STRIPS, full);
        }
      }
    }
  } else {
    if constexpr (REBALANCE) setmaxnreg_inc<CONSUMER_REGS>();
    const int c = wg - 1, warp = t / 32, lane = t % 32;
    const int cc = KSPLIT ? 0 : c;  // whose columns
    const u32 cbuf = cbuf0 + c * 2 * CHUNK_SLOT;
    float d[ROW_BLOCKS][GN_WGMMA_REGS];  // the tile's sums
    float e0[ROW_BLOCKS][GN_WGMMA_REGS], e1[ROW_BLOCKS][GN_WGMMA_REGS], sc0[ROW_BLOCKS][SC], sc1[ROW_BLOCKS][SC];
    u32 a0[ROW_BLOCKS][4][4], a1[ROW_BLOCKS][4][4];  // two register sets: one is read by running wgmmas
    u32 it = 0;    // the producer's count of the stage this consumer takes next
    u32 base = 0;  // the producer's count of stages before the current segment
    int chunk = 0;
    const u64 desc0 = wgmma_desc_k128(smem0);
    const u32 recv_bar = recv_bar0 + 8 * c;
    // What the other CTAs will push. Pushes may land before this (the transaction count goes negative); the phase
    // cannot complete before this arrival, the barrier's only one.
    if (CLUSTER_K > 1 && blockIdx.x % CLUSTER_K == 0 && t == 0 && (!KSPLIT || c == 0))
      mbar_arrive_expect_tx(recv_bar, (CLUSTER_K - 1) * V * 128 * 16);
    // A slice's wgmmas read their registers until a later wait: PTX makes writing them before that undefined.
    // Consecutive slices therefore fill different registers (a0, a1; with FOLD consecutive steps also sum
    // into e0, e1), in separate code (an if / else on the parity let the compiler merge both into one set),
    // and each slice's wait<1> retires the slice before it. (ptxas checks this and serialises every wgmma,
    // warning C7513, when some path breaks it.) FOLD: each step sums into its own set, folded into d once
    // retired; otherwise every step sums into d. With two slices a step is a0 then a1.
    // A step is a stage, or with four slices per stage (K_SUB 4) half of one (`half`: which): its two slices sum
    // into e (with G = 128 a half is one group), the first half waits for the stage and the second moves `it` on.
    // The previous step's sums e_prev are folded once retired, with the scales of their group: the previous stage's
    // last (sc_prev, loaded by the previous step) or, in a second half, this stage's first.
    auto step = [&](int kt, int half, u32 (&a)[ROW_BLOCKS][4][4], u32 (&a_next)[ROW_BLOCKS][4][4],
                    float (&e)[ROW_BLOCKS][GN_WGMMA_REGS], float (&sc)[ROW_BLOCKS][SC],
                    float (&e_prev)[ROW_BLOCKS][GN_WGMMA_REGS], const float (&sc_prev)[ROW_BLOCKS][SC]) {
      const bool opens = K_SUB < 4 || half == 0;
      const int h0 = K_SUB == 4 ? 2 * half : 0;  // the step's first slice
      const u32 s = it % NUM_STAGES;
      if (opens) mbar_wait(full0 + 8 * s, (it / NUM_STAGES) & 1);
      const u8* stage = smem + s * STAGE_BYTES;
      const u64 desc = desc0 + s * (STAGE_BYTES / 16);
      StageDq sd;
      stage_scales(sd, sc, stage, cc, warp, lane, (u32)z_bits);
      uint4 w0[ROW_BLOCKS], w1[ROW_BLOCKS];
      load_slice(w0, stage, h0, cc, warp, lane);
      slice_mma(FOLD ? e : d, a, sd, w0, h0, desc, FOLD || kt == 0);
      // With one row block, the next slice's words are read before the wait (whose memory clobber would hold the
      // load behind it), so that their shared-memory latency runs under the wgmmas in flight (16 x 128 tiles 3%
      // faster; with two row blocks the eight live registers cost 32 x 256 tiles spills).
      if constexpr (K_SUB >= 2 && ROW_BLOCKS == 1) load_slice(w1, stage, h0 + 1, cc, warp, lane);
      wgmma_wait<1>();  // the previous slice (the previous step's last) is done with its slot and registers
      if (kt > 0) {
        if constexpr (FOLD) fold(d, e_prev, sc_prev, K_SUB == 4 && half == 0 ? GPS - 1 : 0);
        // Lane 0 releases the slot for its warp. The other lanes' shared loads of it are complete: their values
        // fed the wgmma just retired. (A __syncwarp before the arrival, the memory model's way to order them,
        // cost 3-13% at M = 8-64 and did not quieten racecheck, which flags every refilled slot: NOTES W4A16 39.)
        if (opens && lane == 0) mbar_arrive(empty0 + 8 * ((it - STRIDE) % NUM_STAGES));
      }
      if constexpr (K_SUB >= 2) {
        if constexpr (ROW_BLOCKS > 1) load_slice(w1, stage, h0 + 1, cc, warp, lane);
        slice_mma(e, a_next, sd, w1, h0 + 1, desc, false);
        wgmma_wait<1>();  // the step's first slice retired: a is free for the next step
      }
      if (K_SUB < 4 || half == 1) it += STRIDE;
    };
    // The register set each step starts with: alternating with one slice per step, always a0 with two.
    auto& a_odd = K_SUB >= 2 ? a0 : a1;
    const int end = w.end();
    for (int x = w.start(blockIdx.x); x < end;) {
      int tile, tm, tn, kt0, k_tiles, split, parts;
      w.segment(x, end, tile, tm, tn, kt0, k_tiles, split, parts);
      // KSPLIT: consumer c takes the stages whose count (the producer's, across segments) has parity c, so a ring
      // slot (NUM_STAGES even) always serves the same consumer and its previous phase was that consumer's own, already
      // consumed. (Alternating within each segment, an odd segment would hand slots to the other consumer, which might
      // then wait on a phase two ahead of an unlanded one: that reads as complete.) None where a one-stage segment's
      // parity is the other consumer's.
      const int j0 = KSPLIT ? (int)((c + base) & 1) : 0;  // this consumer's first stage in the segment
      const int mine = KSPLIT ? (k_tiles > j0 ? (k_tiles - j0 + 1) / 2 : 0) : k_tiles;
      if constexpr (KSPLIT) {
        it = base + __shfl_sync(~0u, j0, 0);  // (warp-uniform to the compiler: slots and barriers stay scalar)
        base += k_tiles;
      }
      if constexpr (FOLD)  // (KSPLIT tiles fold: their 256-value stages require it)
#pragma unroll
        for (int rb = 0; rb < ROW_BLOCKS; ++rb)
#pragma unroll
          for (int j = 0; j < GN_WGMMA_REGS; ++j) d[rb][j] = 0.f;
      if (KSPLIT && mine == 0)  // (the tail below folds e1: nothing; a branch around it made ptxas serialise)
#pragma unroll
        for (int rb = 0; rb < ROW_BLOCKS; ++rb) {
#pragma unroll
          for (int j = 0; j < GN_WGMMA_REGS; ++j) e1[rb][j] = 0.f;
#pragma unroll
          for (int j = 0; j < SC; ++j) sc1[rb][j] = 0.f;
        }
      // Pairs, then an even tail: on every path, a set is rewritten only after the wait that retired its
      // group (a loop that could skip its odd step would, to ptxas, reach a0 with a0's group in flight).
      // (K_SUB 4: a stage is two steps, its halves, so the pairs cover it and the count is even.)
      const int steps = K_SUB == 4 ? 2 * mine : mine;
      int kt = 0;
#pragma unroll 1
      for (; kt + 1 < steps; kt += 2) {
        step(kt, 0, a0, a1, e0, sc0, e1, sc1);
        step(kt + 1, 1, a_odd, a1, e1, sc1, e0, sc0);
      }
      // (The shapes of these branches are what keeps ptxas from serialising: a FOLD tail with one wait and a
      // conditional fold, or a plain tail with a wait in each branch, made it do so.)
      if constexpr (FOLD) {
        if (kt < steps) {
          step(kt, 0, a0, a1, e0, sc0, e1, sc1);
          wgmma_wait<0>();
          fold(d, e0, sc0);
        } else {
          wgmma_wait<0>();
          fold(d, e1, sc1, K_SUB == 4 ? GPS - 1 : 0);
        }
      } else {
        if (kt < steps) step(kt, 0, a0, a1, e0, sc0, e1, sc1);
        wgmma_wait<0>();
      }
#pragma unroll
      for (int rb = 0; rb < ROW_BLOCKS; ++rb) GN_WGMMA_TOUCH(d[rb]);
      if (lane == 0 && (!KSPLIT || mine > 0)) mbar_arrive(empty0 + 8 * ((it - STRIDE) % NUM_STAGES));
      x = w.next(x, k_tiles);
      if constexpr (KSPLIT) {  // consumer 1's sums added to consumer 0's, who goes on alone
        float4* xch = (float4*)(smem + NUM_STAGES * STAGE_BYTES + 2 * CHUNK_SLOT) + t;
        if (c == 1)
#pragma unroll
          for (int v = 0; v < V; ++v) {
            const float* r = sums4(d, v);
            xch[v * 128] = make_float4(r[0], r[1], r[2], r[3]);
          }
        named_barrier(7, 256);
        if (c == 1) {
          named_barrier(7, 256);  // consumer 0 has read them: the next segment's may overwrite
          continue;
        }
#pragma unroll
        for (int v = 0; v < V; ++v) {
          const float4 y = xch[v * 128];
          float* r = sums4(d, v);
          r[0] += y.x;
          r[1] += y.y;
          r[2] += y.z;
          r[3] += y.w;
        }
        named_barrier(7, 256);
      }
      if constexpr (CLUSTER_K > 1) {
        if (split != 0) {
          push_sums(d, recv0, recv_bar, split, c, t);
          continue;
        }
        add_received(d, smem_raw + (recv0 - raw0), recv_bar, c, t);
      } else if (parts > 1 &&
                 !reduce_parts(d, ws + (i64)(tile * COL_GROUPS + c) * max_parts * V * 128,
                               tickets + tile * COL_GROUPS + c, parts, split, max_parts, c, t, flags + c)) {
        continue;
      }
      store_tile(d, &map_c, bias, cbuf, c, t, tm * BLOCK_M, tn * BLOCK_N, N, has_bias, chunk);
    }
    if (t == 0) bulk_wait<0>();  // the staging buffers live in this CTA's shared memory
  }
}
