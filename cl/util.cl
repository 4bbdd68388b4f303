/* Small utility kernels: fills and scaled copies over flat buffers (offsets in floats). */

__kernel void fill_f32(__global float *x, const int off, const int n, const float v) {
    int i = get_global_id(0);
    if (i < n) x[off + i] = v;
}
