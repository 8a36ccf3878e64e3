# Checks bias_relu of epilogue.tile: M*N values of c, then M*N of o (row-major).
function mod(x, m) { return x - m * int(x / m) }
{ v[NR - 1] = $1 }
END {
    n = M * N; bad = 0
    for (i = 0; i < M; i++) for (j = 0; j < N; j++) {
        acc = 0
        for (k = 0; k < K; k++) acc += (mod(i * K + k, 3) - 1) * (mod(k * N + j, 5) - 2)
        x = acc + j; y = (x > 0 ? x : 0) * 0.5 + 0.5
        if (v[i * N + j] != y || v[n + i * N + j] != x) bad++
    }
    print bad " wrong of " n
}
