/* The CLBlast SGEMM tuner's parameter spaces and constraints (see tune_space.h). */
#include "prof/tune_space.h"

/* Parameter names in CLBlast's order. Xgemm's GEMMK=0 and GEMMK=1 kernels have different
 * ranges; the lists here are the union, and valid_xgemm() pins what GEMMK=1 requires. */
const kspace ht_tune_space[NKERN] = {
    {"Xgemm",
     16,
     {{"GEMMK", 2, {0, 1}},
      {"KREG", 5, {1, 2, 4, 8, 16}},
      {"KWG", 4, {1, 16, 32, 64}},
      {"KWI", 4, {1, 2, 4, 8}},
      {"MDIMA", 5, {2, 4, 8, 16, 32}},
      {"MDIMC", 5, {2, 4, 8, 16, 32}},
      {"MWG", 5, {8, 16, 32, 64, 128}},
      {"NDIMB", 5, {2, 4, 8, 16, 32}},
      {"NDIMC", 5, {2, 4, 8, 16, 32}},
      {"NWG", 5, {8, 16, 32, 64, 128}},
      /* SA/SB = 1 (tiles staged in local memory) measured 2x slower on PoCL CPUs: its
       * barriers make PoCL save every work-item's accumulators between loop regions */
      {"SA", 1, {0}},
      {"SB", 1, {0}},
      {"STRM", 2, {0, 1}},
      {"STRN", 2, {0, 1}},
      {"VWM", 4, {1, 2, 4, 8}},
      {"VWN", 4, {1, 2, 4, 8}}}},
    {"XgemmDirect",
     10,
     {{"KWID", 5, {1, 2, 4, 8, 16}},
      {"MDIMAD", 4, {4, 8, 16, 32}},
      {"MDIMCD", 4, {4, 8, 16, 32}},
      {"NDIMBD", 4, {4, 8, 16, 32}},
      {"NDIMCD", 4, {4, 8, 16, 32}},
      {"PADA", 2, {0, 1}},
      {"PADB", 2, {0, 1}},
      {"VWMD", 4, {1, 2, 4, 8}},
      {"VWND", 4, {1, 2, 4, 8}},
      /* WGD = 64 or more: each of the four XgemmDirect variants then takes PoCL ~20 s to
       * compile, and every program pays that (CLBlast fetches the binary of all kernels) */
      {"WGD", 3, {8, 16, 32}}}},
    {"Copy",
     4,
     {{"COPY_DIMX", 3, {8, 16, 32}},
      {"COPY_DIMY", 3, {8, 16, 32}},
      {"COPY_VW", 4, {1, 2, 4, 8}},
      {"COPY_WPT", 4, {1, 2, 4, 8}}}},
    {"Pad",
     4,
     {{"PAD_DIMX", 3, {8, 16, 32}},
      {"PAD_DIMY", 3, {8, 16, 32}},
      {"PAD_WPTX", 3, {1, 2, 4}},
      {"PAD_WPTY", 3, {1, 2, 4}}}},
    {"Transpose",
     4,
     {{"TRA_DIM", 5, {4, 8, 16, 32, 64}},
      {"TRA_PAD", 2, {0, 1}},
      {"TRA_SHUFFLE", 2, {0, 1}},
      {"TRA_WPT", 5, {1, 2, 4, 8, 16}}}},
    {"Padtranspose",
     3,
     {{"PADTRA_PAD", 2, {0, 1}},
      {"PADTRA_TILE", 4, {8, 16, 32, 64}},
      {"PADTRA_WPT", 5, {1, 2, 4, 8, 16}}}},
    {"GemmRoutine", 1, {{"XGEMM_MIN_INDIRECT_SIZE", 1, {0}}}},
};


/* Start point: the built-in PoCL CPU set of src/ocl/blas.c and conf/tuning/pocl-cpu.cfg
 * (keep the three in step). */
const size_t ht_tune_start[NKERN][MAXP] = {
    {0, 1, 16, 4, 8, 8, 128, 8, 8, 128, 0, 0, 0, 0, 8, 4},
    {2, 8, 8, 8, 8, 1, 1, 1, 1, 16},
    {8, 8, 8, 2},
    {32, 16, 1, 2},
    {4, 0, 0, 8},
    {1, 16, 1},
    {64},
};

static int mult(size_t a, size_t b) { return b != 0 && a % b == 0; }

size_t ht_tune_local_mem = 32768, ht_tune_max_wg = 256;

