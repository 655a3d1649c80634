#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ctest python_wheel: the Python package as a virtualenv user gets it.
#   1. the wheel builds offline (cmake/kvr_wheel.cmake, what the `wheel`
#      target runs) with libkvring.so inside, versioned as the library;
#   2. pip installs it into a fresh venv (its own pip, no system
#      site-packages) and `import kvring` loads the bundled library with
#      nothing set; kvring.__version__ == kvr_version();
#   3. without a kvringd, kvring.connect fails naming the socket path it
#      tried and KVRING_SOCKET, the setting that chooses it;
#   4. without torch, kvring.torch says what to install;
#   5. the README quick start runs in that venv against a real kvringd;
#   6. `pip install --no-build-isolation worker/python` (the source, no
#      library inside) installs into a --system-site-packages venv, and
#      the wheel over it gives kvring.torch with Debian's torch.
# Usage: test_wheel.sh SOURCE_DIR LIBKVRING SONAME VERSION KVRINGD
set -euo pipefail

src=$1 lib=$2 soname=$3 version=$4 kvringd=$5
py=/usr/bin/python3
kvr_test=python_wheel kvr_tag=wheel
# Nothing from this shell leaks into the venv's python (clean_env): no
# KVRING_LIB, no PYTHONPATH, no LD_LIBRARY_PATH.
# shellcheck source=tests/install/common.sh
. "$(dirname "$0")/common.sh"

step "1. build the wheel"
cmake -DSRC="$src/worker/python" -DLIB="$lib" -DSONAME="$soname" \
	-DVERSION="$version" -DPY="$py" -DSTAGE="$scratch/stage" \
	-DOUT="$scratch/dist" -P "$src/cmake/kvr_wheel.cmake" \
	>"$scratch/wheel.log" 2>&1 || fail "kvr_wheel.cmake: $(cat "$scratch/wheel.log")"
whl=$(echo "$scratch"/dist/kvring-"$version"-py3-none-linux_*.whl)
[ -f "$whl" ] || fail "no kvring-$version-py3-none-linux_*.whl in $scratch/dist: $(ls "$scratch/dist")"
members=$("$py" -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$whl")
grep -qx "kvring/$soname" <<<"$members" || fail "the wheel lacks kvring/$soname: $members"
grep -qx "kvring/py.typed" <<<"$members" || fail "the wheel lacks kvring/py.typed"
! grep -q "_install.py" <<<"$members" || fail "the wheel carries cmake --install's _install.py"

step "2. pip install into a fresh venv, import with nothing set"
"$py" -m venv "$scratch/venv" || fail "python3 -m venv (python3-venv installed?)"
vpy=$scratch/venv/bin/python
"$scratch/venv/bin/pip" install --no-index --disable-pip-version-check \
	--quiet "$whl" >"$scratch/pip.log" 2>&1 || fail "pip install $whl: $(cat "$scratch/pip.log")"
out=$(cd "$scratch" && "${clean_env[@]}" "$vpy" -c '
import kvring, kvring._lib as l
print(kvring.__version__, kvring.lib_version(), l.load().kvring_path)') ||
	fail "import kvring in the venv"
read -r pyver libver libpath <<<"$out"
[ "$pyver" = "$version" ] || fail "kvring.__version__ is $pyver, the project is $version"
[ "$libver" = "$version" ] || fail "kvr_version() is $libver, the package is $pyver"
case $libpath in
"$scratch/venv/lib/"*"/site-packages/kvring/$soname") ;;
*) fail "the venv's kvring loaded $libpath, not the library in its wheel" ;;
esac

step "3. connect without a kvringd names the socket and KVRING_SOCKET"
connect='
import kvring, sys
try:
    kvring.connect(model="m", layers=1, kv_heads=1, head_size=64,
                   dtype_bytes=2, chunk_tokens=16)
except kvring.KvringError as e:
    print(e)
    sys.exit(0)
sys.exit("connected to a kvringd that should not exist")'
missing=$scratch/no-such-kvringd.sock
out=$(cd "$scratch" && "${clean_env[@]}" KVRING_SOCKET="$missing" "$vpy" -c "$connect") ||
	fail "connect without a server: $out"
case $out in
*"$missing"*KVRING_SOCKET*) ;;
*) fail "the error does not name $missing and KVRING_SOCKET: $out" ;;
esac
# The default path (no KVRING_SOCKET): the error names that path too.
out=$(cd "$scratch" && "${clean_env[@]}" "$vpy" -c "$connect") ||
	fail "connect to the default socket: $out"
