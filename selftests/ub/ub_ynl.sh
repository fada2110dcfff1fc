#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The kernel's own ynl CLI (tools/net/ynl/pyynl/cli.py, unchanged) works in
# the guest: it validates the project's netlink specs against the kernel's
# schema, talks generic netlink (the nlctrl family lists itself), and, when
# ub.ko is loaded on a UB controller and registers the `ub` family, dumps
# the devices with dev-get and shows a port-change-ntf on the "monitor"
# group when a port's administrative state is toggled with port-set.
#
# Skips everything (exit 4) when the guest has no Python (an initramfs
# built without scripts/mkinitramfs --pyroot). The ub family cases are
# skipped, each with its reason, when no UB controller, no module or no
# `ub` family is present; require them with
#   ub-vmtest --expect-selftest ub_ynl.sh.ub-dev-get-dump \
#             --expect-selftest ub_ynl.sh.ub-monitor-port-event

DIR=$(dirname "$0")
. "$DIR/../kselftest/ktap_helpers.sh"

MODULE=${UB_MODULE:-/lib/modules/ub.ko}
NLCTRL_SPEC=/usr/share/ynl/specs/nlctrl.yaml
UB_SPEC=/usr/share/ub/specs/ub.yaml
# From drivers/ub/proto/src/controller/mod.rs (Documentation/ub/controller.rst).
VENDOR=0x19e5
DEVICE=0xd0b1
# Down/up toggles of the port before the monitor must have seen an event:
# ynl takes seconds to start and subscribe under TCG, and each port-set is
# another ynl run.
MONITOR_TRIES=10
# Each ynl run given --spec validates the spec with jsonschema first, which
# costs 2.5-5 s under TCG: ub-spec-validates and ub-dev-get-dump run the
# commands as a user types them, the other runs skip the validation.
FAST=--no-schema
TMP=${TMPDIR:-/tmp}/ub_ynl.$$

ktap_print_header

if ! command -v python3 >/dev/null || ! command -v ynl >/dev/null; then
	ktap_skip_all "no python3 or ynl in this guest (initramfs built without --pyroot)"
	exit "$KSFT_SKIP"
fi
for f in "$NLCTRL_SPEC" "$UB_SPEC"; do
	if [ ! -f "$f" ]; then
		ktap_skip_all "no $f in this guest"
		exit "$KSFT_SKIP"
	fi
done
mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT

ktap_set_plan 4

# A result with its reason: "ok N name # SKIP reason".
skip_with_reason() {
	__ktap_test ok "$1" "SKIP $2"
	KTAP_CNT_SKIP=$((KTAP_CNT_SKIP + 1))
}

# Runs a python3 one-liner over the JSON in file $1 (exit status = verdict).
json_check() {
	file=$1
	shift
	python3 -c "import json, sys; d = json.load(open(sys.argv[1])); $*" "$file"
}

