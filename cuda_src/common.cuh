// Shared basics for every gn_mm CUDA kernel.
// No CUDA or standard headers on purpose: NVRTC ships none, and libcu++ alone costs 1.5-2 s of compile time.
#pragma once

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

#define GN_DEVICE __device__ __forceinline__

// Accumulator kinds (GN_ACC_KIND) and output kinds (GN_OUT_KIND) the Jinja header selects.
#define GN_ACC_F32 0
#define GN_ACC_S32 1
#define GN_ACC_F16 2

#define GN_OUT_BF16 0
#define GN_OUT_F16 1
#define GN_OUT_F32 2
#define GN_OUT_S32 3

// Pick<C, T, F>::type is T when C holds, else F (std::conditional without the standard library).
template <bool C, class T, class F> struct Pick { typedef T type; };
template <class T, class F> struct Pick<false, T, F> { typedef F type; };

template <class T> GN_DEVICE T gn_min(T a, T b) { return a < b ? a : b; }
template <class T> GN_DEVICE T gn_max(T a, T b) { return a > b ? a : b; }
// A 64-bit integer sum saturated to int32, as mma .satfinite would (split-K and cluster sums).
GN_DEVICE int sat_s32(i64 x) { return (int)gn_min(gn_max(x, (i64)-2147483648LL), (i64)2147483647LL); }

