# median.sh - sourced by the tprt benches (bench_tprt.sh, ab_env.sh): median
# reads numbers, one a line, and prints their median (the mean of the middle
# two for an even count; 0 for none).
median() {
  sort -g | awk '{a[NR] = $1} END {if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2); else print 0}'
}