# Hundredths of a second since boot.
now() {
	read -r up _ </proc/uptime
	echo $((${up%.*} * 100 + 1${up#*.} - 100)) # "1" first: 08 is not octal
}

# ynl with JSON output into $TMP/out; says how long it took (Python under
# TCG is slow: the figure shows where a guest's time goes).
run_ynl() {
	t0=$(now)
	ynl "$@" --output-json >"$TMP/out" 2>&1
	rc=$?
	t1=$(now)
	echo "# ynl $* (exit $rc, $(((t1 - t0) * 10)) ms)"
	[ $rc -eq 0 ] || head -n 20 "$TMP/out" | cut -c1-200 | sed 's/^/# /'
	return $rc
}

# Leaves the families' names in $TMP/families.
nlctrl_lists_itself() {
	run_ynl --spec "$NLCTRL_SPEC" $FAST --dump getfamily || return 1
	json_check "$TMP/out" 'f = [x["family-name"] for x in d]; print("# families:", *f)
sys.exit(0 if "nlctrl" in f else 1)' >"$TMP/families"
	rc=$?
	cat "$TMP/families"
	return $rc
}

ub_spec_validates() {
	run_ynl --spec "$UB_SPEC" --validate || return 1
	[ ! -s "$TMP/out" ] || { head -n 20 "$TMP/out" | sed 's/^/# /'; return 1; }
}

# The ub family cases need a controller, the module and the family. Load
# ub.ko first, so that the nlctrl dump below shows whether it registered
# the family (one ynl run less: each costs seconds).
why=
loaded_here=0
controller=
for d in /sys/bus/pci/devices/*; do
	[ -r "$d/vendor" ] || continue
	if [ "$(cat "$d/vendor")" = $VENDOR ] && [ "$(cat "$d/device")" = $DEVICE ]; then
		controller=$(basename "$d")
		break
	fi
done
if [ -z "$controller" ]; then
	why="no UB controller ($VENDOR:$DEVICE) in /sys/bus/pci/devices"
elif [ ! -d /sys/module/ub ] && [ ! -f "$MODULE" ]; then
	why="no module at $MODULE"
elif [ ! -d /sys/module/ub ]; then
	if insmod "$MODULE"; then
		loaded_here=1
	else
		why="insmod $MODULE failed"
	fi
fi
ktap_test_result "nlctrl-getfamily" nlctrl_lists_itself
ktap_test_result "ub-spec-validates" ub_spec_validates

if [ -z "$why" ] && ! grep -q ' ub\( \|$\)' "$TMP/families" 2>/dev/null; then
	why="no ub generic netlink family (ub.ko does not register it)"
fi

dev_get_names_a_device() {
	run_ynl --spec "$UB_SPEC" --dump dev-get || return 1
	json_check "$TMP/out" 'n = [x["name"] for x in d if x.get("name")]; print("# devices:", *n)
sys.exit(0 if n else 1)'
}

# The first port of the dump, as "DEV-INDEX INDEX".
first_port() {
	ynl --spec "$UB_SPEC" $FAST --dump port-get --output-json >"$TMP/ports" 2>/dev/null &&
		json_check "$TMP/ports" 'p = d[0]; print(p["dev-index"], p["index"])'
}

port_set_admin() { # DEV PORT 0|1
	ynl --spec "$UB_SPEC" $FAST --do port-set \
		--json "{\"dev-index\": $1, \"index\": $2, \"admin-up\": $3}" >/dev/null
}

# The monitor must be subscribed before the port changes, and ynl takes
# seconds to start under TCG: toggle the port until an event arrives.
monitor_shows_port_event() {
	port=$(first_port) || { echo "# no port in the port-get dump"; return 1; }
	set -- $port
	echo "# toggling port $2 of device $1"
	PYTHONUNBUFFERED=1 ynl --spec "$UB_SPEC" $FAST --subscribe monitor --output-json \
		>"$TMP/monitor" 2>&1 &
	mon=$!
	i=0 seen=1
	while [ $i -lt $MONITOR_TRIES ]; do
		i=$((i + 1))
		port_set_admin "$1" "$2" 0 && port_set_admin "$1" "$2" 1 ||
			{ echo "# port-set admin-up failed"; break; }
		sleep 1
		if grep -q '"port-change-ntf"' "$TMP/monitor"; then
			seen=0
			break
		fi
	done
	# SIGTERM: a background job of a script ignores SIGINT, and so does
	# Python then; the monitor's output is unbuffered, nothing is lost.
	kill $mon 2>/dev/null
	{ wait $mon; } 2>/dev/null # no "Terminated" line
	head -n 20 "$TMP/monitor" | cut -c1-200 | sed 's/^/# monitor: /'
	[ $seen -eq 0 ] || { echo "# no port-change-ntf after $i toggles"; return 1; }
	# One of the events names the port that was toggled.
	python3 -c '
import json, sys
dev, port = int(sys.argv[2]), int(sys.argv[3])
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    a = m.get("msg", {})
    if m.get("name") == "port-change-ntf" and a.get("dev-index") == dev and a.get("index") == port:
        sys.exit(0)
sys.exit(1)' "$TMP/monitor" "$1" "$2"
}

if [ -n "$why" ]; then
	skip_with_reason "ub-dev-get-dump" "$why"
	skip_with_reason "ub-monitor-port-event" "$why"
else
	ktap_test_result "ub-dev-get-dump" dev_get_names_a_device
	ktap_test_result "ub-monitor-port-event" monitor_shows_port_event
fi
[ $loaded_here -eq 0 ] || rmmod ub

ktap_finished