static int valid_xgemm(const config *c) {
    size_t gemmk = P(c, K_XGEMM, 0), kreg = P(c, K_XGEMM, 1), kwg = P(c, K_XGEMM, 2),
           kwi = P(c, K_XGEMM, 3), mdima = P(c, K_XGEMM, 4), mdimc = P(c, K_XGEMM, 5),
           mwg = P(c, K_XGEMM, 6), ndimb = P(c, K_XGEMM, 7), ndimc = P(c, K_XGEMM, 8),
           nwg = P(c, K_XGEMM, 9), sa = P(c, K_XGEMM, 10), sb = P(c, K_XGEMM, 11),
           strm = P(c, K_XGEMM, 12), strn = P(c, K_XGEMM, 13), vwm = P(c, K_XGEMM, 14),
           vwn = P(c, K_XGEMM, 15);
    if (mdimc * ndimc > ht_tune_max_wg) return 0;
    /* more than 256 accumulators per work-item only spills (and takes minutes to compile) */
    if ((mwg / mdimc) * (nwg / ndimc) > 256) return 0;
    if (!mult(mwg, mdimc * vwm) || !mult(nwg, ndimc * vwn)) return 0; /* integer MWI, NWI */
    if (!mult(mwg, mdima * vwm) || !mult(nwg, ndimb * vwn)) return 0; /* integer MWIA, NWIB */
    if (gemmk == 1) {
        /* 2D register tiling kernel: no local memory, KWG = KWI = 1, KREG a multiple of VWN,
         * and CLBlast's tuner ties the A/B load shapes to the thread shape. Square tiles
         * too: CLBlast 1.5.3's GemmIndirect sizes the GEMMK=1 grid with M and N swapped
         * (global = {n*MDIMC/NWG, m*NDIMC/MWG}), so sets with MWG != NWG or MDIMC != NDIMC
         * leave parts of C uncomputed (seen here as wrong results) */
        return kwg == 1 && kwi == 1 && sa == 0 && sb == 0 && strm == 0 && strn == 0 &&
               mult(kreg, vwn) && mdima == mdimc && ndimb == ndimc && mwg == nwg && mdimc == ndimc;
    }
    if (kreg != 1 || kwg == 1 || !mult(kwg, kwi)) return 0;
    /* MDIMA and NDIMB only shape the loads into local memory: without it they change no
     * code, so they are pinned rather than searched */
    if ((sa == 0 && mdima != mdimc) || (sb == 0 && ndimb != ndimc)) return 0;
    /* KWG has to be a multiple of KDIMA = MDIMC*NDIMC/MDIMA and KDIMB = MDIMC*NDIMC/NDIMB */
    if (!mult(mdimc * ndimc, mdima) || !mult(mdimc * ndimc, ndimb)) return 0;
    if (!mult(kwg, mdimc * ndimc / mdima) || !mult(kwg, mdimc * ndimc / ndimb)) return 0;
    return 4 * (sa * kwg * mwg + sb * kwg * nwg) <= ht_tune_local_mem;
}

static int valid_direct(const config *c) {
    size_t kwid = P(c, K_DIRECT, 0), mdimad = P(c, K_DIRECT, 1), mdimcd = P(c, K_DIRECT, 2),
           ndimbd = P(c, K_DIRECT, 3), ndimcd = P(c, K_DIRECT, 4), pada = P(c, K_DIRECT, 5),
           padb = P(c, K_DIRECT, 6), vwmd = P(c, K_DIRECT, 7), vwnd = P(c, K_DIRECT, 8),
           wgd = P(c, K_DIRECT, 9);
    if (mdimcd * ndimcd > ht_tune_max_wg || !mult(wgd, kwid)) return 0;
    if ((wgd / mdimcd) * (wgd / ndimcd) > 256) return 0; /* as for Xgemm */
    if (!mult(wgd, mdimcd * vwmd) || !mult(wgd, ndimcd * vwnd)) return 0;
    if (!mult(wgd, mdimad * vwmd) || !mult(wgd, ndimbd * vwnd)) return 0;
    if (!mult(mdimcd * ndimcd, mdimad) || !mult(mdimcd * ndimcd, ndimbd)) return 0;
    if (!mult(wgd, mdimcd * ndimcd / mdimad) || !mult(wgd, mdimcd * ndimcd / ndimbd)) return 0;
    return 4 * (wgd * (wgd + pada) + wgd * (wgd + padb)) <= ht_tune_local_mem;
}

int ht_tune_valid(const config *c, int k) {
    switch (k) {
    case K_XGEMM:
        return valid_xgemm(c);
    case K_DIRECT:
        return valid_direct(c);
    case K_COPY:
        return P(c, K_COPY, 0) * P(c, K_COPY, 1) <= ht_tune_max_wg;
    case K_PAD:
        return P(c, K_PAD, 0) * P(c, K_PAD, 1) <= ht_tune_max_wg;
    case K_TRA: {
        size_t dim = P(c, K_TRA, 0), pad = P(c, K_TRA, 1), wpt = P(c, K_TRA, 3);
        return dim * dim <= ht_tune_max_wg && 4 * wpt * (wpt * dim) * (dim + pad) <= ht_tune_local_mem;
    }
    case K_PADTRA: {
        size_t pad = P(c, K_PADTRA, 0), tile = P(c, K_PADTRA, 1), wpt = P(c, K_PADTRA, 2);
        return tile * tile <= ht_tune_max_wg && 4 * (wpt * tile) * (wpt * tile + pad) <= ht_tune_local_mem;
    }
    default:
        return 1;
    }
}

