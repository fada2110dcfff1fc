#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Smoke test: a QEMU 11.1 guest of the project's test kernel enumerates the
# emulated UB controller served by ub-fabric over vfio-user, twice against
# the same daemon (the server re-listens after a disconnect), while a second
# guest uses the other controller.
#
# usage: tools/ub-fabric/tests/qemu-smoke.sh
# Needs what scripts/test builds: the cached test kernel, QEMU 11.1 root,
# build/test/initramfs.cpio.gz and target/release/ub-vmtest.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
cache=${UB_CACHE:-$HOME/.cache/ub-stack}
qemu=$(ls "$cache"/qemu-root-*/ub-qemu-system-x86_64 | head -1)
kernel=$(ls "$cache"/kbuild-test-*/arch/x86/boot/bzImage | head -1)
initrd=$root/build/test/initramfs.cpio.gz
vmtest=$root/target/release/ub-vmtest
for f in "$qemu" "$kernel" "$initrd" "$vmtest"; do
	[ -e "$f" ] || { echo "qemu-smoke: missing $f (run scripts/test first)"; exit 4; }
done
cd "$root"
cargo build --quiet -p ub-fabric
tmp=$(mktemp -d)
./target/debug/ub-fabric run --builtin back-to-back --socket-dir "$tmp/sock" >"$tmp/daemon.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 50); do [ -S "$tmp/sock/vm1.sock" ] && break; sleep 0.1; done
fail=0
for round in 1 2; do
	"$vmtest" run --qemu "$qemu" --kernel "$kernel" --initrd "$initrd" --out "$tmp/vm$round" \
		--guest "vm0,vfio-user=$tmp/sock/vm0.sock" --guest "vm1,vfio-user=$tmp/sock/vm1.sock" \
		--timeout 240 >"$tmp/vmtest$round.log" 2>&1 || { cat "$tmp/vmtest$round.log"; fail=1; }
	for g in vm0 vm1; do
		line=$(grep -m1 '\[19e5:d0b1\] type 00 class 0x0c8000' "$tmp/vm$round/$g.console" || true)
		if [ -n "$line" ]; then
			echo "ok round $round $g: $line"
		else
			echo "not ok round $round $g: the device was not enumerated"
			fail=1
		fi
	done
done
# Round 3: a guest reads the controller through sysfs and BAR0 (the probe
# initramfs: tests/guest/init and tests/guest/probe.rs), judged by the
# harness from its KTAP.
kdir=$(dirname "$(dirname "$(dirname "$(dirname "$kernel")")")")
rustc --edition 2021 -O -C target-feature=+crt-static --target x86_64-unknown-linux-gnu \
	tools/ub-fabric/tests/guest/probe.rs -o "$tmp/ub-fabric-probe"
{
	for d in /bin /sbin /usr /usr/bin /dev /proc /sys /tmp; do echo "dir $d 0755 0 0"; done
	echo "nod /dev/console 0600 0 0 c 5 1"
	echo "file /bin/busybox /bin/busybox 0755 0 0"
	for a in $(/bin/busybox --list-full); do
		[ "$a" = bin/busybox ] || echo "slink /$a /bin/busybox 0777 0 0"
	done
	echo "file /init $root/tools/ub-fabric/tests/guest/init 0755 0 0"
	echo "file /usr/bin/ub-fabric-probe $tmp/ub-fabric-probe 0755 0 0"
} >"$tmp/cpio.list"
"$kdir/usr/gen_init_cpio" "$tmp/cpio.list" | gzip -9 >"$tmp/probe.cpio.gz"
if "$vmtest" run --qemu "$qemu" --kernel "$kernel" --initrd "$tmp/probe.cpio.gz" --out "$tmp/vm3" \
	--guest "vm0,vfio-user=$tmp/sock/vm0.sock" --timeout 240 \
	--expect-selftest ub_fabric_enumerated --expect-selftest ub_fabric_class \
	--expect-selftest ub_fabric_msix_cap --expect-selftest ub_fabric_bar >"$tmp/vmtest3.log" 2>&1; then
	echo "ok round 3 vm0: sysfs IDs, class, MSI-X capability and BAR0 registers read in the guest"
	sed -n 's/^# \(IDENT\|SCRATCH\|PORT0\)/  \1/p' "$tmp/vm3/vm0.ktap"
else
	echo "not ok round 3"; cat "$tmp/vmtest3.log"; cat "$tmp/vm3/vm0.ktap" 2>/dev/null; fail=1
fi

./target/debug/ub-fabric counters --control "$tmp/sock/control.sock" >"$tmp/counters.json" ||
	{ echo "not ok: control socket"; fail=1; }
grep -c 'guest disconnected' "$tmp/daemon.log" | grep -qx 5 ||
	{ echo "not ok: expected 5 disconnects"; cat "$tmp/daemon.log"; fail=1; }
[ $fail -eq 0 ] && echo "qemu-smoke: ok" || echo "qemu-smoke: FAILED"
exit $fail
