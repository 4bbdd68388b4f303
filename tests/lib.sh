# TAP helpers for the .t shell tests. Sourced; expects $HT_BUILD (tests/run sets it).
: "${HT_BUILD:=$(cd "$(dirname "$0")/.." && pwd)/build}"
HETTRAIN="$HT_BUILD/hettrain"
T_N=0
T_FAIL=0
TMP=$(mktemp -d /tmp/ht_test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

ok() { # ok COND_EXIT_STATUS DESCRIPTION
    T_N=$((T_N + 1))
    if [ "$1" -eq 0 ]; then echo "ok $T_N - $2"; else echo "not ok $T_N - $2"; T_FAIL=$((T_FAIL + 1)); fi
}
diag() { printf '%s\n' "$@" | sed 's/^/# /'; }
done_testing() { echo "1..$T_N"; [ "$T_FAIL" -eq 0 ]; }

# run_ht ARGS...: runs hettrain, keeping stdout in $OUT, stderr in $ERR, status in $RC.
run_ht() {
    "$HETTRAIN" "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    OUT=$(cat "$TMP/out")
    ERR=$(cat "$TMP/err")
}

# expect_fail CODE PATTERN DESCRIPTION -- ARGS...: hettrain exits CODE and stderr matches PATTERN (grep -E).
expect_fail() {
    local code=$1 pat=$2 desc=$3
    shift 4
    run_ht "$@"
    local good=1
    [ "$RC" -eq "$code" ] && printf '%s' "$ERR" | grep -Eq -- "$pat" && good=0
    ok $good "$desc (exit $RC)"
    [ $good -eq 0 ] || diag "expected exit $code and /$pat/; stderr was:" "$ERR"
}
