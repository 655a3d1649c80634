#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The one entry point behind the README's commands. On a fresh Debian 12
# machine, as root:
#   scripts/setup.sh run    install what is missing, build, start kvringd with
#                           defaults, run the demo worker, stop the server
#   scripts/setup.sh test   install what is missing, build, run the whole test
#                           suite through ctest: a gcc build with every
#                           optional peer off (unit suites), a gcc build
#                           with -Werror, then a clang build under AddressSanitizer+UBSan
#                           that also runs every libFuzzer target for a
#                           short fixed number of runs (what .ci/run calls)
#   scripts/setup.sh format check that every C file follows .clang-format
#                           (the test command does this first); with
#                           --fix, rewrite the files that do not
#   scripts/setup.sh asan   only the ASan+UBSan (and fuzz) half of test
#   scripts/setup.sh fuzz [SECONDS]  every libFuzzer target of the ASan
#                           tree for SECONDS each (default 300), growing its
#                           corpus in build-asan/fuzz-corpus/<target>
#                           (seeded from tests/fuzz/corpus); prints inputs,
#                           inputs/s, coverage and findings per target, and
#                           the path of each finding's reproducer
#   scripts/setup.sh tsan   the concurrent suites under ThreadSanitizer
#   scripts/setup.sh stress the 10-minute fault-injection run of docs/reliability.md
#   scripts/setup.sh bench [ARGS]  install the benchmark peers (libzmq,
#                           gnuplot, fio), build, run kvring-bench all (plots in
#                           build-bench/plots; ARGS go to kvring-bench)
#   scripts/setup.sh deps   only install the Debian packages
# Exit status: 0 only when everything asked for succeeded.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
jobs=$(nproc 2>/dev/null || echo 2)

# Build and test dependencies, all from Debian's archive (README says why
# each is here). Benchmark-only peers (libzmq, gnuplot, fio) are installed by
# the bench command, not here.
deps=(build-essential cmake pkg-config liburing-dev libxxhash-dev
      libcriterion-dev python3 clang)
# clang's sanitizer and libFuzzer runtimes are only a Recommends of clang,
# and install_deps takes no recommends; groff checks the man pages (it is
# in a standard Debian install, but a minimal image may lack it).
deps+=(libclang-rt-14-dev groff-base)
# The torch layer's tests (kvring.torch, kvring.kv, kvring.vllm); the
# library and the plain binding never need them.
deps+=(python3-torch python3-numpy)
# sd_notify for kvringd.service (Type=notify) and its test.
deps+=(libsystemd-dev)
# Real Redis and a real Redis Cluster for the L2 tier's tests and bench
# (kvringd itself needs neither at run time).
deps+=(redis-server redis-tools)
# kvring-inspect --serve (/metrics over HTTP) and its test.
deps+=(libmicrohttpd-dev)
# The test command fails on a C file that .clang-format would change.
deps+=(clang-format)
# The wheel (cmake --build build --target wheel) builds offline with the
# system's pip, setuptools and wheel (pip --no-build-isolation); venv
# makes the fresh virtualenvs of the python_wheel test.
deps+=(python3-pip python3-setuptools python3-wheel python3-venv)
# install_tree runs systemd's own checkers on the installed unit
# (systemd-analyze verify and security, systemd-sysusers and
# systemd-tmpfiles on a scratch root); verify resolves the unit's
# man:kvringd(8) link with man (man-db).
deps+=(systemd man-db)
# promtool checks the inspector's Prometheus exposition, and a real
# Prometheus server scrapes kvring-inspect --serve in test_prometheus.
deps+=(prometheus)

log() { printf '%s setup: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

install_deps() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -eq 0 ]; then
		log "dependencies present"
		return 0
	fi
	if [ "$(id -u)" -ne 0 ]; then
		log "missing packages: ${missing[*]}; run as root or install them"
		return 1
	fi
	log "installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# build DIR [cmake args...]
build() {
	local dir=$1
	shift
	cmake -S "$here" -B "$dir" -DKVR_WERROR=ON "$@" >/dev/null
	cmake --build "$dir" -j"$jobs"
}

