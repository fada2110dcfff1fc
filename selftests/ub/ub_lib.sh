# SPDX-License-Identifier: GPL-2.0
#
# Shared by the selftests that load ub.ko (sourced after ktap_helpers.sh;
# the ub_require* checks after ktap_print_header). Installed beside them
# (TEST_FILES).

MODULE=${UB_MODULE:-/lib/modules/ub.ko}
UBCTL=$(command -v ubctl)

# ub_require_module: skips the whole test (exit 4) without the module, or
# if ub is loaded already.
ub_require_module() {
	if [ ! -f "$MODULE" ]; then
		ktap_skip_all "no module at $MODULE"
		exit "$KSFT_SKIP"
	fi
	if [ -d /sys/module/ub ]; then
		ktap_skip_all "ub is already loaded"
		exit "$KSFT_SKIP"
	fi
}

# ub_require TOOL...: skips the whole test (exit 4) without each TOOL, the
# module, or a UB controller, or if ub is loaded already.
ub_require() {
	for t in "$@"; do
		if ! command -v "$t" > /dev/null; then
			ktap_skip_all "no $t"
			exit "$KSFT_SKIP"
		fi
	done
	ub_require_module
	if ! grep -qs 0x19e5 /sys/bus/pci/devices/*/vendor ||
		! grep -qs 0xd0b1 /sys/bus/pci/devices/*/device; then
		ktap_skip_all "no UB controller"
		exit "$KSFT_SKIP"
	fi
}

# ub_require_peer: skips the whole test (exit 4) in a guest booted without
# its peer (ubtest.solo=1).
ub_require_peer() {
	if grep -qw ubtest.solo=1 /proc/cmdline; then
		ktap_skip_all "no peer guest (ubtest.solo=1)"
		exit "$KSFT_SKIP"
	fi
}

# This guest's host number in the fabric (vm0 -> 0), its peer's, and the
# addresses the fabric routes to them (Documentation/ub/fabric.rst,
# "Addresses").
guest=$(sed -n 's/.*ubtest.guest=vm\([0-9]*\).*/\1/p' /proc/cmdline)
guest=${guest:-0}
peer=$((1 - guest))
me=10.0.$((guest + 1)).100
them=10.0.$((peer + 1)).100

# Asks the host to change the fabric: scripts/fabric-guest-test runs
# `ub-fabric ARGS` on its control socket when it reads this line on the
# selftest stream (written there at once: the guest's init prints a test's
# output only when the test ends). The wait lets the host poll it.
fabric() {
	echo "# ub-host-hook: $*" > /dev/ttyS1
	echo "# asked the host: ub-fabric $*"
	sleep 0.5
}

# ub_links_up [DEV]: waits up to 60 s for both ports of DEV (default 0)
# to reach DLL_Normal; on a timeout shows the ports and fails.
ub_links_up() {
	i=0
	until [ "$("$UBCTL" -j port show "${1:-0}" | grep -o '"dll-state":"normal"' | wc -l)" -ge 2 ]; do
		i=$((i + 1))
		if [ $i -gt 600 ]; then
			"$UBCTL" -j port show "${1:-0}" 2>&1 | sed 's/^/# /'
			return 1
		fi
		sleep 0.1
	done
}

# ub_configure: once both links of device 0 are up, this guest's address
# and a per-packet route to the test fabric over both planes.
ub_configure() {
	ub_links_up && "$UBCTL" addr add 0 "$me" &&
		"$UBCTL" route add 0 10.0.0.0/16 ports 0,1 per-packet
}

# ub_peer_answers [TRIES]: waits until the peer guest (which configures its
# address at about the same time) answers one echo, at most TRIES (120)
# tries of a second each.
ub_peer_answers() {
	i=0
	until "$UBCTL" ping -c 1 -W 1 -I 0 "$them" > /dev/null 2>&1; do
		i=$((i + 1))
		[ $i -le "${1:-120}" ] || return 1
	done
}

# ub_channel_field KEY FIELD: a number from the line of this guest's
# channel KEY (device 0) in ubctl tp show, once the channel is in RTS and
# has received data; fails until then.
ub_channel_field() {
	"$UBCTL" -j -s tp show 0 2> /dev/null |
		awk '{ gsub(/\},\{"dev-index"/, "}\n{\"dev-index\""); print }' |
		grep "\"key\":$1," | grep '"state":"rts"' | grep -E '"rx-packets":[1-9]' |
		grep -o "\"$2\":[0-9]*" | head -n 1 | cut -d: -f2 | grep .
}

# ub_wrong_peer: device 0's count of packets dropped from a source other
# than the channel's peer (net-stats wrong-peer).
ub_wrong_peer() {
	"$UBCTL" -j stats 0 | grep -o '"wrong-peer":[0-9]*' | head -n 1 | cut -d: -f2
}

# ub_forge ARGS: asks the host for `ub-fabric forge ARGS`, like `fabric`
# without its wait: the forgeries must reach the host while a stream runs
# (it runs its hooks within about 100 ms).
ub_forge() {
	echo "# ub-host-hook: forge $*" > /dev/ttyS1
	echo "# asked the host: ub-fabric forge $*"
}