case $out in
*"/kvringd.sock"*KVRING_SOCKET*) ;;
*) fail "the default-socket error does not name its path and KVRING_SOCKET: $out" ;;
esac

step "4. kvring.torch without torch says what to install"
out=$(cd "$scratch" && "${clean_env[@]}" "$vpy" -c '
import sys
try:
    import kvring.torch
except ImportError as e:
    print(e); sys.exit(0)
sys.exit("kvring.torch imported in a venv without torch")') || fail "$out"
case $out in
*kvring.torch*"pip install torch"*python3-torch*) ;;
*) fail "the ImportError does not say what to install: $out" ;;
esac

step "5. the README quick start against a real kvringd"
"$py" - "$src/README.md" >"$scratch/quick.py" <<'PY'
import sys
text = open(sys.argv[1]).read()
sec = text.split("## Use it from Python", 1)[1]
print(sec.split("```python\n", 1)[1].split("```", 1)[0])
PY
sock=$scratch/k.sock
# kvringd's default pool (1 GiB, not pre-faulted): the quick start stores
# three 32 MiB chunks, which its default quotas allow on that pool.
start_kvringd kvringd "$kvringd" "$sock" --name "kvring-wheel-$$" \
	--no-prefault --allow-root
out=$(cd "$scratch" && "${clean_env[@]}" KVRING_SOCKET="$sock" "$vpy" quick.py 2>&1) ||
	fail "README quick start in the venv: $out"
grep -q "^cached: 3 of 3 chunks" <<<"$out" || fail "README quick start printed: $out"

step "6. the source tree installs; the wheel brings kvring.torch to a system-site venv"
"$py" -m venv --without-pip --system-site-packages "$scratch/tvenv" ||
	fail "python3 -m venv --system-site-packages"
tpy=$scratch/tvenv/bin/python
# A copy: pip builds in the tree it is given.
cp -r "$src/worker/python" "$scratch/srcpkg"
rm -rf "$scratch/srcpkg/build" "$scratch/srcpkg"/*.egg-info
"$py" -m pip --python "$tpy" install --no-index --no-build-isolation \
	--no-deps --disable-pip-version-check --quiet "$scratch/srcpkg" \
	>"$scratch/pip-src.log" 2>&1 || fail "pip install worker/python: $(cat "$scratch/pip-src.log")"
out=$(cd "$scratch" && "${clean_env[@]}" KVRING_LIB="$lib" "$tpy" -c '
import kvring; print(kvring.__file__, kvring.lib_version())') ||
	fail "import kvring installed from the source tree"
case $out in
"$scratch/tvenv/lib/"*" $version") ;;
*) fail "the source install is not the venv's: $out" ;;
esac
"$py" -m pip --python "$tpy" install --no-index --no-deps --force-reinstall \
	--disable-pip-version-check --quiet "$whl" >"$scratch/pip-t.log" 2>&1 ||
	fail "pip install the wheel over the source install: $(cat "$scratch/pip-t.log")"
if "$py" -c 'import torch' 2>/dev/null; then
	out=$(cd "$scratch" && "${clean_env[@]}" KVRING_SOCKET="$sock" "$tpy" -c '
import kvring, kvring.torch, kvring.kv, kvring._lib as l, torch
with kvring.connect(model="m", layers=1, kv_heads=1, head_size=64,
                    dtype_bytes=2, chunk_tokens=16) as c:
    keys = c.keys(list(range(16)))
    with c.store(keys, [c.chunk_bytes]) as tx:
        torch.frombuffer(tx.slots[0][1], dtype=torch.uint8).fill_(7)
    with c.retrieve(keys) as tx:
        assert torch.frombuffer(tx.slots[0][1], dtype=torch.uint8).eq(7).all()
print(l.load().kvring_path)' 2>&1) || fail "kvring.torch in the system-site venv: $out"
	case $out in
	*"$scratch/tvenv/lib/"*"/kvring/$soname") ;;
	*) fail "kvring.torch did not use the wheel's library: $out" ;;
	esac
else
	fail "/usr/bin/python3 cannot import torch (apt-get install python3-torch, or scripts/setup.sh deps)"
fi
kill -TERM "$srv_pid"
wait "$srv_pid" || fail "kvringd exited $?: $(cat "$scratch/kvringd.log")"
srv_pid=
echo "python_wheel: ok"