run_main() {
	local b=$here/build sock pid rc name
	build "$b"
	sock=$(mktemp -d /tmp/kvring-run.XXXXXX)/kvringd.sock
	# A private segment name: a kvringd the user already runs (default
	# name kvring-<uid>) is neither disturbed nor mistaken for ours.
	name=kvring-run-$$
	log "starting kvringd (defaults, socket $sock, name $name)"
	"$b/server/kvringd" --socket "$sock" --name "$name" &
	pid=$!
	for _ in $(seq 1 100); do
		[ -S "$sock" ] && break
		kill -0 "$pid" 2>/dev/null || { wait "$pid"; return 1; }
		sleep 0.1
	done
	rc=0
	"$b/tools/kvring-demo" --socket "$sock" || rc=$?
	kill -TERM "$pid"
	if ! wait "$pid"; then
		log "kvringd did not exit cleanly"
		rc=1
	fi
	for f in /dev/shm/"$name".ctl /dev/shm/"$name".pool "$sock" "$sock.lock"; do
		if [ -e "$f" ]; then
			log "kvringd left $f behind"
			rc=1
		fi
	done
	rm -rf "$(dirname "$sock")"
	[ $rc -eq 0 ] && log "demo OK" || log "demo FAILED (exit $rc)"
	return $rc
}

# ctest DIR [args...]: tests that start servers hold a resource lock, so
# -j only runs unit tests side by side.
run_ctest() {
	local dir=$1
	shift
	ctest --test-dir "$dir" --output-on-failure -j"$jobs" "$@"
}

# The tree with every optional peer switched off (KVR_NO_OPTIONAL) proves
# the build never depends on what happens to be installed; its unit suites
# run too, as they are quick.
run_minimal() {
	local b=$here/build-min
	build "$b" -DKVR_NO_OPTIONAL=ON
	run_ctest "$b" -L unit
}

