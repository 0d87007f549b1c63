/* 2-D MaxPool / AveragePool, one work-item per output (n, c, oh, ow). The output shape (and so
 * ceil_mode) is decided on the host; windows are clipped to the input. AveragePool divides by
 * the taps inside the input (count_include_pad = 0) or inside the padded input [-PH, H + PE)
 * (count_include_pad = 1; a ceil_mode overhang beyond the end pad never counts). MaxPool: NaN
 * propagates; a window entirely in the padding gives -inf (as the reference). */
__kernel void pool2d(__global const store_t *x, int x_off, __global store_t *y, int y_off, int total,
                     int H, int W, int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW,
                     int PHE, int PWE, int DH, int DW, int is_max, int include_pad) {
    int i = get_global_id(0);
    if (i >= total) return;
    int ow = i % OW, t = i / OW;
    int oh = t % OH, nc = t / OH;
    __global const store_t *xc = x + x_off + (long)nc * H * W;
    float acc = is_max ? -INFINITY : 0.0f;
    int count = 0;
    for (int kh = 0; kh < KH; kh++) {
        int ih = oh * SH - PH + kh * DH;
        for (int kw = 0; kw < KW; kw++) {
            int iw = ow * SW - PW + kw * DW;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W) {
                float v = LOAD(xc, ih * W + iw);
                if (is_max) acc = (isnan(v) || isnan(acc)) ? NAN : fmax(acc, v);
                else acc += v;
                count++;
            } else if (include_pad && ih >= -PH && ih < H + PHE && iw >= -PW && iw < W + PWE) {
                count++;
            }
        }
    }
    STORE(y, y_off + i, is_max ? acc : acc / (float)count);
}
