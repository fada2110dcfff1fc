# Common environment for the project's scripts. Source it; do not run it.
#
# Everything big (kernel source and builds, QEMU root, bindgen) lives in a
# cache directory outside the clone, keyed by the versions that produced it:
#   UB_CACHE (default: $XDG_CACHE_HOME/ub-stack or ~/.cache/ub-stack)

set -euo pipefail

UB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/versions
. "$UB_ROOT/scripts/versions"

# A CI environment may come without HOME: take the user's home directory.
export HOME=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
UB_CACHE=${UB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ub-stack}
# User-space crates build with the machine's rustup toolchain (it has
# clippy), also when PATH does not name ~/.cargo/bin.
if [ -x "$HOME/.cargo/bin/cargo" ]; then
	export PATH="$HOME/.cargo/bin:$PATH"
fi
mkdir -p "$UB_CACHE"

# Cargo's output: ./target, or the caller's CARGO_TARGET_DIR. CI
# (UB_CARGO_CACHE=1, set by .ci/run) keeps it in the cache instead, keyed
# by Cargo.lock and the toolchain, so that a clean clone does not build
# every crate of the registry again (four times: check, test, release and
# the guests' static binaries); only the workspace's own crates rebuild.
# Incremental data would only grow there. Older keys are removed.
if [ "${UB_CARGO_CACHE:-0}" = 1 ] && [ -z "${CARGO_TARGET_DIR:-}" ]; then
	cargo_key=$( (cat "$UB_ROOT/Cargo.lock" && rustc -V) | sha256sum | cut -c1-16)
	export CARGO_TARGET_DIR=$UB_CACHE/cargo-target-$cargo_key CARGO_INCREMENTAL=0
	for d in "$UB_CACHE"/cargo-target-*; do
		[ "$d" = "$CARGO_TARGET_DIR" ] || rm -rf "$d"
	done
fi
CARGO_TARGET=${CARGO_TARGET_DIR:-$UB_ROOT/target}

BINDGEN_DIR=$UB_CACHE/bindgen-$BINDGEN_VERSION
# Debian versions contain ':' and '~'; keep directory names plain.
ub_key() { printf '%s' "$1" | tr ':~+' '___'; }
LINUX_SRC=$UB_CACHE/linux-$(ub_key "$LINUX_SOURCE_VERSION")/src
QEMU_ROOT=$UB_CACHE/qemu-root-$(ub_key "$QEMU_VERSION")
APT_TRIXIE=$UB_CACHE/apt-trixie-backports

# The kernel build must use Debian's Rust 1.96 in /usr/bin and the pinned
# bindgen, not the rustup proxies in ~/.cargo/bin (no bindgen, different
# std). User-space crates build with whatever cargo PATH gives.
KERNEL_PATH="$BINDGEN_DIR/bin:/usr/bin:/bin:/usr/sbin:/sbin:$PATH"
KMAKE_FLAGS=(LLVM=-$LLVM_VERSION)
kmake() { PATH=$KERNEL_PATH make "${KMAKE_FLAGS[@]}" "$@"; }

log() { printf '\033[1m[%s]\033[0m %s\n' "$(basename "$0")" "$*" >&2; }
die() { printf '\033[1;31m[%s] error:\033[0m %s\n' "$(basename "$0")" "$*" >&2; exit 1; }

# Options for apt-get/apt-cache that use a private configuration for
# trixie-backports and never touch the host's sources.
apt_trixie_opts() {
	printf '%s\n' \
		-o "Dir::Etc::SourceList=$APT_TRIXIE/sources.list" \
		-o Dir::Etc::SourceParts=/dev/null \
		-o "Dir::State::Lists=$APT_TRIXIE/lists" \
		-o "Dir::Cache::Archives=$APT_TRIXIE/archives" \
		-o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= \
		-o APT::Sandbox::User=root
}

# Kernel build directory of a flavour ("test" or "debug"). The key hashes
# everything the kernel image depends on: source version, the fragments and
# the toolchain versions.
kernel_build_dir() {
	local flavour=$1 key
	key=$( {
		echo "$LINUX_SOURCE_VERSION"
		cat "$UB_ROOT/scripts/kconfig/base.config" "$UB_ROOT/scripts/kconfig/$flavour.config"
		/usr/bin/rustc --version; "clang-$LLVM_VERSION" --version | head -1
		echo "bindgen $BINDGEN_VERSION"
	} | sha256sum | cut -c1-16)
	echo "$UB_CACHE/kbuild-$flavour-$key"
}

# The Python tree of scripts/mkpyroot (the guests' ynl CLI). The key hashes
# the script, the Debian packages it takes and the kernel source its pyynl
# and schemas come from.
pyroot_dir() {
	local key
	key=$( {
		cat "$UB_ROOT/scripts/mkpyroot"
		echo "$PYROOT_SUITE $PYROOT_PYTHON $PYROOT_PACKAGES $LINUX_SOURCE_VERSION"
	} | sha256sum | cut -c1-16)
	echo "$UB_CACHE/pyroot-$key"
}

# QEMU 11.1 (for vfio-user-pci) runs from the trixie root through a wrapper
# that scripts/setup writes.
QEMU_WRAPPER=$QEMU_ROOT/ub-qemu-system-x86_64

# Builds ub.ko into OUTDIR against the kernel build KDIR; a compiler, objtool
# or modpost warning fails the build. Extra arguments go to make.
build_module() { # OUTDIR KDIR [make args]
	local out=$1 k=$2 log
	shift 2
	mkdir -p "$out"
	log=$out/build.log
	make -s -C "$UB_ROOT" KDIR="$k" MO="$out" "$@" modules >"$log" 2>&1 || { cat "$log"; die "building ub.ko failed"; }
	if grep -qi 'warning' "$log"; then
		cat "$log"
		die "building ub.ko gave warnings"
	fi
}

# The mkinitramfs arguments that put the modules build_module made in DIR
# into a guest: ub.ko, and the samples that use its in-kernel API.
module_args() { # DIR
	MODULE_ARGS=(--module "$1/drivers/ub/ub.ko" --module "$1/samples/ub/ub_echo.ko")
}

# Builds the statically linked user-space binaries the guests carry and sets
# GUEST_BINS to the matching scripts/mkinitramfs arguments.
build_guest_bins() {
	RUSTFLAGS="-C target-feature=+crt-static" \
		cargo build --release --locked -q -p ub-proto-check -p ubctl -p ub-tp --target x86_64-unknown-linux-gnu
	local rel=$CARGO_TARGET/x86_64-unknown-linux-gnu/release
	GUEST_BINS=(--bin "$rel/ub-proto-check" --bin "$rel/ubctl" --bin "$rel/ub-nlcheck" --bin "$rel/ub-nlfuzz"
		--bin "$rel/ub-tp" --bin "$rel/ubperf")
}

# What every guest of ub.ko must show: its KUnit suites and the selftests
# that need no emulated controller, as ub-vmtest expectations.
UB_EXPECT_KUNIT=(--expect-kunit ub_proto_crc --expect-kunit ub_proto_link --expect-kunit ub_netlink)
UB_EXPECT=("${UB_EXPECT_KUNIT[@]}" --expect-selftest ub_module.sh --expect-selftest ub_proto_user.sh)