# Every tracked C file must be as clang-format (the repo's .clang-format)
# writes it; the whole-tree formatting commit is in .git-blame-ignore-revs.
run_format() {
	local files bad=() f
	if git -C "$here" rev-parse --git-dir >/dev/null 2>&1; then
		mapfile -t files < <(git -C "$here" ls-files '*.c' '*.h')
	else
		mapfile -t files < <(find lib rings server worker tools tests \
			-name '*.[ch]' | sort)
	fi
	if [ "${1:-}" = --fix ]; then
		clang-format -i "${files[@]}"
		log "formatted ${#files[@]} C files"
		return 0
	fi
	for f in "${files[@]}"; do
		clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
	done
	if [ ${#bad[@]} -ne 0 ]; then
		log "not formatted as .clang-format says: ${bad[*]}"
		log "fix with: scripts/setup.sh format --fix (then review and commit)"
		return 1
	fi
	log "format: ${#files[@]} C files follow .clang-format"
}

run_tests() {
	run_format
	run_minimal
	# KVR_REQUIRE_TORCH / KVR_REQUIRE_REDIS: the torch and L2 tests must
	# run here, never skip.
	# KVR_BUILD_BENCH: test_cli runs kvring-bench, install_tree installs
	# it.
	build "$here/build" -DKVR_REQUIRE_TORCH=ON -DKVR_REQUIRE_REDIS=ON \
		-DKVR_BUILD_BENCH=ON
	run_ctest "$here/build"
	run_asan
}

# The sanitizers' options for every run in the ASan tree: leaks count, and
# the first report stops the process (libFuzzer then keeps the input).
asan_env=(ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1)

# One clang tree under ASan+UBSan builds the suites and the fuzz targets;
# asan_configure DIR configures it (the fuzz command builds only the
# targets in the same tree).
asan_configure() {
	# The fault-injection run is shorter here: the gcc pass ran the minute.
	CC=clang cmake -S "$here" -B "$1" -DKVR_WERROR=ON \
		-DKVR_SANITIZE=address,undefined -DKVR_BUILD_FUZZ=ON \
		-DKVR_STRESS_SECONDS=20 -DKVR_BUILD_BENCH=ON >/dev/null
}

run_asan() {
	local b=$here/build-asan
	asan_configure "$b"
	cmake --build "$b" -j"$jobs"
	(
		export KVR_TEST_TIMEOUT_MULT=4 "${asan_env[@]}"
		run_ctest "$b"
	)
}

# fuzz [SECONDS]: one libFuzzer run per target, SECONDS each, one after
# the other. The corpus each run grows stays in the build tree and is the
# next run's starting point; the committed seeds are read too. A finding
# (crash, sanitizer report, leak, timeout) leaves its input in
# build-asan/fuzz-findings/<target>/; the run goes on with the next target
# and the command exits 1 at the end. The full output of each run is in
# build-asan/fuzz-logs/<target>.log.
run_fuzz() {
	local secs=${1:-300} b=$here/build-asan t bin out corp art rc found=0
	local last inputs rate cov ft units repro
	if ! [[ $secs =~ ^[1-9][0-9]*$ ]]; then
		echo "usage: scripts/setup.sh fuzz [SECONDS]" >&2
		return 2
	fi
	asan_configure "$b"
	local targets=()
	for t in "$here"/tests/fuzz/fuzz_*.c; do
		targets+=("$(basename "$t" .c)")
	done
	cmake --build "$b" -j"$jobs" --target "${targets[@]}"
	mkdir -p "$b/fuzz-corpus" "$b/fuzz-findings" "$b/fuzz-logs"
	log "fuzz: ${#targets[@]} targets, ${secs} s each"
	printf '%-16s %12s %9s %6s %7s %8s  %s\n' target inputs inputs/s \
		cov ft corpus result
	for t in "${targets[@]}"; do
		bin=$b/tests/fuzz/$t
		corp=$b/fuzz-corpus/$t
		art=$b/fuzz-findings/$t
		out=$b/fuzz-logs/$t.log
		mkdir -p "$corp" "$art"
		rc=0
		env "${asan_env[@]}" "$bin" -max_total_time="$secs" \
			-timeout=25 -print_final_stats=1 \
			-artifact_prefix="$art/" "$corp" \
			"$here/tests/fuzz/corpus/$t" >"$out" 2>&1 || rc=$?
		# The last status line: "#N <event> cov: C ft: F corp: U/..."
		last=$(grep -E '^#[0-9]+' "$out" | tail -n 1 || true)
		inputs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out")
		[ -n "$inputs" ] || inputs=$(sed -E 's/^#([0-9]+).*/\1/' <<<"$last")
		rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$out")
		[ -n "$rate" ] || rate=$(sed -nE 's/.*exec\/s: ([0-9]+).*/\1/p' <<<"$last")
		cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
		ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
		units=$(find "$corp" -type f | wc -l)
		repro=$(sed -nE 's/.*Test unit written to (.*)$/\1/p' "$out" | tail -n 1)
		if [ $rc -eq 0 ]; then
			printf '%-16s %12s %9s %6s %7s %8s  %s\n' "$t" \
				"${inputs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" \
				"$units" "no finding"
			continue
		fi
		found=1
		printf '%-16s %12s %9s %6s %7s %8s  %s\n' "$t" "${inputs:-?}" \
			"${rate:-?}" "${cov:-?}" "${ft:-?}" "$units" \
			"FINDING (exit $rc)"
		grep -m 1 -E 'ERROR: |runtime error|^fuzz_[a-z_0-9]+: ' "$out" |
			sed 's/^/    /' || true
		echo "    reproducer: ${repro:-none written, see $out}"
		echo "    replay: $bin ${repro:-FILE}"
		echo "    log: $out"
	done
	if [ $found -ne 0 ]; then
		log "fuzz: FINDINGS (reproducers above; add each to tests/fuzz/corpus/<target>/ with its fix)"
		return 1
	fi
	log "fuzz: no finding; corpora in $b/fuzz-corpus"
}

run_tsan() {
	local b=$here/build-tsan
	build "$b" -DKVR_SANITIZE=thread
	KVR_TEST_TIMEOUT_MULT=4 run_ctest "$b"
}

run_stress() {
	build "$here/build"
	"$here/build/tools/kvring-stress" --workers 4 --seconds 600 \
		--kill-every 200 --stop-every 200 --pool-size 64M --seed 1 --json
}

# Benchmark-only peers live in their own tree so the default build never
# depends on them.
run_bench() {
	local b=$here/build-bench
	# fio: kvring-bench disk's baseline, O_DIRECT sequential writes and
	# reads of the disk tier's chunk size on the same file system.
	install_deps "${deps[@]}" libzmq3-dev gnuplot-nox fio
	cmake -S "$here" -B "$b" -DKVR_BUILD_TESTS=OFF -DKVR_BUILD_BENCH=ON >/dev/null
	cmake --build "$b" -j"$jobs" --target kvringd kvring-bench
	mkdir -p "$b/plots"
	"$b/tools/kvring-bench" all --plot "$b/plots" "$@"
}

case ${1:-} in
deps) install_deps "${deps[@]}" ;;
stress) install_deps "${deps[@]}" && run_stress ;;
bench) shift && run_bench "$@" ;;
run) install_deps "${deps[@]}" && run_main ;;
test) install_deps "${deps[@]}" && run_tests ;;
format) shift && install_deps "${deps[@]}" && run_format "$@" ;;
asan) install_deps "${deps[@]}" && run_asan ;;
fuzz) shift && install_deps "${deps[@]}" && run_fuzz "$@" ;;
tsan) install_deps "${deps[@]}" && run_tsan ;;
*)
	echo "usage: scripts/setup.sh run|test|format|asan|fuzz|tsan|stress|bench|deps" >&2
	exit 2
	;;
esac
